//! Training: the [`Model`] trait that `#[model]` implements, element-wise graph operations,
//! and [`TrainStep`], which owns every buffer a train step needs.

mod graph;
mod model;
#[cfg(feature = "alloc")]
mod step;

pub use graph::{accumulate, add, concat, concat_grad, mul, product_grad};
pub use model::{init_params, push_tensors, Bytes, Model, NamedTensor, View};
#[cfg(feature = "alloc")]
pub use step::{Evaluation, TrainStep};
