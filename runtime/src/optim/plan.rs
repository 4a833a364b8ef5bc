//! The one optimizer-step core: what a step computes once before any element changes (the
//! schedule, the rule's per-step values, weight decay, the clipping factors and the sign), and
//! the segments it hands the fused pass for any run of tensors. [`Optimizer::step`] plans and
//! updates every tensor at once; a train step that updates each layer as soon as its gradient
//! is known plans once and updates layer by layer, with the same bits.
//!
//! [`Optimizer::step`]: super::Optimizer::step

use super::config::{Config, NormClip, WeightDecay};
use super::kernel::{Pass, Segment, PARALLEL_THRESHOLD};
use super::mode::UpdateMode;
use super::reduce::sum_squares;
use super::rule::{Rule, MAX_CARRIED};
use super::storage::Override;
use crate::accumulate::narrow;
use crate::math;

/// The most segments one fused pass is handed; a longer run of tensors that cannot share
/// their per-step values is updated in several passes (the update is element-wise, so the
/// bits are the same).
pub(crate) const MAX_SEGMENTS: usize = 16;

/// The per-step values of a rule: what its `step` part computed, and its learning rate.
#[derive(Clone, Copy)]
struct Scalars<R: Rule> {
    step: R::Step,
    lr: f32,
}

/// Evaluates `rule`'s `step` part for step `t` (1-based), updating `carried` and the kept
/// `decimals`: the only place a step calls [`Rule::begin_step`].
fn scalars<R: Rule>(
    rule: R,
    t: u64,
    carried: &mut [f32],
    decimals: &mut R::Decimals,
) -> Scalars<R> {
    Scalars {
        step: rule.begin_step(t, carried, decimals),
        lr: rule.learning_rate().unwrap_or(0.0),
    }
}

/// Everything one optimizer step computes once, before any element changes.
pub(crate) struct Plan<R: Rule> {
    /// The step number being taken (1-based).
    pub(crate) t: u64,
    /// Scheduled learning rate over the rule's own (scales overridden rules alike).
    lr_factor: f32,
    /// The carried scalars before this step (an overridden rule evaluates its own step part
    /// from them).
    carried_before: [f32; MAX_CARRIED],
    /// The rule's decimals after this step's (an overridden rule starts from them, and
    /// computes those of its own values that differ).
    decimals: R::Decimals,
    /// The rule's per-step values with the scheduled learning rate.
    base: Scalars<R>,
    /// `-1` with `maximize`, else `1`.
    sign: f32,
    /// The factor of global-norm clipping (1 without it, or until the norm is known).
    global: f32,
    /// What every segment shares: value clipping and the EMA.
    pub(crate) pass: Pass,
}

impl<R: Rule> Plan<R> {
    /// Plans step `done + 1` of `rule` with `config`, updating the carried scalars and the
    /// kept decimals.
    pub(crate) fn begin<U: UpdateMode>(
        rule: R,
        config: &Config<U>,
        done: u64,
        carried: &mut [f32; MAX_CARRIED],
        decimals: &mut R::Decimals,
    ) -> Self {
        let t = done + 1;
        let scheduled = config.scheduled_rate(done);
        let lr_factor = match (scheduled, rule.learning_rate()) {
            (Some(s), Some(lr)) if lr != 0.0 => s / lr,
            _ => 1.0,
        };
        let mut base = rule;
        if let (Some(lr), Some(rate)) = (scheduled, base.learning_rate_mut()) {
            *rate = lr;
        }
        let carried_before = *carried;
        let base = scalars(base, t, &mut carried[..R::CARRIED.len()], decimals);
        Plan {
            t,
            lr_factor,
            carried_before,
            decimals: *decimals,
            base,
            sign: if config.maximize { -1.0 } else { 1.0 },
            global: 1.0,
            pass: Pass {
                clip_value: config.clip_value,
                ema_momentum: config.ema.map(|e| if done == 0 { 0.0 } else { e.momentum }),
                ema_overwrite: config
                    .ema
                    .is_some_and(|e| e.overwrite_every > 0 && t.is_multiple_of(e.overwrite_every)),
                // The optimizer replaces it in every pass, after the gradients are known.
                parallel_from: PARALLEL_THRESHOLD,
            },
        }
    }

    /// Sets the factor of global-norm clipping from the joint norm of `tensors`' gradients
    /// (summed in tensor order); nothing without global clipping.
    pub(crate) fn clip_globally<'g, U: UpdateMode>(
        &mut self,
        config: &Config<U>,
        tensors: impl Iterator<Item = &'g [f32]>,
    ) {
        let norm = || narrow(math::sqrt(tensors.map(sum_squares).fold(0.0, |a, b| a + b)));
        self.global = match config.clip_norm {
            Some(NormClip::Global(c)) => c * (1.0 / norm()).min(1.0 / c),
            Some(NormClip::GlobalTorch(c)) => (c / (norm() + 1e-6)).min(1.0),
            _ => 1.0,
        };
    }

    /// The segment of one tensor whose gradient is `grads`, with its override (its `end` is
    /// left for the caller to set); and whether it shares every per-step value with its neighbours (then
    /// consecutive tensors form one segment).
    #[inline]
    pub(crate) fn segment<U: UpdateMode>(
        &self,
        config: &Config<U>,
        over: Override<R>,
        grads: &[f32],
    ) -> (Segment<R>, bool) {
        let scalars = match over.rule {
            Some(mut r) => {
                if let Some(rate) = r.learning_rate_mut() {
                    *rate *= self.lr_factor;
                }
                let mut carried = self.carried_before;
                let mut decimals = self.decimals;
                scalars(r, self.t, &mut carried[..R::CARRIED.len()], &mut decimals)
            }
            None => self.base,
        };
        let per_tensor = matches!(config.clip_norm, Some(NormClip::PerTensor(_)));
        let scale = match config.clip_norm {
            Some(NormClip::PerTensor(c)) => {
                let norm = math::sqrt(narrow(sum_squares(grads)));
                c / norm.max(c)
            }
            _ => self.global,
        };
        let (l2, decay) = match config.weight_decay {
            WeightDecay::None => (0.0, 0.0),
            WeightDecay::L2(wd) => (over.decay.unwrap_or(wd), 0.0),
            WeightDecay::Decoupled(wd) => (0.0, over.decay.unwrap_or(wd) * scalars.lr),
        };
        let segment = Segment {
            end: 0,
            step: scalars.step,
            grad_scale: self.sign * scale,
            l2,
            decay,
        };
        let shared = over.rule.is_none() && over.decay.is_none() && !per_tensor;
        (segment, shared)
    }

    /// A placeholder segment, to fill a table of segments.
    pub(crate) fn empty_segment(&self) -> Segment<R> {
        Segment {
            end: 0,
            step: self.base.step,
            grad_scale: self.sign,
            l2: 0.0,
            decay: 0.0,
        }
    }
}
