//! `activation!`: parse the definitions, check each into the IR and derive its derivative,
//! expand each into a zero-sized type implementing the runtime's `Elementwise`. A definition
//! with a mistake still gets its type (an identity), so that one mistake gives one error.

mod check;
mod expand;
mod parse;

use crate::errors::Errors;
use proc_macro2::TokenStream;

pub fn expand(input: TokenStream) -> TokenStream {
    let defs = match syn::parse2::<parse::Defs>(input) {
        Ok(defs) => defs,
        Err(e) => return e.to_compile_error(),
    };
    let mut errs = Errors::default();
    let mut out = TokenStream::new();
    for def in &defs.0 {
        let checked = def
            .body
            .as_ref()
            .map_err(Clone::clone)
            .and_then(check::check);
        match checked {
            Ok(c) => out.extend(expand::activation(def, &c)),
            Err(e) => {
                errs.push(e);
                out.extend(expand::fallback(def));
            }
        }
    }
    if let Err(e) = errs.finish() {
        out.extend(e.to_compile_error());
    }
    out
}
