//! [`Optimizer`]: a rule, its configuration, and all of its state, allocated once.

use super::config::{Config, NormClip, WeightDecay};
use super::kernel::{apply, Buffers, Pass, Segment};
use super::reduce::sum_squares;
use super::rule::{Rule, MAX_CARRIED};
use crate::math;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;
use core::ops::Range;

/// An optimizer: one [`Rule`], its [`Config`], and its state for a fixed parameter layout.
///
/// The parameters are one flat `f32` buffer made of tensors of given lengths, one after the
/// other. Construction allocates the slots (one buffer each, as long as the parameters), the EMA
/// buffer if asked for, and the per-tensor scratch; [`step`](Self::step) allocates nothing.
///
/// ```
/// use fusegraph_runtime::optim::{Config, NormClip, Optimizer, Rule};
/// # fusegraph_runtime::optim::__doc_rule!();
/// let mut opt = Optimizer::with_config(
///     Sgd { lr: 0.1 },
///     &[3, 2],
///     Config::default().clip_norm(NormClip::Global(1.0)),
/// );
/// let mut params = vec![1.0_f32; 5];
/// opt.step(&mut params, &[0.0, 0.0, 0.0, 3.0, 4.0]);
/// assert_eq!(opt.iterations(), 1);
/// assert!((params[3] - (1.0 - 0.1 * 0.6)).abs() < 1e-7);
/// ```
pub struct Optimizer<R: Rule> {
    rule: R,
    config: Config,
    ends: Vec<usize>,
    rule_overrides: Vec<Option<R>>,
    decay_overrides: Vec<Option<f32>>,
    slots: Vec<f32>,
    ema: Vec<f32>,
    carried: [f32; MAX_CARRIED],
    segments: Vec<Segment<R>>,
    t: u64,
}

/// A state that does not fit this optimizer, handed to [`Optimizer::set_weights`] or another
/// setter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StateError {
    /// The number of arrays differs from [`Optimizer::weight_names`].
    Count {
        /// Arrays this optimizer has.
        expected: usize,
        /// Arrays given.
        got: usize,
    },
    /// One array has the wrong length.
    Length {
        /// Name of the array.
        name: alloc::string::String,
        /// Its length here.
        expected: usize,
        /// The length given.
        got: usize,
    },
    /// No slot, carried scalar or hyper-parameter of that name.
    UnknownName(alloc::string::String),
    /// A tensor index past the last tensor.
    TensorIndex(usize),
}

impl fmt::Display for StateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StateError::Count { expected, got } => {
                write!(f, "optimizer state has {expected} arrays, {got} were given")
            }
            StateError::Length {
                name,
                expected,
                got,
            } => write!(
                f,
                "optimizer array `{name}` has {expected} values, {got} were given"
            ),
            StateError::UnknownName(n) => write!(f, "the optimizer has nothing named `{n}`"),
            StateError::TensorIndex(i) => write!(f, "the optimizer has no tensor {i}"),
        }
    }
}

impl core::error::Error for StateError {}

impl<R: Rule> Optimizer<R> {
    /// An optimizer for tensors of the given lengths, with the default [`Config`].
    pub fn new(rule: R, tensor_lens: &[usize]) -> Self {
        Self::with_config(rule, tensor_lens, Config::default())
    }

    /// An optimizer for tensors of the given lengths.
    pub fn with_config(rule: R, tensor_lens: &[usize], config: Config) -> Self {
        let ends: Vec<usize> = tensor_lens
            .iter()
            .scan(0, |acc, &l| {
                *acc += l;
                Some(*acc)
            })
            .collect();
        let n = ends.last().copied().unwrap_or(0);
        let mut slots = vec![0.0; n * R::SLOTS.len()];
        for (j, s) in slots.chunks_mut(n.max(1)).enumerate().take(R::SLOTS.len()) {
            s.fill(rule.slot_init(j));
        }
        let mut carried = [0.0; MAX_CARRIED];
        for (i, c) in carried.iter_mut().enumerate().take(R::CARRIED.len()) {
            *c = rule.carried_init(i);
        }
        let k = ends.len();
        Optimizer {
            rule,
            config,
            ends,
            rule_overrides: vec![None; k],
            decay_overrides: vec![None; k],
            slots,
            ema: if config.ema.is_some() {
                vec![0.0; n]
            } else {
                Vec::new()
            },
            carried,
            segments: Vec::with_capacity(k),
            t: 0,
        }
    }

