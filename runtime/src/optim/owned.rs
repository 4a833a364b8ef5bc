//! The [`Optimizer`] with buffers it allocates once (feature `alloc`): its constructors, its
//! per-tensor overrides, and its state as named arrays (Keras' `get_weights`).

use super::config::Config;
use super::mode::UpdateMode;
use super::optimizer::Optimizer;
use super::rule::Rule;
use super::storage::{Allocated, Override, Storage};
use crate::aligned::AlignedFloats;
use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;

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
    ///
    /// # Panics
    /// If `config` has a schedule and the rule no learning rate
    /// ([`Rule::learning_rate`]) for it to set.
    pub fn with_config(rule: R, tensor_lens: &[usize], config: Config) -> Self {
        Self::allocate(rule, tensor_lens, config)
    }
}

impl<R: Rule, U: UpdateMode> Optimizer<R, U, Allocated> {
    /// An optimizer for tensors of the given lengths in update mode `U`: allocates the slots,
    /// the EMA buffer if asked for, and the per-tensor overrides.
    pub(crate) fn allocate(rule: R, tensor_lens: &[usize], config: Config<U>) -> Self {
        let ends: Box<[usize]> = tensor_lens
            .iter()
            .scan(0, |acc, &l| {
                *acc += l;
                Some(*acc)
            })
            .collect();
        let n = ends.last().copied().unwrap_or(0);
        let k = ends.len();
        let ema = if config.ema.is_some() { n } else { 0 };
        Optimizer::from_parts(
            rule,
            config,
            ends,
            vec![Override::NONE; k].into_boxed_slice(),
            AlignedFloats::zeros(n * R::SLOTS.len()),
            AlignedFloats::zeros(ema),
        )
    }

    /// Uses other hyper-parameters for tensor `i` (PyTorch parameter groups; an arena has no
    /// room for overrides). With a schedule,
    /// the override's `lr` is scaled by the same factor as the main one.
    pub fn set_tensor_rule(&mut self, i: usize, rule: R) -> Result<(), StateError> {
        self.overrides
            .get_mut(i)
            .ok_or(StateError::TensorIndex(i))?
            .rule = Some(rule);
        Ok(())
    }

    /// Uses another weight-decay coefficient for tensor `i` (for example 0 for biases).
    pub fn set_tensor_weight_decay(&mut self, i: usize, wd: f32) -> Result<(), StateError> {
        self.overrides
            .get_mut(i)
            .ok_or(StateError::TensorIndex(i))?
            .decay = Some(wd);
        Ok(())
    }
}

impl<R: Rule, U: UpdateMode, S: Storage> Optimizer<R, U, S> {
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
}
