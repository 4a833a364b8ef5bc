//! The element-wise expression language shared by optimizers (and, later, custom layers):
//! `ast` parses Rust syntax into a spanned AST, `ir` resolves names and types every node as a
//! per-step scalar or a per-element lane, and `emit` turns the IR into scalar code and
//! `wide::f32x8` lane code.

pub mod ast;
pub mod emit;
pub mod ir;
