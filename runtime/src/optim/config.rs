//! What goes around a rule: clipping, weight decay, EMA of the weights, the schedule.

use super::mode::{AllGradientsFirst, Full, UpdateMode, UpdatePart, UpdateSet};
use super::schedule::Schedule;
use core::fmt;
use core::marker::PhantomData;

/// Clipping of gradients by their L2 norm.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum NormClip {
    /// Keras `clipnorm`: each tensor's gradient becomes `g * c / max(||g||, c)`.
    PerTensor(f32),
    /// Keras `global_clipnorm`: every gradient is scaled by `c / max(||G||, c)`, where `||G||`
    /// is the norm over all tensors.
    Global(f32),
    /// `torch.nn.utils.clip_grad_norm_`: every gradient is scaled by
    /// `min(c / (||G|| + 1e-6), 1)`.
    GlobalTorch(f32),
}

/// Weight decay applied in the fused pass.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum WeightDecay {
    /// No weight decay.
    None,
    /// L2 penalty added to the gradient, `g += wd * p` (PyTorch's `weight_decay`).
    L2(f32),
    /// Decoupled decay before the rule, `p -= p * wd * lr` (Keras' `weight_decay`).
    Decoupled(f32),
}

/// Exponential moving average of the weights (Keras `use_ema`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ema {
    /// `average = momentum * average + (1 - momentum) * p` after each update (momentum is 0 on
    /// the first step, so the average starts at the weights).
    pub momentum: f32,
    /// Every this many steps the weights are overwritten with the average (Keras
    /// `ema_overwrite_frequency`); `0` never.
    pub overwrite_every: u64,
}

/// Everything around the rule, evaluated once per step and folded into the fused pass, for
/// update mode `U` ([`Full`] by default; with [`Fused`](super::Fused), options that need every
/// gradient before the first update do not compile through the builders, and a step refuses
/// them, with a panic, when the field is set by hand).
///
/// ```
/// use fusegraph_runtime::optim::{Config, Fused, NormClip, Schedule};
/// let c: Config = Config::new() // the `Full` mode unless the type says otherwise
///     .clip_norm(NormClip::Global(1.0))
///     .schedule(Schedule::exponential(0.1, 100, 0.5));
/// assert_eq!(c.schedule.unwrap().at(100), 0.05);
/// let _layerwise = Config::<Fused>::new().clip_tensor_norm(1.0).clip_value(5.0);
/// ```
///
/// ```compile_fail
/// use fusegraph_runtime::optim::{Config, Fused};
/// let _ = Config::<Fused>::new().clip_global_norm(1.0);
/// ```
#[derive(Clone, Copy, PartialEq)]
pub struct Config<U: UpdateMode = Full> {
    /// Element-wise clipping to `[-v, v]` (Keras `clipvalue`, `clip_grad_value_`).
    pub clip_value: Option<f32>,
    /// Norm clipping (per tensor or global).
    pub clip_norm: Option<NormClip>,
    /// Weight decay, coupled or decoupled.
    pub weight_decay: WeightDecay,
    /// Ascend instead of descend (PyTorch `maximize`): the gradient is negated first.
    pub maximize: bool,
    /// EMA of the weights.
    pub ema: Option<Ema>,
    /// Learning-rate schedule; replaces the rule's `lr` each step.
    pub schedule: Option<Schedule>,
    mode: PhantomData<U>,
}

impl<U: UpdateMode> Default for Config<U> {
    fn default() -> Self {
        Self::new()
    }
}

/// As the fields would derive it, without the update mode (checkpoints store this text).
impl<U: UpdateMode> fmt::Debug for Config<U> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("clip_value", &self.clip_value)
            .field("clip_norm", &self.clip_norm)
            .field("weight_decay", &self.weight_decay)
            .field("maximize", &self.maximize)
            .field("ema", &self.ema)
            .field("schedule", &self.schedule)
            .finish()
    }
}

