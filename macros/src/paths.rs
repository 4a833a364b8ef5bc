//! Paths of generated code into the facade crate's private module, which re-exports what the
//! expansions use: the one place that names it.

use proc_macro2::{Ident, Span, TokenStream};
use quote::{quote, quote_spanned};

/// `::fusegraph::__private_0_1` (the private module of this version), its tokens at `span`.
pub fn private_at(span: Span) -> TokenStream {
    quote_spanned!(span=> ::fusegraph::__private_0_1)
}

/// `::fusegraph::__private_0_1`.
pub fn private() -> TokenStream {
    private_at(Span::call_site())
}

/// `::fusegraph::__private_0_1::name`.
fn private_item(name: &str) -> TokenStream {
    let p = private();
    let name = Ident::new(name, Span::call_site());
    quote!(#p::#name)
}

/// The scalar math functions of generated `f32` and `f64` code.
pub fn math() -> TokenStream {
    private_item("math")
}

/// The lane math functions of generated lane code.
pub fn lane() -> TokenStream {
    private_item("lane")
}

/// The runtime's layers.
pub fn layers() -> TokenStream {
    private_item("layers")
}
