//! The std training loop (feature `std`): the [`Trainer`] that fits a model on data with
//! metrics, callbacks and progress, the [`History`] it returns and its training curve. It drives
//! a [`TrainStep`](crate::train::TrainStep) of the core and saves through
//! [`checkpoint`](crate::checkpoint).

mod callbacks;
mod data_parallel;
mod error;
mod history;
mod metrics;
mod options;
mod plot;
mod progress;
mod trainer;

#[cfg(feature = "checkpoint")]
pub use callbacks::ModelCheckpoint;
pub use callbacks::{
    Callback, Control, EarlyStopping, FitState, Hook, LearningRateScheduler, Monitor,
    ReduceLrOnPlateau, TerminateOnNan,
};
pub use error::TrainError;
pub use history::{EpochLog, History, Stop};
pub use metrics::{Metric, Metrics};
pub use options::FitOptions;
pub use progress::Verbose;
pub use trainer::{Callbacks, DatasetOf, Trainer};
