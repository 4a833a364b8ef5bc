//! Procedural macros of fusegraph. Each macro is `parse -> check -> expand` over a small typed
//! IR that keeps the user's spans; this file only dispatches.

mod activation;
mod constants;
mod errors;
mod expr;
mod loss;
mod model;
mod optimizer;
mod paths;

use proc_macro::TokenStream;

/// Compiles an optimizer rule, element-wise or per tensor, into a typed optimizer.
///
/// The language and what it generates are documented where the `fusegraph` crate re-exports
/// this macro (`fusegraph::optimizer!`).
#[proc_macro]
pub fn optimizer(input: TokenStream) -> TokenStream {
    optimizer::expand(input.into()).into()
}

/// Compiles element-wise activation functions into zero-sized types implementing the runtime's
/// `Elementwise`, their derivatives derived symbolically.
///
/// The language and what it generates are documented where the `fusegraph` crate re-exports
/// this macro (`fusegraph::activation!`).
#[proc_macro]
pub fn activation(input: TokenStream) -> TokenStream {
    activation::expand(input.into()).into()
}

/// Compiles a struct of layers into a model with one flat parameter buffer and generated,
/// allocation-free forward and backward passes.
///
/// The language and what it generates are documented where the `fusegraph` crate re-exports
/// this macro (`fusegraph::model`).
#[proc_macro_attribute]
pub fn model(attr: TokenStream, item: TokenStream) -> TokenStream {
    model::expand(attr.into(), item.into()).into()
}

/// Compiles element-wise losses of a prediction and a target into types implementing the
/// runtime's `Loss`, their gradients derived symbolically.
///
/// The language and what it generates are documented where the `fusegraph` crate re-exports
/// this macro (`fusegraph::loss!`).
#[proc_macro]
pub fn loss(input: TokenStream) -> TokenStream {
    loss::expand(input.into()).into()
}
