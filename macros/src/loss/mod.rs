//! `loss!`: parse the definitions, resolve each body into the typed IR and differentiate it by
//! the prediction, expand into a unit struct implementing the runtime's `Loss` with one lane
//! function for the value and one for the value and its gradient.

mod check;
mod expand;
mod parse;

use proc_macro2::TokenStream;

pub fn expand(input: TokenStream) -> TokenStream {
    let defs = match syn::parse2::<parse::Defs>(input) {
        Ok(defs) => defs,
        Err(e) => return e.to_compile_error(),
    };
    defs.0
        .iter()
        .map(|def| match check::check(def) {
            Ok(loss) => expand::loss(def, &loss),
            Err(e) => {
                let mut out = e.to_compile_error();
                out.extend(expand::fallback(def));
                out
            }
        })
        .collect()
}
