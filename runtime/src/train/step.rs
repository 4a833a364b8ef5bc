//! [`TrainStep`]: every buffer a train step needs for batches up to `B`, allocated once.

use super::model::{batch_of, check_targets, Bytes, Model};
use crate::layers::{Ctx, Grad, Mode};
use crate::loss::Loss;
use crate::optim::{Config, Optimizer, Rule};
use crate::rng::{Rng, Seed};
use alloc::boxed::Box;
use alloc::vec;
use core::marker::PhantomData;

/// Loss and accuracy over a data set.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Evaluation {
    /// Mean loss per sample.
    pub loss: f32,
    /// Fraction of samples predicted right, for losses that define it.
    pub accuracy: Option<f32>,
}

/// The target type of a model's loss.
pub type Target<M> = <<M as Model>::Loss as Loss>::Target;

/// Gradients, activations, workspace and optimizer state for training a model `M` with rule
/// `R` on batches of at most `B` samples. Construction allocates each buffer once (on the heap,
/// so a large model does not touch the stack); [`run`](Self::run) allocates nothing.
///
/// Every method takes the model by reference, so that what it computes always uses the
/// model's current weights.
pub struct TrainStep<M: Model, R: Rule, const B: usize> {
    grads: Box<[f32]>,
    acts: Box<[f32]>,
    node_grads: Box<[f32]>,
    dx: Box<[f32]>,
    state: Box<[f32]>,
    scratch: Box<[f32]>,
    gemm: Box<[f32]>,
    optimizer: Optimizer<R>,
    seed: Seed,
    model: PhantomData<fn() -> M>,
}

fn zeros(n: usize) -> Box<[f32]> {
    vec![0.0; n].into_boxed_slice()
}

impl<M: Model, R: Rule, const B: usize> TrainStep<M, R, B> {
    /// Bytes of parameters, gradients, activations (outputs of every node, what layers save
    /// for backward, their gradients, and the input gradient, for `B` samples), workspace for
    /// one thread and optimizer slots. With more threads the GEMM workspace grows: see
    /// [`workspace_bytes`](Self::workspace_bytes).
    pub const BYTES: Bytes = Bytes::of::<M, R>(B, false);

    /// A train step for `model` with the default [`Config`].
    pub fn new(model: &M, rule: R) -> Self {
        Self::with_config(model, rule, Config::default())
    }

    /// A train step for `model` with clipping, weight decay, EMA or a schedule.
    pub fn with_config(model: &M, rule: R, config: Config) -> Self {
        let lens: alloc::vec::Vec<usize> = M::TENSORS.iter().map(|t| t.tensor.len()).collect();
        debug_assert_eq!(model.params().len(), M::PARAMS);
        TrainStep {
            grads: zeros(M::PARAMS),
            acts: zeros(M::ACTIVATIONS * B),
            node_grads: zeros(M::NODE_GRADS * B),
            dx: zeros(M::IN * B),
            state: zeros(M::STATE),
            scratch: zeros(M::scratch_len(B)),
            gemm: zeros(M::gemm_len(B)),
            optimizer: Optimizer::with_config(rule, &lens, config),
            seed: Seed(0x5eed),
            model: PhantomData,
        }
    }

    /// Seeds the random stream of dropout (each step draws from its own stream, so that a
    /// resumed run draws the same masks).
    #[must_use]
    pub fn with_seed(mut self, seed: Seed) -> Self {
        self.seed = seed;
        self
    }

    /// The seed of the dropout streams (see [`with_seed`](Self::with_seed)).
    pub fn seed(&self) -> Seed {
        self.seed
    }

    /// Sets the seed of the dropout streams (when restoring a state).
    pub fn set_seed(&mut self, seed: Seed) {
        self.seed = seed;
    }

    /// Scratch, GEMM workspace and the state copy of inference, in bytes, as allocated for
    /// the threads of the pool it was built in.
    pub fn workspace_bytes(&self) -> usize {
        (self.scratch.len() + self.gemm.len() + self.state.len()) * 4
    }

    /// The optimizer (its state, step counter and hyper-parameters).
    pub fn optimizer(&self) -> &Optimizer<R> {
        &self.optimizer
    }

    /// The optimizer, writable (to restore a state or change hyper-parameters).
    pub fn optimizer_mut(&mut self) -> &mut Optimizer<R> {
        &mut self.optimizer
    }

    /// The gradients of the last [`run`](Self::run) or [`gradients`](Self::gradients), in the
    /// model's parameter layout.
    pub fn grads(&self) -> &[f32] {
        &self.grads
    }

    /// Forward pass in `mode`; `state` is the model's own in training, a copy otherwise.
    fn forward(
        &mut self,
        params: &[f32],
        state: Option<&mut [f32]>,
        x: &[f32],
        mode: Mode,
    ) -> usize {
        let batch = batch_of::<M>(x, B);
        let mut rng = Rng::with_stream(self.seed, self.optimizer.iterations());
        let mut ctx = Ctx {
            gemm: &mut self.gemm,
            scratch: &mut self.scratch,
            rng: &mut rng,
            mode,
        };
        let state = match state {
            Some(s) => s,
            None => &mut self.state,
        };
        M::forward(&mut ctx, params, state, x, &mut self.acts, batch);
        batch
    }