    /// The rule (its hyper-parameters).
    pub fn rule(&self) -> &R {
        &self.rule
    }
    /// The rule, to change hyper-parameters between steps.
    pub fn rule_mut(&mut self) -> &mut R {
        &mut self.rule
    }
    /// What goes around the rule.
    pub fn config(&self) -> &Config {
        &self.config
    }
    /// Number of completed steps (Keras `iterations`); the next step is `t = iterations + 1`.
    pub fn iterations(&self) -> u64 {
        self.t
    }
    /// Sets the number of completed steps (when restoring a state).
    pub fn set_iterations(&mut self, t: u64) {
        self.t = t;
    }
    /// Total number of parameter elements.
    pub fn len(&self) -> usize {
        self.ends.last().copied().unwrap_or(0)
    }
    /// `true` when there are no parameters.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Number of tensors.
    pub fn tensor_count(&self) -> usize {
        self.ends.len()
    }
    /// Where tensor `i` lies in the flat buffer.
    pub fn tensor_range(&self, i: usize) -> Option<Range<usize>> {
        let end = *self.ends.get(i)?;
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        Some(start..end)
    }

    /// Uses other hyper-parameters for tensor `i` (PyTorch parameter groups). With a schedule,
    /// the override's `lr` is scaled by the same factor as the main one.
    pub fn set_tensor_rule(&mut self, i: usize, rule: R) -> Result<(), StateError> {
        *self
            .rule_overrides
            .get_mut(i)
            .ok_or(StateError::TensorIndex(i))? = Some(rule);
        Ok(())
    }

    /// Uses another weight-decay coefficient for tensor `i` (for example 0 for biases).
    pub fn set_tensor_weight_decay(&mut self, i: usize, wd: f32) -> Result<(), StateError> {
        *self
            .decay_overrides
            .get_mut(i)
            .ok_or(StateError::TensorIndex(i))? = Some(wd);
        Ok(())
    }

    /// The whole buffer of slot `name` (all tensors).
    pub fn slot(&self, name: &str) -> Option<&[f32]> {
        let j = R::SLOTS.iter().position(|s| *s == name)?;
        let n = self.len();
        Some(&self.slots[j * n..(j + 1) * n])
    }
    /// Slot `name` of tensor `i`.
    pub fn slot_tensor(&self, name: &str, i: usize) -> Option<&[f32]> {
        let r = self.tensor_range(i)?;
        Some(&self.slot(name)?[r])
    }
    /// Slot `name` of tensor `i`, writable.
    pub fn slot_tensor_mut(&mut self, name: &str, i: usize) -> Option<&mut [f32]> {
        let r = self.tensor_range(i)?;
        let j = R::SLOTS.iter().position(|s| *s == name)?;
        let n = self.len();
        Some(&mut self.slots[j * n..(j + 1) * n][r])
    }
    /// The EMA of the parameters, when [`Config::ema`] is set.
    pub fn ema(&self) -> Option<&[f32]> {
        self.config.ema.map(|_| self.ema.as_slice())
    }
    /// The EMA of the parameters, writable (when restoring a state).
    pub fn ema_mut(&mut self) -> Option<&mut [f32]> {
        self.config.ema.map(|_| self.ema.as_mut_slice())
    }
    /// The value of carried scalar `name`.
    pub fn carried(&self, name: &str) -> Option<f32> {
        let i = R::CARRIED.iter().position(|s| *s == name)?;
        Some(self.carried[i])
    }
    /// Sets carried scalar `name`.
    pub fn set_carried(&mut self, name: &str, v: f32) -> Result<(), StateError> {
        let i = R::CARRIED
            .iter()
            .position(|s| *s == name)
            .ok_or_else(|| StateError::UnknownName(name.into()))?;
        self.carried[i] = v;
        Ok(())
    }

    /// Names of the arrays of [`get_weights`](Self::get_weights), in order: `iterations`, each
    /// carried scalar, then `<slot>.<tensor>` for every slot and tensor, then `ema.<tensor>`.
    pub fn weight_names(&self) -> Vec<alloc::string::String> {
        use alloc::format;
        let mut names = vec![alloc::string::String::from("iterations")];
        names.extend(R::CARRIED.iter().map(|c| (*c).into()));
        for s in R::SLOTS {
            names.extend((0..self.tensor_count()).map(|i| format!("{s}.{i}")));
        }
        if self.config.ema.is_some() {
            names.extend((0..self.tensor_count()).map(|i| format!("ema.{i}")));
        }
        names
    }

