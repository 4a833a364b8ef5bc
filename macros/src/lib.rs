//! Procedural macros of fusegraph.
use proc_macro::TokenStream;

/// Placeholder.
#[proc_macro]
pub fn optimizer(input: TokenStream) -> TokenStream {
    input
}
