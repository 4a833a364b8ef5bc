//! What goes around a rule: clipping, weight decay, EMA of the weights, the schedule.

use super::schedule::Schedule;

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

/// Everything around the rule, evaluated once per step and folded into the fused pass.
///
/// ```
/// use fusegraph_runtime::optim::{Config, NormClip, Schedule};
/// let c = Config::default()
///     .clip_norm(NormClip::Global(1.0))
///     .schedule(Schedule::exponential(0.1, 100, 0.5));
/// assert_eq!(c.schedule.unwrap().at(100), 0.05);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Config {
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
}

impl Default for Config {
    fn default() -> Self {
        Config {
            clip_value: None,
            clip_norm: None,
            weight_decay: WeightDecay::None,
            maximize: false,
            ema: None,
            schedule: None,
        }
    }
}

impl Config {
    /// Sets element-wise gradient clipping to `[-v, v]`.
    pub fn clip_value(mut self, v: f32) -> Self {
        self.clip_value = Some(v);
        self
    }
    /// Sets norm clipping.
    pub fn clip_norm(mut self, c: NormClip) -> Self {
        self.clip_norm = Some(c);
        self
    }
    /// Sets weight decay.
    pub fn weight_decay(mut self, wd: WeightDecay) -> Self {
        self.weight_decay = wd;
        self
    }
    /// Negates the gradient (gradient ascent).
    pub fn maximize(mut self, on: bool) -> Self {
        self.maximize = on;
        self
    }
    /// Keeps an EMA of the weights.
    pub fn ema(mut self, ema: Ema) -> Self {
        self.ema = Some(ema);
        self
    }
    /// Sets the learning-rate schedule.
    pub fn schedule(mut self, s: Schedule) -> Self {
        self.schedule = Some(s);
        self
    }
}
