//! fusegraph
#![no_std]
pub use fusegraph_macros::optimizer;
pub use fusegraph_runtime as runtime;