    /// The model's outputs of the last forward pass (of [`run`](Self::run),
    /// [`gradients`](Self::gradients), [`predict`](Self::predict) or an input gradient) over
    /// `batch` samples: for `run`, the outputs before the update, from which its loss came.
    pub fn output(&self, batch: usize) -> &[f32] {
        assert!(
            batch <= B,
            "batch of {batch} samples exceeds the maximum {B}"
        );
        let o = M::OUTPUT_OFFSET * batch;
        &self.acts[o..o + M::OUT * batch]
    }

    /// Forward in training mode, the loss, and backward into the gradients; returns the loss.
    fn loss_and_backward(
        &mut self,
        model: &mut M,
        x: &[f32],
        y: &[Target<M>],
        with_dx: bool,
    ) -> f32 {
        let (params, state) = model.split_mut();
        let batch = self.forward(params, Some(state), x, Mode::Train);
        check_targets::<M>(batch, y);
        self.backward_from_loss(model.params(), x, y, batch, with_dx, Mode::Train)
    }

    #[allow(clippy::too_many_arguments)]
    fn backward_from_loss(
        &mut self,
        params: &[f32],
        x: &[f32],
        y: &[Target<M>],
        batch: usize,
        with_dx: bool,
        mode: Mode,
    ) -> f32 {
        let o = M::OUTPUT_OFFSET * batch;
        let g = M::OUTPUT_GRAD_OFFSET * batch;
        let n = M::OUT * batch;
        let loss = <M::Loss as Loss>::loss_and_grad(
            &self.acts[o..o + n],
            y,
            &mut self.node_grads[g..g + n],
            M::OUT,
        );
        self.backward(params, x, batch, with_dx, mode);
        loss
    }

    fn backward(&mut self, params: &[f32], x: &[f32], batch: usize, with_dx: bool, mode: Mode) {
        let mut rng = Rng::with_stream(self.seed, self.optimizer.iterations());
        let mut ctx = Ctx {
            gemm: &mut self.gemm,
            scratch: &mut self.scratch,
            rng: &mut rng,
            mode,
        };
        let dx = if with_dx {
            Grad::Set(&mut self.dx[..M::IN * batch])
        } else {
            Grad::Skip
        };
        M::backward(
            &mut ctx,
            params,
            x,
            &self.acts,
            &mut self.node_grads,
            &mut self.grads,
            dx,
            batch,
        );
    }

    /// One training step on a batch: forward, loss, backward, and the optimizer's fused pass
    /// over the model's parameters. Returns the loss of the batch before the update. Allocates
    /// nothing.
    pub fn run(&mut self, model: &mut M, x: &[f32], y: &[Target<M>]) -> f32 {
        let loss = self.loss_and_backward(model, x, y, false);
        self.optimizer.step(model.params_mut(), &self.grads);
        loss
    }

    /// The loss of a batch and its gradients ([`grads`](Self::grads)) with respect to the
    /// parameters, in training mode, without an update.
    pub fn gradients(&mut self, model: &mut M, x: &[f32], y: &[Target<M>]) -> f32 {
        self.loss_and_backward(model, x, y, false)
    }

    /// The model's output for a batch (inference mode).
    pub fn predict(&mut self, model: &M, x: &[f32]) -> &[f32] {
        self.state.copy_from_slice(model.state());
        let batch = self.forward(model.params(), None, x, Mode::Eval);
        self.output(batch)
    }

    /// d sum(output) / d x for a batch, from the model's current weights (inference mode).
    pub fn input_gradient(&mut self, model: &M, x: &[f32]) -> &[f32] {
        self.state.copy_from_slice(model.state());
        let batch = self.forward(model.params(), None, x, Mode::Eval);
        let g = M::OUTPUT_GRAD_OFFSET * batch;
        self.node_grads[g..g + M::OUT * batch].fill(1.0);
        self.backward(model.params(), x, batch, true, Mode::Eval);
        &self.dx[..M::IN * batch]
    }

    /// d loss / d x for a batch, from the model's current weights (inference mode).
    pub fn loss_input_gradient(&mut self, model: &M, x: &[f32], y: &[Target<M>]) -> &[f32] {
        self.state.copy_from_slice(model.state());
        let batch = self.forward(model.params(), None, x, Mode::Eval);
        check_targets::<M>(batch, y);
        self.backward_from_loss(model.params(), x, y, batch, true, Mode::Eval);
        &self.dx[..M::IN * batch]
    }

    /// Mean loss and accuracy over any number of samples, `B` at a time (inference mode).
    pub fn evaluate(&mut self, model: &M, x: &[f32], y: &[Target<M>]) -> Evaluation {
        let per = <M::Loss as Loss>::targets_per_sample(M::OUT);
        let (mut loss, mut correct, mut seen) = (0.0f64, 0usize, 0usize);
        let mut has_accuracy = true;
        for (xs, ys) in x.chunks(B * M::IN).zip(y.chunks(B * per)) {
            let out = self.predict(model, xs);
            let batch = xs.len() / M::IN;
            loss += f64::from(<M::Loss as Loss>::loss(out, ys, M::OUT)) * batch as f64;
            match <M::Loss as Loss>::correct(out, ys, M::OUT) {
                Some(c) => correct += c,
                None => has_accuracy = false,
            }
            seen += batch;
        }
        let seen_f = seen.max(1) as f64;
        Evaluation {
            loss: (loss / seen_f) as f32,
            accuracy: has_accuracy.then(|| (correct as f64 / seen_f) as f32),
        }
    }
}
