//! Optimizers: the [`Rule`] trait that `optimizer!` implements, the fused pass that applies a
//! rule to a flat parameter buffer, what goes around the rule (clipping, weight decay, EMA,
//! learning-rate schedules), the one plan every step makes, and the [`Optimizer`] that holds a
//! rule's state in buffers it allocates or in an arena; and the built-in rules of Keras 3
//! ([`keras`]), PyTorch ([`torch`]) and optax ([`optax`]), each written with `optimizer!`, as a
//! user's rule is.

mod config;
pub mod keras;
mod kernel;
mod mode;
mod newton_schulz;
pub mod optax;
mod optimizer;
#[cfg(feature = "alloc")]
pub(crate) mod owned;
mod plan;
mod reduce;
mod rule;
mod schedule;
mod state;
mod storage;
mod tensorwise;
pub mod torch;
mod views;

pub use config::{Config, Ema, NormClip, WeightDecay};
pub use kernel::{
    apply, Buffers, Pass, Segment, PARALLEL_CHUNK, PARALLEL_THRESHOLD, STEP_PARALLEL_THRESHOLD,
};
pub use mode::{
    AllGradientsFirst, Every, EveryPart, Full, Fused, Plain, UpdateMode, UpdatePart, UpdateSet,
    Updates,
};
pub use newton_schulz::{
    newton_schulz, newton_schulz_serial_work, newton_schulz_work, Coefficients,
};
pub(crate) use optimizer::slots_len;
pub use optimizer::Optimizer;
#[cfg(feature = "alloc")]
pub use owned::StateError;
pub(crate) use plan::Plan;
pub use reduce::{sum_squares, REDUCE_BLOCK};
pub use rule::{
    slot_range, LearningRate, Rule, Shape, SlotShape, TensorUpdate, EVAL_VIEW, MAX_CARRIED,
    MAX_SLOTS,
};
pub use schedule::{Decay, Schedule};
pub use state::{OptimizerPart, Part, PartMut};
#[cfg(feature = "alloc")]
pub use storage::Allocated;
pub use storage::{Arena, DefaultStorage, Layout, NoOverrides, Override, Placed, Storage};
pub use tensorwise::{lanes, At, Sum};
