//! Optimizers: the runtime's optimizer types, and the built-in rules of Keras 3
//! ([`keras`]) and PyTorch ([`torch`]), each written with [`optimizer!`](crate::optimizer).

pub use fusegraph_runtime::optim::*;

pub mod keras;
pub mod torch;
