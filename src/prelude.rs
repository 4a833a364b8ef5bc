//! Everything a training program usually names: `use fusegraph::prelude::*;`.

pub use crate::layers::*;
pub use crate::loss::*;
#[cfg(feature = "alloc")]
pub use crate::optim::Optimizer;
pub use crate::optim::{Config, Rule};
pub use crate::{model, optimizer, Model, Rng, Seed};
#[cfg(feature = "alloc")]
pub use crate::{Evaluation, TrainStep};
