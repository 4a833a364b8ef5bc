//! The train step of the core: the [`Model`] trait that `#[model]` implements,
//! [`TrainStep`] (feature `alloc`), which owns every buffer a train step needs,
//! [`EmbeddedStep`], which keeps them in an arena the caller owns, and the compile-time memory
//! budget.

mod budget;
mod embedded;
mod model;
#[cfg(feature = "alloc")]
mod step;

pub use budget::check_budget;
pub use embedded::{
    AllGradientsFirst, ArenaLength, EmbeddedStep, Full, Fused, Static, StepConfig, UpdateMode,
    MAX_LAYER_TENSORS,
};
pub use model::{init_params, push_products, push_tensors, Bytes, Model, NamedTensor, View};
#[cfg(feature = "alloc")]
pub use step::{Evaluation, Target, TrainStep};