    /// The whole state as arrays (Keras `optimizer.get_weights()`), named by
    /// [`weight_names`](Self::weight_names). `iterations` is stored as an `f32`, exact up to
    /// 2^24 steps; use [`iterations`](Self::iterations) beyond.
    pub fn get_weights(&self) -> Vec<Vec<f32>> {
        let mut out = vec![vec![self.t as f32]];
        out.extend(self.carried[..R::CARRIED.len()].iter().map(|&c| vec![c]));
        for s in R::SLOTS {
            for i in 0..self.tensor_count() {
                out.push(self.slot_tensor(s, i).unwrap_or_default().to_vec());
            }
        }
        if self.config.ema.is_some() {
            for i in 0..self.tensor_count() {
                let r = self.tensor_range(i).unwrap_or_default();
                out.push(self.ema[r].to_vec());
            }
        }
        out
    }

    /// Restores a state taken by [`get_weights`](Self::get_weights). Nothing is changed unless
    /// every array fits.
    pub fn set_weights(&mut self, weights: &[Vec<f32>]) -> Result<(), StateError> {
        let names = self.weight_names();
        if names.len() != weights.len() {
            return Err(StateError::Count {
                expected: names.len(),
                got: weights.len(),
            });
        }
        let k = self.tensor_count();
        for (idx, (name, w)) in names.iter().zip(weights).enumerate() {
            let expected = match idx {
                0 => 1,
                i if i <= R::CARRIED.len() => 1,
                i => {
                    let tensor = (i - 1 - R::CARRIED.len()) % k.max(1);
                    self.tensor_range(tensor).map_or(0, |r| r.len())
                }
            };
            if w.len() != expected {
                return Err(StateError::Length {
                    name: name.clone(),
                    expected,
                    got: w.len(),
                });
            }
        }
        self.t = weights[0][0] as u64;
        for (i, w) in weights[1..=R::CARRIED.len()].iter().enumerate() {
            self.carried[i] = w[0];
        }
        let mut rest = weights[1 + R::CARRIED.len()..].iter();
        for s in R::SLOTS {
            for i in 0..k {
                if let (Some(dst), Some(src)) = (self.slot_tensor_mut(s, i), rest.next()) {
                    dst.copy_from_slice(src);
                }
            }
        }
        if self.config.ema.is_some() {
            for i in 0..k {
                if let (Some(r), Some(src)) = (self.tensor_range(i), rest.next()) {
                    self.ema[r].copy_from_slice(src);
                }
            }
        }
        Ok(())
    }

    /// The learning rate the next step will use (the schedule's value, or the rule's `lr`).
    pub fn current_learning_rate(&self) -> Option<f32> {
        match self.config.schedule {
            Some(s) => Some(s.at(self.t)),
            None => self.rule.learning_rate(),
        }
    }

