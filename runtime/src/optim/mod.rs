//! Optimizers: the [`Rule`] trait that `optimizer!` implements, the fused pass that applies a
//! rule to a flat parameter buffer, and what goes around the rule (clipping, weight decay, EMA,
//! learning-rate schedules).

mod config;
mod kernel;
#[cfg(feature = "alloc")]
mod optimizer;
mod reduce;
mod rule;
mod schedule;

pub use config::{Config, Ema, NormClip, WeightDecay};
pub use kernel::{apply, Buffers, Pass, Segment, PARALLEL_CHUNK, PARALLEL_THRESHOLD};
#[cfg(feature = "alloc")]
#[doc(hidden)]
pub use optimizer::__doc_rule;
#[cfg(feature = "alloc")]
pub use optimizer::{Optimizer, StateError};
pub use reduce::{sum_squares, REDUCE_BLOCK};
pub use rule::{Rule, MAX_CARRIED, MAX_SLOTS};
pub use schedule::{Decay, Schedule};
