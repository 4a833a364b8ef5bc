//! The [`Optimizer`] with buffers it allocates once (feature `alloc`): its constructors, its
//! per-tensor overrides, and its state as named arrays (Keras' `get_weights`).

use super::config::Config;
use super::mode::{EveryPart, UpdateMode};
use super::newton_schulz::{newton_schulz_serial_work, newton_schulz_work};
use super::optimizer::Optimizer;
use super::optimizer::{slots_len, work_len};
use super::rule::{Rule, Shape};
use super::state::{OptimizerPart, Part, PartMut};
use super::storage::{Allocated, Layout, Override, Placed, Storage};
use crate::aligned::AlignedFloats;
use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;
use core::ops::Range;

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

    /// An optimizer for tensors of the given shapes (what a tensor-wise rule reads: its rows,
    /// columns and rank), each on the branch its shape picks ([`Rule::branch`]).
    ///
    /// # Panics
    /// As [`with_config`](Self::with_config).
    pub fn with_shapes(rule: R, shapes: &[Shape], config: Config) -> Self {
        Self::allocate_placed(rule, placed(shapes, &[]), config)
    }

    /// [`with_shapes`](Self::with_shapes), with some tensors routed by name to a branch of
    /// the rule (Keras' `exclude_layers`): `routes` holds `(tensor, branch name)` pairs.
    pub fn with_routes(
        rule: R,
        shapes: &[Shape],
        routes: &[(usize, &str)],
        config: Config,
    ) -> Result<Self, StateError> {
        let routes = branch_routes::<R>(shapes.len(), routes)?;
        Ok(Self::allocate_placed(rule, placed(shapes, &routes), config))
    }
}

/// The scratch beyond [`work_len`] that lets the matrix steps' products use every thread of
/// the current pool (the matrix step's scratch is the last of a tensor's).
fn pool_room<R: Rule>(layout: &[Placed]) -> usize {
    if !R::MATRIX_STEP {
        return 0;
    }
    (0..layout.tensor_count())
        .map(|i| {
            let Shape { rows, cols, .. } = layout.tensor_shape(i);
            newton_schulz_work(rows, cols) - newton_schulz_serial_work(rows, cols)
        })
        .max()
        .unwrap_or(0)
}

/// `(tensor, branch name)` routes as `(tensor, branch index)`, checked against `tensors` and
/// [`Rule::BRANCHES`].
pub(crate) fn branch_routes<R: Rule>(
    tensors: usize,
    routes: &[(usize, &str)],
) -> Result<Vec<(usize, usize)>, StateError> {
    routes
        .iter()
        .map(|&(tensor, branch)| {
            if tensor >= tensors {
                return Err(StateError::TensorIndex(tensor));
            }
            let b = R::BRANCHES
                .iter()
                .position(|b| *b == branch)
                .ok_or_else(|| StateError::UnknownName(branch.into()))?;
            Ok((tensor, b))
        })
        .collect()
}

impl<R: Rule, U: UpdateMode> Optimizer<R, U, Allocated> {
    /// An optimizer for tensors of the given lengths in update mode `U`: allocates the slots,
    /// the EMA buffer if asked for, and the per-tensor overrides. An optimizer that allocates
    /// compiles in every part of the update, so that any configuration trains with it.
    pub(crate) fn allocate(rule: R, tensor_lens: &[usize], config: Config<U>) -> Self
    where
        U: EveryPart,
    {
        let shapes: Vec<Shape> = tensor_lens.iter().map(|&l| Shape::vector(l)).collect();
        Self::allocate_placed(rule, placed(&shapes, &[]), config)
    }

    /// [`allocate`](Self::allocate) for tensors of the given shapes, some routed to a branch:
    /// `(tensor, branch index)`.
    pub(crate) fn allocate_shaped(
        rule: R,
        shapes: &[Shape],
        routes: &[(usize, usize)],
        config: Config<U>,
    ) -> Self
    where
        U: EveryPart,
    {
        Self::allocate_placed(rule, placed(shapes, routes), config)
    }