    /// One optimizer step: gradient transforms, weight decay, the rule and the EMA, in one fused
    /// pass over `params` (updated in place) and the state. Allocates nothing.
    ///
    /// Panics if `params` or `grads` is not as long as the layout given at construction.
    pub fn step(&mut self, params: &mut [f32], grads: &[f32]) {
        let n = self.len();
        assert_eq!(params.len(), n, "parameter buffer length");
        assert_eq!(grads.len(), n, "gradient buffer length");
        let done = self.t;
        let t = done + 1;
        let scheduled = self.config.schedule.map(|s| s.at(done));
        let lr_factor = match (scheduled, self.rule.learning_rate()) {
            (Some(s), Some(lr)) if lr != 0.0 => s / lr,
            _ => 1.0,
        };
        let mut base = self.rule;
        if let Some(lr) = scheduled {
            base.set_hyper("lr", lr);
        }
        let nc = R::CARRIED.len();
        let carried_before = self.carried;
        let base_step = base.begin_step(t, &mut self.carried[..nc]);
        let global = self.global_scale(grads);
        let sign = if self.config.maximize { -1.0 } else { 1.0 };

        self.segments.clear();
        let mut start = 0;
        let mut last_shared = false;
        for (k, &end) in self.ends.iter().enumerate() {
            let (rule_k, step) = match self.rule_overrides[k] {
                Some(mut r) => {
                    if let Some(lr) = r.learning_rate() {
                        r.set_hyper("lr", lr * lr_factor);
                    }
                    let mut c = carried_before;
                    (r, r.begin_step(t, &mut c[..nc]))
                }
                None => (base, base_step),
            };
            let tensor_scale = match self.config.clip_norm {
                Some(NormClip::PerTensor(c)) => {
                    let norm = math::sqrt(sum_squares(&grads[start..end]) as f32);
                    c / norm.max(c)
                }
                _ => global,
            };
            let lr = rule_k.learning_rate().unwrap_or(0.0);
            let (l2, decay) = match self.config.weight_decay {
                WeightDecay::None => (0.0, 0.0),
                WeightDecay::L2(wd) => (self.decay_overrides[k].unwrap_or(wd), 0.0),
                WeightDecay::Decoupled(wd) => (0.0, self.decay_overrides[k].unwrap_or(wd) * lr),
            };
            let shared = self.rule_overrides[k].is_none()
                && self.decay_overrides[k].is_none()
                && !matches!(self.config.clip_norm, Some(NormClip::PerTensor(_)));
            match self.segments.last_mut() {
                // Tensors with the same per-step values form one run of the pass: fewer, longer
                // pieces (the update is element-wise, so the bits do not change).
                Some(last) if shared && last_shared => last.end = end,
                _ => self.segments.push(Segment {
                    end,
                    step,
                    grad_scale: sign * tensor_scale,
                    l2,
                    decay,
                }),
            }
            last_shared = shared;
            start = end;
        }
        let pass = Pass {
            clip_value: self.config.clip_value,
            ema_momentum: self
                .config
                .ema
                .map(|e| if done == 0 { 0.0 } else { e.momentum }),
            ema_overwrite: self
                .config
                .ema
                .is_some_and(|e| e.overwrite_every > 0 && t.is_multiple_of(e.overwrite_every)),
        };
        apply(
            &self.segments,
            &pass,
            Buffers {
                params,
                grads,
                slots: &mut self.slots,
                ema: &mut self.ema,
            },
        );
        self.t = t;
    }

    /// The gradient factor of global norm clipping (1 without it).
    fn global_scale(&self, grads: &[f32]) -> f32 {
        let global_norm = || {
            let mut start = 0;
            let mut total = 0.0f64;
            for &end in &self.ends {
                total += sum_squares(&grads[start..end]);
                start = end;
            }
            math::sqrt(total) as f32
        };
        match self.config.clip_norm {
            Some(NormClip::Global(c)) => c * (1.0 / global_norm()).min(1.0 / c),
            Some(NormClip::GlobalTorch(c)) => (c / (global_norm() + 1e-6)).min(1.0),
            _ => 1.0,
        }
    }
}

/// Defines a one-slot-free SGD rule for doc examples of this crate, which cannot use the
/// `optimizer!` macro (it lives in a crate that depends on this one).
#[doc(hidden)]
#[macro_export]
macro_rules! __doc_rule {
    () => {
        #[derive(Clone, Copy, Debug)]
        struct Sgd {
            lr: f32,
        }
        impl Rule for Sgd {
            const NAME: &'static str = "Sgd";
            const HYPER: &'static [&'static str] = &["lr"];
            const SLOTS: &'static [&'static str] = &[];
            const CARRIED: &'static [&'static str] = &[];
            type Step = f32;
            fn hyper(&self, name: &str) -> Option<f32> {
                (name == "lr").then_some(self.lr)
            }
            fn set_hyper(&mut self, name: &str, v: f32) -> bool {
                if name == "lr" {
                    self.lr = v;
                }
                name == "lr"
            }
            fn slot_init(&self, _: usize) -> f32 {
                0.0
            }
            fn carried_init(&self, _: usize) -> f32 {
                0.0
            }
            fn begin_step(&self, _: u64, _: &mut [f32]) -> f32 {
                self.lr
            }
            fn update(lr: &f32, p: &mut $crate::f32x8, g: $crate::f32x8, _: &mut [$crate::f32x8]) {
                *p -= $crate::f32x8::splat(*lr) * g;
            }
        }
    };
}
pub use crate::__doc_rule;
