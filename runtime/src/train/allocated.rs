//! [`TrainStep`]: the step core over buffers it allocates once, at construction.

use super::model::Model;
use super::step::{grads_len, Buffers, Step, DEFAULT_SEED};
use crate::aligned::AlignedFloats;
use crate::optim::owned::branch_routes;
use crate::optim::{
    Allocated, Config, EveryPart, Full, Optimizer, Rule, Shape, StateError, UpdateMode,
};
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
        Self::placed(model, rule, config, &[])
    }

    /// [`with_config`](Self::with_config), with some tensors routed by name to a branch of a
    /// tensor-wise rule (Keras' `exclude_layers`, optax's masks): `routes` holds `(name,
    /// branch)` pairs, where `name` is a layer's field name (`fc1`: each of its trainable
    /// tensors) or a tensor's (`fc1.weight`). The other tensors take the branch their shape
    /// picks ([`Rule::branch`]).
    ///
    /// # Errors
    /// [`StateError::UnknownName`] for a name that is no trainable tensor or layer, or a branch
    /// the rule does not have.
    pub fn with_routes(
        model: &M,
        rule: R,
        config: Config<U>,
        routes: &[(&str, &str)],
    ) -> Result<Self, StateError>
    where
        U: EveryPart,
    {
        let mut indexed = Vec::new();
        for &(name, branch) in routes {
            let before = indexed.len();
            for (i, t) in M::TRAINABLE_TENSORS.iter().enumerate() {
                if names_tensor(name, t.layer, t.tensor.name) {
                    indexed.push((i, branch));
                }
            }
            if indexed.len() == before {
                return Err(StateError::UnknownName(name.into()));
            }
        }
        let routes = branch_routes::<R>(M::TRAINABLE_TENSORS.len(), &indexed)?;
        Ok(Self::placed(model, rule, config, &routes))
    }

    /// A train step whose optimizer places each trainable tensor with its shape, on the branch
    /// `routes` names (`(tensor, branch index)`) or its shape picks.
    fn placed(model: &M, rule: R, config: Config<U>, routes: &[(usize, usize)]) -> Self
    where
        U: EveryPart,
    {
        let () = Self::SOME_SAMPLES;
        let shapes: Vec<Shape> = M::TRAINABLE_TENSORS
            .iter()
            .map(|t| Shape::of(t.tensor.shape))
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
            optimizer: Optimizer::allocate_shaped(rule, &shapes, routes, config),
            seed: DEFAULT_SEED,
            first_sample: 0,
            model: PhantomData,
        }
    }
}

/// Whether `name` names tensor `tensor` of layer `layer`: the layer's name, or
/// `layer.tensor`.
fn names_tensor(name: &str, layer: &str, tensor: &str) -> bool {
    match name.split_once('.') {
        Some((l, t)) => l == layer && t == tensor,
        None => name == layer,
    }
}
