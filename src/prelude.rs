//! Everything a training program usually names: `use fusegraph::prelude::*;`.

pub use crate::layers::*;
pub use crate::loss::*;
pub use crate::optim::{Config, Optimizer, Rule};
pub use crate::{model, optimizer, Model, Rng, Seed};
#[cfg(feature = "alloc")]
pub use crate::{Evaluation, TrainStep};
