//! `#[model]`: parse the struct and its attribute, check the wiring (shape inference with
//! spanned errors), expand into an owning struct and an implementation of the runtime's `Model`.

mod check;
mod expand;
mod parse;
mod shapes;

use proc_macro2::TokenStream;

pub fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let def = match parse::parse(attr, item) {
        Ok(def) => def,
        Err(e) => return e.to_compile_error(),
    };
    match check::check(&def) {
        Ok(net) => expand::model(&def, &net),
        Err(e) => {
            let mut out = e.to_compile_error();
            out.extend(expand::fallback(&def));
            out
        }
    }
}
