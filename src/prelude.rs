//! Everything a training program usually names: `use fusegraph::prelude::*;`.

#[cfg(feature = "std")]
pub use crate::data::Dataset;
#[cfg(feature = "std")]
pub use crate::fit::{
    EarlyStopping, FitOptions, History, Metric, Metrics, Monitor, Trainer, Verbose,
};
pub use crate::layers::*;
pub use crate::loss::*;
#[cfg(feature = "alloc")]
pub use crate::optim::Optimizer;
pub use crate::optim::{Config, Rule};
pub use crate::{model, optimizer, Model, Rng, Seed};
#[cfg(feature = "alloc")]
pub use crate::{Evaluation, TrainStep};