impl<U: UpdateMode> Config<U> {
    /// No clipping, no weight decay, no EMA, the rule's own learning rate.
    pub const fn new() -> Self {
        Config {
            clip_value: None,
            clip_norm: None,
            weight_decay: WeightDecay::None,
            maximize: false,
            ema: None,
            schedule: None,
            mode: PhantomData,
        }
    }

    /// The scheduled learning rate after `done` steps; `None` without a schedule, and on a mode
    /// whose update set leaves schedules out (its steps are refused a schedule when built), so
    /// that such a step does not compile the schedules in.
    pub fn scheduled_rate(&self, done: u64) -> Option<f32> {
        if U::Updates::SCHEDULE {
            self.schedule.map(|s| s.at(done))
        } else {
            None
        }
    }

    /// The first part of the fused update (in the order of [`UpdatePart`]) that this
    /// configuration needs and the update set of `U` ([`UpdateMode::Updates`]) leaves out;
    /// `None` when a step of mode `U` can train with it.
    ///
    /// ```
    /// use fusegraph_runtime::optim::{Config, Fused, Plain, UpdatePart, WeightDecay};
    /// let c = Config::<Fused<Plain>>::new();
    /// assert_eq!(c.excluded_part(), None);
    /// let decayed = c.weight_decay(WeightDecay::L2(1e-4));
    /// assert_eq!(decayed.excluded_part(), Some(UpdatePart::L2));
    /// ```
    pub fn excluded_part(&self) -> Option<UpdatePart> {
        let transform = self.clip_value.is_some() || self.clip_norm.is_some() || self.maximize;
        let (l2, decoupled) = match self.weight_decay {
            WeightDecay::None => (false, false),
            WeightDecay::L2(_) => (true, false),
            WeightDecay::Decoupled(_) => (false, true),
        };
        let parts = [
            (
                UpdatePart::GradientTransform,
                transform,
                U::Updates::GRADIENT_TRANSFORM,
            ),
            (UpdatePart::L2, l2, U::Updates::L2),
            (
                UpdatePart::DecoupledDecay,
                decoupled,
                U::Updates::DECOUPLED_DECAY,
            ),
            (UpdatePart::Ema, self.ema.is_some(), U::Updates::EMA),
            (
                UpdatePart::Schedule,
                self.schedule.is_some(),
                U::Updates::SCHEDULE,
            ),
        ];
        parts
            .into_iter()
            .find(|&(_, needed, compiled_in)| needed && !compiled_in)
            .map(|(part, ..)| part)
    }

    /// Sets element-wise gradient clipping to `[-v, v]`.
    #[must_use]
    pub const fn clip_value(mut self, v: f32) -> Self {
        self.clip_value = Some(v);
        self
    }

    /// Sets norm clipping, per tensor or global; global clipping needs every gradient first.
    #[must_use]
    pub const fn clip_norm(mut self, c: NormClip) -> Self
    where
        U: AllGradientsFirst,
    {
        self.clip_norm = Some(c);
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

    /// Sets weight decay, coupled (L2) or decoupled.
    #[must_use]
    pub const fn weight_decay(mut self, wd: WeightDecay) -> Self {
        self.weight_decay = wd;
        self
    }

    /// Negates the gradient (gradient ascent).
    #[must_use]
    pub const fn maximize(mut self, on: bool) -> Self {
        self.maximize = on;
        self
    }

    /// Keeps an EMA of the weights (in a buffer as large as the parameters).
    #[must_use]
    pub const fn ema(mut self, ema: Ema) -> Self {
        self.ema = Some(ema);
        self
    }

    /// Sets the learning-rate schedule, which sets the rule's learning rate (its hyper-parameter
    /// `lr`, [`Rule::learning_rate`](super::Rule::learning_rate)) each step. An optimizer of a
    /// rule without one refuses it when it is built.
    #[must_use]
    pub const fn schedule(mut self, s: Schedule) -> Self {
        self.schedule = Some(s);
        self
    }
}