    /// [`allocate`](Self::allocate) for tensors placed with their shapes and routes.
    pub(crate) fn allocate_placed(rule: R, layout: Box<[Placed]>, config: Config<U>) -> Self
    where
        U: EveryPart,
    {
        let n = layout.last().map_or(0, |t| t.end);
        let k = layout.tensor_count();
        let ema = if config.ema.is_some() { n } else { 0 };
        let slots = AlignedFloats::zeros(slots_len::<R>(&layout));
        let work =
            AlignedFloats::zeros(work_len::<R, U>(&layout, &config) + pool_room::<R>(&layout));
        Optimizer::from_parts(
            rule,
            config,
            layout,
            vec![Override::NONE; k].into_boxed_slice(),
            slots,
            AlignedFloats::zeros(ema),
            work,
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

/// Tensors of `shapes` one after the other, with the branches `routes` names (`(tensor,
/// branch)` pairs).
fn placed(shapes: &[Shape], routes: &[(usize, usize)]) -> Box<[Placed]> {
    let mut end = 0;
    shapes
        .iter()
        .enumerate()
        .map(|(i, &shape)| {
            end += shape.numel();
            let route = routes.iter().rev().find(|r| r.0 == i).map(|r| r.1);
            Placed { end, shape, route }
        })
        .collect()
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

    /// Each array of [`get_weights`](Self::get_weights), in order: its name, the part of the
    /// state it is in ([`state_parts`](Self::state_parts)) and where it lies in the part's
    /// values. Keras' order: the step counter, each carried scalar, then each slot and the
    /// EMA tensor by tensor.
    fn weight_arrays(&self) -> Vec<(String, OptimizerPart, Range<usize>)> {
        let mut parts: Vec<OptimizerPart> = self.state_parts().collect();
        parts.sort_by_key(|part| match part {
            OptimizerPart::Iterations => 0,
            OptimizerPart::Carried(_) => 1,
            OptimizerPart::Slot(_) | OptimizerPart::Ema => 2,
        });
        let per_tensor = |prefix: &str, part| {
            (0..self.tensor_count())
                .map(|i| {
                    let at = match part {
                        OptimizerPart::Slot(j) => self.slot_range(j, i),
                        _ => self.tensor_range(i),
                    };
                    (format!("{prefix}.{i}"), part, at.unwrap_or_default())
                })
                .collect::<Vec<_>>()
        };
        parts
            .into_iter()
            .flat_map(|part| match part {
                OptimizerPart::Iterations => vec![("iterations".into(), part, 0..1)],
                OptimizerPart::Carried(i) => vec![(R::CARRIED[i].into(), part, 0..1)],
                OptimizerPart::Slot(j) => per_tensor(R::SLOTS[j], part),
                OptimizerPart::Ema => per_tensor("ema", part),
            })
            .collect()
    }

    /// Names of the arrays of [`get_weights`](Self::get_weights), in order: `iterations`, each
    /// carried scalar, then `<slot>.<tensor>` for every slot and tensor, then `ema.<tensor>`.
    pub fn weight_names(&self) -> Vec<String> {
        self.weight_arrays()
            .into_iter()
            .map(|(name, ..)| name)
            .collect()
    }

    /// The whole state as arrays (Keras `optimizer.get_weights()`), named by
    /// [`weight_names`](Self::weight_names). `iterations` is stored as an `f32`, exact up to
    /// 2^24 steps; use [`iterations`](Self::iterations) beyond.
    pub fn get_weights(&self) -> Vec<Vec<f32>> {
        self.weight_arrays()
            .into_iter()
            .map(|(_, part, at)| match self.part(part) {
                Part::Floats(values) => values[at].to_vec(),
                Part::Word(word) => vec![word as f32],
            })
            .collect()
    }

    /// Restores a state taken by [`get_weights`](Self::get_weights). Nothing is changed unless
    /// every array fits.
    pub fn set_weights(&mut self, weights: &[Vec<f32>]) -> Result<(), StateError> {
        let arrays = self.weight_arrays();
        if arrays.len() != weights.len() {
            return Err(StateError::Count {
                expected: arrays.len(),
                got: weights.len(),
            });
        }
        for ((name, _, at), w) in arrays.iter().zip(weights) {
            if w.len() != at.len() {
                return Err(StateError::Length {
                    name: name.clone(),
                    expected: at.len(),
                    got: w.len(),
                });
            }
        }
        for ((_, part, at), w) in arrays.into_iter().zip(weights) {
            match self.part_mut(part) {
                PartMut::Floats(values) => values[at].copy_from_slice(w),
                PartMut::Word(word) => *word = w[0] as u64,
            }
        }
        Ok(())
    }
}
