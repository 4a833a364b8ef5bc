//! When a step updates the parameters: after every gradient is known ([`Full`]), or each layer
//! as soon as its own gradient is known ([`Fused`]); and which parts of the fused update around
//! the rule it compiles in ([`UpdateSet`]: every one by default, fewer to keep a
//! microcontroller's flash small).

use core::fmt;
use core::marker::PhantomData;

/// When a train step updates the parameters, and which parts of the fused update it compiles
/// in; the type parameter of [`Config`](super::Config) and of the train steps.
pub trait UpdateMode {
    /// Whether each layer is updated during the backward pass.
    const FUSED: bool;
    /// The parts of the fused update around the rule that this mode compiles in.
    type Updates: UpdateSet;
}

/// Backward over every layer into a full gradient buffer, then one update: every option of
/// [`Config`](super::Config). `V` names the parts of the update compiled in ([`Every`] unless
/// it says otherwise).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Full<V: UpdateSet = Every>(PhantomData<V>);

/// Each layer's update runs as soon as its gradient is known (after the gradient for the
/// layer below was taken from its old weights): no full gradient buffer, only one the size of
/// the largest layer. The parameters after every step are the same bits as with [`Full`]. `V`
/// names the parts of the update compiled in ([`Every`] unless it says otherwise: an embedded
/// step that needs none of them names [`Plain`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fused<V: UpdateSet = Every>(PhantomData<V>);

impl<V: UpdateSet> UpdateMode for Full<V> {
    const FUSED: bool = false;
    type Updates = V;
}

impl<V: UpdateSet> UpdateMode for Fused<V> {
    const FUSED: bool = true;
    type Updates = V;
}

/// Update modes in which every gradient is known before the first parameter changes: options
/// that reduce over all gradients need one.
#[diagnostic::on_unimplemented(
    message = "global-norm clipping needs every gradient before the first update, and `{Self}` updates each layer during the backward pass",
    label = "the norm over all layers is not known when the last layer is updated",
    note = "clip each tensor by its own norm (`clip_tensor_norm`), or train with the `Full` update mode"
)]
pub trait AllGradientsFirst: UpdateMode {}

impl<V: UpdateSet> AllGradientsFirst for Full<V> {}

/// Update modes that compile in every part of the update ([`Every`]): a step that allocates its
/// buffers takes one, so that any configuration trains with it.
#[diagnostic::on_unimplemented(
    message = "`{Self}` leaves parts of the update out, and a step that allocates its buffers compiles in every part",
    label = "a `TrainStep` trains with any configuration, so it has every part of the update",
    note = "name the mode without a set (`Fused` or `Full`), or train from an arena with an `EmbeddedStep`, which refuses a configuration that needs a part its set leaves out"
)]
pub trait EveryPart: UpdateMode<Updates = Every> {}

impl EveryPart for Full<Every> {}

impl EveryPart for Fused<Every> {}

/// A part of the fused update around the rule, which a step compiles in only when its
/// [`UpdateSet`] allows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpdatePart {
    /// Gradient transforms: value or norm clipping, and `maximize`.
    GradientTransform,
    /// Coupled weight decay ([`WeightDecay::L2`](super::WeightDecay::L2)).
    L2,
    /// Decoupled weight decay ([`WeightDecay::Decoupled`](super::WeightDecay::Decoupled)).
    DecoupledDecay,
    /// The EMA of the weights.
    Ema,
    /// A learning-rate schedule ([`Config::schedule`](super::Config::schedule)).
    Schedule,
}

impl fmt::Display for UpdatePart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            UpdatePart::GradientTransform => "gradient transforms (clipping, maximize)",
            UpdatePart::L2 => "coupled (L2) weight decay",
            UpdatePart::DecoupledDecay => "decoupled weight decay",
            UpdatePart::Ema => "an EMA of the weights",
            UpdatePart::Schedule => "a learning-rate schedule",
        })
    }
}

/// Which parts of the fused update around the rule a step compiles in: each part doubles the
/// variants of the update, so a step that leaves out the parts it does not use keeps only the
/// code it runs. A configuration that needs a part left out is refused when the step is built.
pub trait UpdateSet: Copy + Default + fmt::Debug + Send + Sync {
    /// Gradient transforms: clipping and `maximize`.
    const GRADIENT_TRANSFORM: bool;
    /// Coupled weight decay.
    const L2: bool;
    /// Decoupled weight decay.
    const DECOUPLED_DECAY: bool;
    /// The EMA of the weights.
    const EMA: bool;
    /// A learning-rate schedule (its cosine and exponential curves are compiled in only here).
    const SCHEDULE: bool;
}

/// The update set that allows the parts whose parameters are `true`, in the order of
/// [`UpdatePart`]: `Updates<false, true, false, false, false>` compiles in coupled weight decay
/// alone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Updates<
    const GRADIENT_TRANSFORM: bool,
    const L2: bool,
    const DECOUPLED_DECAY: bool,
    const EMA: bool,
    const SCHEDULE: bool,
>;

impl<const GT: bool, const L2: bool, const DWD: bool, const EMA: bool, const SCHEDULE: bool>
    UpdateSet for Updates<GT, L2, DWD, EMA, SCHEDULE>
{
    const GRADIENT_TRANSFORM: bool = GT;
    const L2: bool = L2;
    const DECOUPLED_DECAY: bool = DWD;
    const EMA: bool = EMA;
    const SCHEDULE: bool = SCHEDULE;
}

/// Every part of the update: the default, with which any configuration trains.
pub type Every = Updates<true, true, true, true, true>;

/// The rule alone: no clipping, `maximize`, weight decay, EMA or schedule.
pub type Plain = Updates<false, false, false, false, false>;
