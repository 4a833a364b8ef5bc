//! `optimizer!`: parse the sections, check names and kinds into the typed IR, expand into a
//! hyper-parameter struct and an implementation of the runtime's `Rule`.

mod check;
mod expand;
mod parse;
mod tensorwise;

use proc_macro2::TokenStream;

pub fn expand(input: TokenStream) -> TokenStream {
    let def = match syn::parse2::<parse::Def>(input) {
        Ok(def) => def,
        Err(e) => return e.to_compile_error(),
    };
    match check::check(&def) {
        Ok(rule) => expand::rule(&def, &rule),
        Err(e) => {
            let mut out = e.to_compile_error();
            out.extend(expand::fallback(&def));
            out
        }
    }
}
