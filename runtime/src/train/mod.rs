//! The train step core: the [`Model`] trait that `#[model]` implements, the one [`Step`]
//! (forward, loss, backward and the optimizer's update) over buffers it allocated
//! ([`TrainStep`], feature `alloc`) or borrows from an arena the caller owns
//! ([`EmbeddedStep`]), the [`BatchError`] of a batch that does not fit it, the sinks that the
//! backward pass hands each layer's gradient to, and the compile-time memory budget.

#[cfg(feature = "alloc")]
mod allocated;
pub(crate) mod batch;
pub(crate) mod budget;
mod cell;
mod embedded;
mod input;
mod model;
mod sink;
mod state;
pub(crate) mod step;
mod tensors;

#[cfg(feature = "alloc")]
pub use allocated::TrainStep;
pub use batch::BatchError;
pub use cell::Static;
pub use embedded::{ArenaError, EmbeddedStep};
pub use input::{padding_lengths, InputValue, Inputs, Padded};
pub use model::{optimizer_work, Bytes, Describe, LayerKind, Model, ModelTensors, View};
pub use sink::{GradSink, LayerAt};
pub use state::StatePart;
pub use step::{Evaluation, Step, StepOutcome, Target};
pub use tensors::{layout_hash, trainable_runs, NamedTensor, BATCH_COUNTER};
