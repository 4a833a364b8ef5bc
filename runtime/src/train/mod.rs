//! Training: the [`Model`] trait that `#[model]` implements, element-wise graph operations,
//! [`TrainStep`] (feature `alloc`), which owns every buffer a train step needs,
//! [`EmbeddedStep`], which keeps them in an arena the caller owns, the compile-time memory
//! budget, and (with `std`) the [`Trainer`] that fits a model on data with metrics, callbacks
//! and progress.

mod budget;
#[cfg(feature = "std")]
mod callbacks;
mod embedded;
#[cfg(feature = "std")]
mod error;
mod graph;
#[cfg(feature = "std")]
mod history;
#[cfg(feature = "std")]
mod metrics;
mod model;
#[cfg(feature = "std")]
mod options;
#[cfg(feature = "std")]
mod plot;
#[cfg(feature = "std")]
mod progress;
#[cfg(feature = "alloc")]
mod step;
#[cfg(feature = "std")]
mod trainer;

pub use budget::check_budget;
#[cfg(feature = "checkpoint")]
pub use callbacks::ModelCheckpoint;
#[cfg(feature = "std")]
pub use callbacks::{
    Callback, Control, EarlyStopping, FitState, Hook, LearningRateScheduler, Monitor,
    ReduceLrOnPlateau, TerminateOnNan,
};
pub use embedded::{
    AllGradientsFirst, ArenaLength, EmbeddedStep, Full, Fused, Static, StepConfig, UpdateMode,
    MAX_LAYER_TENSORS,
};
#[cfg(feature = "std")]
pub use error::TrainError;
pub use graph::{accumulate, add, concat, concat_grad, mul, product_grad};
#[cfg(feature = "std")]
pub use history::{EpochLog, History, Stop};
#[cfg(feature = "std")]
pub use metrics::{Metric, Metrics, TargetValue};
pub use model::{init_params, push_products, push_tensors, Bytes, Model, NamedTensor, View};
#[cfg(feature = "std")]
pub use options::FitOptions;
#[cfg(feature = "std")]
pub use progress::Verbose;
#[cfg(feature = "alloc")]
pub use step::{Evaluation, Target, TrainStep};
#[cfg(feature = "std")]
pub use trainer::{Callbacks, Trainer};
