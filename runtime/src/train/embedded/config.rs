//! How an [`EmbeddedStep`](super::EmbeddedStep) updates: all gradients first, or each layer as
//! soon as its gradient is known; and the options of its update.

use crate::optim::{NormClip, Schedule, WeightDecay};
use core::marker::PhantomData;

/// When an [`EmbeddedStep`](super::EmbeddedStep) updates the parameters.
pub trait UpdateMode {
    /// Whether each layer is updated during the backward pass.
    const FUSED: bool;
}

/// Backward over every layer into a full gradient buffer, then one update: the memory of
/// [`TrainStep`](crate::train::TrainStep), and every option of [`StepConfig`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Full;

/// Each layer's update runs as soon as its gradient is known (after the gradient for the
/// layer below was taken from its old weights): no full gradient buffer, only one the size of
/// the largest layer. The parameters after every step are the same bits as with [`Full`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fused;

impl UpdateMode for Full {
    const FUSED: bool = false;
}

impl UpdateMode for Fused {
    const FUSED: bool = true;
}

/// Update modes in which every gradient is known before the first parameter changes: options
/// that reduce over all gradients need one.
#[diagnostic::on_unimplemented(
    message = "global-norm clipping needs every gradient before the first update, and `{Self}` updates each layer during the backward pass",
    label = "the norm over all layers is not known when the last layer is updated",
    note = "clip each tensor by its own norm (`clip_tensor_norm`), or train with `EmbeddedStep<_, _, _, Full>`"
)]
pub trait AllGradientsFirst: UpdateMode {}

impl AllGradientsFirst for Full {}

/// The options of an [`EmbeddedStep`](super::EmbeddedStep)'s update, for update mode `U`:
/// clipping, weight decay, `maximize` and a learning-rate schedule, as in
/// [`Config`](crate::optim::Config) (the EMA of the weights would need a buffer as large as
/// the parameters, so it is left out).
///
/// ```
/// use fusegraph_runtime::train::{Full, Fused, StepConfig};
/// let _fused = StepConfig::<Fused>::new().clip_tensor_norm(1.0).clip_value(5.0);
/// let _full = StepConfig::<Full>::new().clip_global_norm(1.0);
/// ```
///
/// ```compile_fail
/// use fusegraph_runtime::train::{Fused, StepConfig};
/// let _ = StepConfig::<Fused>::new().clip_global_norm(1.0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepConfig<U: UpdateMode> {
    pub(crate) clip_value: Option<f32>,
    pub(crate) clip_norm: Option<NormClip>,
    pub(crate) weight_decay: WeightDecay,
    pub(crate) maximize: bool,
    pub(crate) schedule: Option<Schedule>,
    mode: PhantomData<U>,
}

impl<U: UpdateMode> Default for StepConfig<U> {
    fn default() -> Self {
        Self::new()
    }
}

impl<U: UpdateMode> StepConfig<U> {
    /// No clipping, no weight decay, the rule's own learning rate.
    pub const fn new() -> Self {
        StepConfig {
            clip_value: None,
            clip_norm: None,
            weight_decay: WeightDecay::None,
            maximize: false,
            schedule: None,
            mode: PhantomData,
        }
    }

    /// Element-wise clipping of gradients to `[-v, v]`.
    #[must_use]
    pub const fn clip_value(mut self, v: f32) -> Self {
        self.clip_value = Some(v);
        self
    }

    /// Each tensor's gradient scaled to an L2 norm of at most `c` (Keras `clipnorm`).
    #[must_use]
    pub const fn clip_tensor_norm(mut self, c: f32) -> Self {
        self.clip_norm = Some(NormClip::PerTensor(c));
        self
    }

    /// Every gradient scaled so that their joint L2 norm is at most `c` (Keras
    /// `global_clipnorm`); only where every gradient is known first.
    #[must_use]
    pub const fn clip_global_norm(mut self, c: f32) -> Self
    where
        U: AllGradientsFirst,
    {
        self.clip_norm = Some(NormClip::Global(c));
        self
    }

    /// Weight decay, coupled (L2) or decoupled.
    #[must_use]
    pub const fn weight_decay(mut self, wd: WeightDecay) -> Self {
        self.weight_decay = wd;
        self
    }

    /// Ascend instead of descend.
    #[must_use]
    pub const fn maximize(mut self, on: bool) -> Self {
        self.maximize = on;
        self
    }

    /// A learning-rate schedule over the step counter.
    #[must_use]
    pub const fn schedule(mut self, s: Schedule) -> Self {
        self.schedule = Some(s);
        self
    }
}
