//! Procedural macros of fusegraph. Each macro is `parse -> check -> expand` over a small typed
//! IR that keeps the user's spans; this file only dispatches.

mod errors;
mod expr;
mod optimizer;

use proc_macro::TokenStream;

/// Compiles an element-wise optimizer rule into a typed optimizer.
///
/// The language and what it generates are documented where the `fusegraph` crate re-exports
/// this macro (`fusegraph::optimizer!`).
#[proc_macro]
pub fn optimizer(input: TokenStream) -> TokenStream {
    optimizer::expand(input.into()).into()
}
