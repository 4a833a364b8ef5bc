//! The element-wise expression language shared by optimizers, custom activations and losses:
//! `ast` parses Rust syntax into a spanned AST, `ir` resolves names and types every node as a
//! per-step scalar or a per-element lane, `diff` differentiates IR symbolically, `simplify`
//! folds what the derivatives leave, and `emit` turns the IR into scalar code and
//! lane code over any `Lane` type (common sub-expressions computed once).

pub mod ast;
pub mod diff;
pub mod emit;
pub mod ir;
pub mod simplify;
