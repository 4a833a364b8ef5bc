//! [`TrainStep`]: the step core over buffers it allocates once, at construction.

use super::model::Model;
use super::step::{grads_len, Buffers, Step, DEFAULT_SEED};
use crate::aligned::AlignedFloats;
use crate::optim::{Allocated, Config, EveryPart, Full, Optimizer, Rule, UpdateMode};
use alloc::vec::Vec;
use core::marker::PhantomData;

/// Gradients, activations, workspace and optimizer state for training a model `M` with rule
/// `R` on batches of at most `B` samples, in update mode `U` ([`Full`] by default; with
/// [`Fused`](crate::optim::Fused) each layer is updated during the backward pass and no full
/// gradient buffer exists, with the same bits). Construction allocates each buffer once (on
/// the heap, so a large model does not touch the stack); [`run`](Step::run) allocates nothing.
/// It compiles in every part of the update ([`Every`](crate::optim::Every)), so that any configuration trains with
/// it; a step that compiles in fewer is an [`EmbeddedStep`](super::EmbeddedStep), which refuses
/// a configuration that needs a part it left out ([`EveryPart`]).
pub type TrainStep<M, R, const B: usize, U = Full> = Step<M, R, B, U, Allocated>;

impl<M: Model, R: Rule, const B: usize, U: UpdateMode> TrainStep<M, R, B, U> {
    /// A train step for `model` with the default [`Config`]. A step of `B = 0` does not
    /// compile.
    pub fn new(model: &M, rule: R) -> Self
    where
        U: EveryPart,
    {
        let () = Self::SOME_SAMPLES;
        Self::with_config(model, rule, Config::new())
    }

    /// A train step for `model` with clipping, weight decay, EMA or a schedule.
    ///
    /// # Panics
    /// If `config` has a schedule and the rule no learning rate
    /// ([`Rule::learning_rate`]) for it to set.
    pub fn with_config(model: &M, rule: R, config: Config<U>) -> Self
    where
        U: EveryPart,
    {
        let () = Self::SOME_SAMPLES;
        let lens: Vec<usize> = M::TRAINABLE_TENSORS
            .iter()
            .map(|t| t.tensor.len())
            .collect();
        debug_assert_eq!(model.params().len(), M::PARAMS);
        Step {
            bufs: Buffers {
                grads: AlignedFloats::zeros(grads_len::<M, U>()),
                acts: AlignedFloats::zeros(M::ACTIVATIONS * B),
                node_grads: AlignedFloats::zeros(M::NODE_GRADS * B),
                dx: AlignedFloats::zeros(M::IN * B),
                state: AlignedFloats::zeros(M::STATE),
                scratch: AlignedFloats::zeros(M::scratch_len(B)),
                gemm: AlignedFloats::zeros(M::gemm_len(B)),
            },
            optimizer: Optimizer::allocate(rule, &lens, config),
            seed: DEFAULT_SEED,
            first_sample: 0,
            model: PhantomData,
        }
    }
}
