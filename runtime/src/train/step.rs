//! The train step core: forward, loss, backward and the optimizer's update over buffers of a
//! [`Storage`], the same code whether the step allocated them ([`TrainStep`]) or borrows them
//! from an arena ([`EmbeddedStep`]).
//!
//! [`TrainStep`]: super::TrainStep
//! [`EmbeddedStep`]: super::EmbeddedStep

use super::batch::{self, expect, BatchError};
use super::input::Inputs;
use super::model::{Bytes, Model};
use super::sink::{Apply, Discard, EachLayer, GradSink, Share, Store};
use super::tensors::trainable_runs;
use crate::accumulate::{narrow, widen, Accumulator, Wide};
use crate::kernels::parallel;
use crate::layers::{Ctx, Grad, Lengths, Mode};
use crate::loss::{batch_weight, Loss, Targets};
use crate::optim::{AllGradientsFirst, Optimizer, Plan, Rule, Storage, UpdateMode};
use crate::rng::{Rng, Seed};
use core::marker::PhantomData;
use core::ops::Range;

/// Loss and accuracy over a data set.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Evaluation {
    /// Mean loss per sample (per counted target, where the loss ignores some:
    /// [`IGNORE`](crate::loss::IGNORE)).
    pub loss: f32,
    /// Fraction of samples (or positions) predicted right, for losses that define it.
    pub accuracy: Option<f32>,
}

/// The target type of a model's loss.
pub type Target<M> = <<M as Model>::Loss as Loss>::Target;

/// What [`Step::run_or_skip`] did with a batch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepOutcome {
    /// The loss of the batch, before the update.
    pub loss: f32,
    /// Whether the update was skipped because the loss or a gradient was NaN or infinite.
    pub skipped: bool,
}

/// The seed of the dropout streams of a new step.
pub(crate) const DEFAULT_SEED: Seed = Seed(0x5eed);

/// The buffers of a step other than the optimizer's.
pub(crate) struct Buffers<F> {
    /// Parameter gradients: as long as the trainable parameters, or as the largest layer's
    /// when each layer is updated during the backward pass.
    pub(crate) grads: F,
    /// Every node's output and what its layer saves, for `B` samples.
    pub(crate) acts: F,
    /// Every node's gradient, for `B` samples.
    pub(crate) node_grads: F,
    /// The input gradient, for `B` samples.
    pub(crate) dx: F,
    /// A copy of the model's state, for inference.
    pub(crate) state: F,
    /// Per-call scratch of the layers.
    pub(crate) scratch: F,
    /// The GEMM's workspace.
    pub(crate) gemm: F,
}

/// The values of a step's gradient buffer for model `M` in update mode `U`.
pub(crate) const fn grads_len<M: Model, U: UpdateMode>() -> usize {
    if U::FUSED {
        M::MAX_LAYER_PARAMS
    } else {
        M::TRAINABLE
    }
}

/// Where the backward pass of a step sends each layer's parameter gradient.
enum Gradients<'p, R: Rule> {
    /// Into the full gradient buffer.
    Store(&'p [f32]),
    /// Into the full gradient buffer, and each layer's part to a function once it is whole.
    Share(&'p [f32], EachLayer<'p>),
    /// Nowhere (an input gradient).
    Discard(&'p [f32]),
    /// Into each layer's update, with the step's plan.
    Apply(&'p mut [f32], &'p Plan<R>),
}

/// A train step of model `M` with rule `R` for batches of at most `B` samples, in update mode
/// `U`, whose buffers (gradients, activations, workspace, optimizer state) are in storage `S`.
/// Use it as [`TrainStep`](super::TrainStep) (buffers allocated once) or
/// [`EmbeddedStep`](super::EmbeddedStep) (an arena the caller owns).
///
/// Every method takes the model by reference, so that what it computes always uses the
/// model's current weights. No method allocates. A method that takes targets takes them as
/// [`Targets`] of the model's loss: a slice, an array or a `Vec` of its
/// [`Target`](Loss::Target) values (`u32` class indices or `f32` values), so that targets of
/// another type are an error that says which the loss takes.
pub struct Step<M: Model, R: Rule, const B: usize, U: UpdateMode, S: Storage> {
    pub(crate) bufs: Buffers<S::Floats>,
    pub(crate) optimizer: Optimizer<R, U, S>,
    pub(crate) seed: Seed,
    /// The global index of the next batch's first sample (a shard's place in its global
    /// batch), for the dropout keys; 0 for a whole batch.
    pub(crate) first_sample: usize,
    pub(crate) model: PhantomData<fn() -> M>,
}

impl<M: Model, R: Rule, const B: usize, U: UpdateMode, S: Storage> Step<M, R, B, U, S> {
    /// Bytes of parameters, gradients (all of them, or the largest layer's with
    /// [`Fused`](crate::optim::Fused)), activations (outputs of every node, what layers save
    /// for backward, their gradients, and the input gradient, for `B` samples), workspace for
    /// one thread and optimizer slots. With more threads the GEMM workspace of a
    /// [`TrainStep`](super::TrainStep) grows: see [`workspace_bytes`](Self::workspace_bytes).
    pub const BYTES: Bytes = Bytes::of::<M, R>(B, U::FUSED);

    /// Fails the build of a step for batches of no samples, where every constructor names it.
    pub(crate) const SOME_SAMPLES: () = assert!(
        B > 0,
        "a train step's batch `B` is at least 1 sample: a step of `B = 0` trains on nothing"
    );

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

    /// Scratch, GEMM workspace and the state copy of inference, in bytes, as allocated (for
    /// a [`TrainStep`](super::TrainStep), for the threads of the pool it was built in).
    pub fn workspace_bytes(&self) -> usize {
        (self.bufs.scratch.len() + self.bufs.gemm.len() + self.bufs.state.len()) * 4
    }

    /// The optimizer (its state, step counter and hyper-parameters).
    pub fn optimizer(&self) -> &Optimizer<R, U, S> {
        &self.optimizer
    }

    /// The optimizer, writable (to restore a state or change hyper-parameters).
    pub fn optimizer_mut(&mut self) -> &mut Optimizer<R, U, S> {
        &mut self.optimizer
    }

    /// Writes `model` with view `view` of its trainable tensors into `into`: the values of
    /// [`Rule::VIEWS`]`[view]` (schedule-free's `eval_params`, the average at which to
    /// evaluate and to save for inference), its frozen tensors and its state as they are. Then
    /// [`evaluate`](Self::evaluate), [`predict`](Self::predict) and
    /// `checkpoint::save_model` take `into`; training goes on with `model`. Allocates nothing.
    ///
    /// # Panics
    /// If `view` is not an index of [`Rule::VIEWS`].
    pub fn view_into(&self, model: &M, view: usize, into: &mut M) {
        into.params_mut().copy_from_slice(model.params());
        into.split_mut().1.copy_from_slice(model.state());
        let params = model.params();
        let out = into.params_mut();
        for (i, t) in M::TRAINABLE_TENSORS.iter().enumerate() {
            let r = t.offset..t.offset + t.tensor.len();
            self.optimizer
                .view_tensor(view, i, &params[r.clone()], &mut out[r]);
        }
    }

    /// The gradient buffer: after [`run`](Self::run) or [`gradients`](Self::gradients) in
    /// the [`Full`](crate::optim::Full) mode, the gradients of the trainable tensors, laid out
    /// as [`Model::TRAINABLE_TENSORS`] (the model's parameter layout when none is frozen; an
    /// input gradient overwrites its first values with each layer's gradient in turn).
    pub fn grads(&self) -> &[f32] {
        &self.bufs.grads
    }

    /// The model's outputs of the last forward pass (of [`run`](Self::run),
    /// [`gradients`](Self::gradients), [`predict`](Self::predict) or an input gradient) over
    /// `batch` samples: for `run`, the outputs before the update, from which its loss came.
    ///
    /// # Panics
    /// If `batch` exceeds `B`.
    pub fn output(&self, batch: usize) -> &[f32] {
        assert!(
            batch <= B,
            "batch of {batch} samples exceeds the maximum {B}"
        );
        let o = M::OUTPUT_OFFSET * batch;
        &self.bufs.acts[o..o + M::OUT * batch]
    }

    /// One training step on a batch: forward, loss, backward, and the optimizer's fused pass
    /// over the model's parameters (after the backward pass, or layer by layer during it with
    /// [`Fused`](crate::optim::Fused)). Returns the loss of the batch before the update.
    ///
    /// # Panics
    /// With the message of the [`BatchError`] that [`try_run`](Self::try_run) returns, at the
    /// caller's line: if `x` is not whole samples or holds more than `B` of them, `y` is not
    /// their targets, a class label is outside the loss's classes or a token id outside the
    /// model's vocabulary (`"sample 3, position 7: token id 4294967295 is outside the
    /// vocabulary of 40 ids (0..40)"`).
    #[track_caller]
    pub fn run<X: ?Sized + Inputs<M::Input>, Y: ?Sized + Targets<M::Loss>>(
        &mut self,
        model: &mut M,
        x: &X,
        y: &Y,
    ) -> f32 {
        expect(self.try_run(model, x, y))
    }

    /// [`run`](Self::run), or a [`BatchError`] (and nothing changed) where it panics: a
    /// batch that is not whole samples, more than `B` samples, targets that are not theirs, a
    /// class label outside the loss's classes or a token id outside the vocabulary.
    pub fn try_run<X: ?Sized + Inputs<M::Input>, Y: ?Sized + Targets<M::Loss>>(
        &mut self,
        model: &mut M,
        x: &X,
        y: &Y,
    ) -> Result<f32, BatchError> {
        let (y, lengths, x) = (y.as_targets(), x.lengths(), x.values());
        let batch = batch::labelled::<M>(x, lengths, y, B)?;
        let loss = self.forward_loss(model, x, lengths, y, batch);
        self.backward_and_update(model, x, lengths, batch);
        Ok(loss)
    }

    /// [`run`](Self::run), except that a batch whose loss or any gradient is NaN or infinite
    /// changes nothing: the parameters, the optimizer's slots and step counter and the model's
    /// running statistics stay as they were, as a mixed-precision loss scaler skips an
    /// overflowing step. On a finite batch, the same bits as `run`. Needs every gradient
    /// before the update ([`Full`](crate::optim::Full)).
    ///
    /// # Panics
    /// As [`run`](Self::run).
    #[track_caller]
    pub fn run_or_skip<X: ?Sized + Inputs<M::Input>, Y: ?Sized + Targets<M::Loss>>(
        &mut self,
        model: &mut M,
        x: &X,
        y: &Y,
    ) -> StepOutcome
    where
        U: AllGradientsFirst,
    {
        let (y, lengths, x) = (y.as_targets(), x.lengths(), x.values());
        let batch = expect(batch::labelled::<M>(x, lengths, y, B));
        self.keep_state(model);
        let loss = self.gradients_of(model, x, lengths, y, batch, None);
        let b = &self.bufs;
        update_or_skip(&mut self.optimizer, &b.state, model, loss, &b.grads)
    }

    /// The loss of a batch and its gradients ([`grads`](Self::grads)) with respect to the
    /// parameters, in training mode, without an update.
    ///
    /// # Panics
    /// As [`run`](Self::run); [`try_gradients`](Self::try_gradients) returns the error.
    #[track_caller]
    pub fn gradients<X: ?Sized + Inputs<M::Input>, Y: ?Sized + Targets<M::Loss>>(
        &mut self,
        model: &mut M,
        x: &X,
        y: &Y,
    ) -> f32
    where
        U: AllGradientsFirst,
    {
        expect(self.try_gradients(model, x, y))
    }

    /// [`gradients`](Self::gradients), or a [`BatchError`] where it panics (see
    /// [`try_run`](Self::try_run)).
    pub fn try_gradients<X: ?Sized + Inputs<M::Input>, Y: ?Sized + Targets<M::Loss>>(
        &mut self,
        model: &mut M,
        x: &X,
        y: &Y,
    ) -> Result<f32, BatchError>
    where
        U: AllGradientsFirst,
    {
        let (y, lengths, x) = (y.as_targets(), x.lengths(), x.values());
        let batch = batch::labelled::<M>(x, lengths, y, B)?;
        Ok(self.gradients_of(model, x, lengths, y, batch, None))
    }

    /// [`gradients`](Self::gradients) of one shard of a larger global batch, whose first
    /// sample has index `first_sample` there: dropout draws each sample's mask from its
    /// global index, so the shard gets the masks it would get inside the whole batch. The
    /// data-parallel step ([`DataParallel`](crate::distributed::DataParallel)) runs its
    /// shards through this.
    ///
    /// # Panics
    /// As [`gradients`](Self::gradients);
    /// [`try_shard_gradients`](Self::try_shard_gradients) returns the error.
    #[track_caller]
    pub fn shard_gradients<X: ?Sized + Inputs<M::Input>, Y: ?Sized + Targets<M::Loss>>(
        &mut self,
        model: &mut M,
        x: &X,
        y: &Y,
        first_sample: usize,
    ) -> f32
    where
        U: AllGradientsFirst,
    {
        expect(self.try_shard_gradients(model, x, y, first_sample))
    }

    /// [`shard_gradients`](Self::shard_gradients), or a [`BatchError`] where it panics (see
    /// [`try_run`](Self::try_run)).
    pub fn try_shard_gradients<X: ?Sized + Inputs<M::Input>, Y: ?Sized + Targets<M::Loss>>(
        &mut self,
        model: &mut M,
        x: &X,
        y: &Y,
        first_sample: usize,
    ) -> Result<f32, BatchError>
    where
        U: AllGradientsFirst,
    {
        self.try_shard_gradients_by_layer(model, x, y, first_sample, None)
    }

    /// [`shard_gradients`](Self::shard_gradients), handing each layer's gradient to `each` as
    /// soon as the backward pass has it whole (the last layer first): its range of the
    /// gradient buffer ([`grads`](Self::grads)) and its values. A data-parallel step sends a
    /// layer's gradient on while the layers below are still in their backward pass.
    ///
    /// # Panics
    /// As [`shard_gradients`](Self::shard_gradients).
    #[track_caller]
    pub fn shard_gradients_by_layer<X: ?Sized + Inputs<M::Input>, Y: ?Sized + Targets<M::Loss>>(
        &mut self,
        model: &mut M,
        x: &X,
        y: &Y,
        first_sample: usize,
        each: &mut dyn FnMut(Range<usize>, &[f32]),
    ) -> f32
    where
        U: AllGradientsFirst,
    {
        expect(self.try_shard_gradients_by_layer(model, x, y, first_sample, Some(each)))
    }

    /// A shard's gradients, each layer's handed to `each` when there is one.
    fn try_shard_gradients_by_layer<X: ?Sized + Inputs<M::Input>, Y: ?Sized + Targets<M::Loss>>(
        &mut self,
        model: &mut M,
        x: &X,
        y: &Y,
        first_sample: usize,
        each: Option<EachLayer<'_>>,
    ) -> Result<f32, BatchError>
    where
        U: AllGradientsFirst,
    {
        let (y, lengths, x) = (y.as_targets(), x.lengths(), x.values());
        let batch = batch::labelled::<M>(x, lengths, y, B)?;
        self.first_sample = first_sample;
        let loss = self.gradients_of(model, x, lengths, y, batch, each);
        self.first_sample = 0;
        Ok(loss)
    }

    /// The model's output for a batch (inference mode).
    ///
    /// # Panics
    /// With the message of the [`BatchError`] that [`try_predict`](Self::try_predict)
    /// returns, at the caller's line: if `x` is not whole samples or holds more than `B` of
    /// them, or a token id is outside the model's vocabulary.
    #[track_caller]
    pub fn predict<X: ?Sized + Inputs<M::Input>>(&mut self, model: &M, x: &X) -> &[f32] {
        expect(self.try_predict(model, x))
    }

    /// [`predict`](Self::predict), or a [`BatchError`] where it panics.
    pub fn try_predict<X: ?Sized + Inputs<M::Input>>(
        &mut self,
        model: &M,
        x: &X,
    ) -> Result<&[f32], BatchError> {
        let (lengths, x) = (x.lengths(), x.values());
        let batch = batch::input::<M>(x, lengths, B)?;
        Ok(self.predict_of(model, x, lengths, batch))
    }

    /// d sum(output) / d params for a batch, from the model's current weights (inference
    /// mode), laid out as the parameters: what PyTorch's `model(x).sum().backward()` leaves in
    /// the `.grad` of each parameter. For a token model, the rows of its embedding table are
    /// the gradient with respect to the embedded ids.
    ///
    /// # Panics
    /// As [`predict`](Self::predict);
    /// [`try_output_gradients`](Self::try_output_gradients) returns the error.
    #[track_caller]
    pub fn output_gradients<X: ?Sized + Inputs<M::Input>>(&mut self, model: &M, x: &X) -> &[f32]
    where
        U: AllGradientsFirst,
    {
        expect(self.try_output_gradients(model, x))
    }

    /// [`output_gradients`](Self::output_gradients), or a [`BatchError`] where it panics.
    pub fn try_output_gradients<X: ?Sized + Inputs<M::Input>>(
        &mut self,
        model: &M,
        x: &X,
    ) -> Result<&[f32], BatchError>
    where
        U: AllGradientsFirst,
    {
        let (lengths, x) = (x.lengths(), x.values());
        let batch = batch::input::<M>(x, lengths, B)?;
        self.forward_eval(model, x, lengths, batch);
        self.seed_output_gradient(batch);
        let to = Gradients::Store(model.params());
        self.backward(to, x, lengths, batch, false, Mode::Eval);
        Ok(&self.bufs.grads)
    }

    /// d sum(output) / d x for a batch, from the model's current weights (inference mode).
    ///
    /// # Panics
    /// As [`predict`](Self::predict);
    /// [`try_input_gradient`](Self::try_input_gradient) returns the error.
    #[track_caller]
    pub fn input_gradient<X: ?Sized + Inputs<f32>>(&mut self, model: &M, x: &X) -> &[f32]
    where
        M: Model<Input = f32>,
    {
        expect(self.try_input_gradient(model, x))
    }

    /// [`input_gradient`](Self::input_gradient), or a [`BatchError`] where it panics.
    pub fn try_input_gradient<X: ?Sized + Inputs<f32>>(
        &mut self,
        model: &M,
        x: &X,
    ) -> Result<&[f32], BatchError>
    where
        M: Model<Input = f32>,
    {
        let (lengths, x) = (x.lengths(), x.values());
        let batch = batch::input::<M>(x, lengths, B)?;
        self.forward_eval(model, x, lengths, batch);
        self.seed_output_gradient(batch);
        Ok(self.input_backward(model, x, lengths, batch))
    }

    /// d loss / d x for a batch, from the model's current weights (inference mode).
    ///
    /// # Panics
    /// As [`run`](Self::run);
    /// [`try_loss_input_gradient`](Self::try_loss_input_gradient) returns the error.
    #[track_caller]
    pub fn loss_input_gradient<X: ?Sized + Inputs<f32>, Y: ?Sized + Targets<M::Loss>>(
        &mut self,
        model: &M,
        x: &X,
        y: &Y,
    ) -> &[f32]
    where
        M: Model<Input = f32>,
    {
        expect(self.try_loss_input_gradient(model, x, y))
    }

    /// [`loss_input_gradient`](Self::loss_input_gradient), or a [`BatchError`] where it
    /// panics.
    pub fn try_loss_input_gradient<X: ?Sized + Inputs<f32>, Y: ?Sized + Targets<M::Loss>>(
        &mut self,
        model: &M,
        x: &X,
        y: &Y,
    ) -> Result<&[f32], BatchError>
    where
        M: Model<Input = f32>,
    {
        let (y, lengths, x) = (y.as_targets(), x.lengths(), x.values());
        let batch = batch::labelled::<M>(x, lengths, y, B)?;
        self.forward_eval(model, x, lengths, batch);
        self.loss_gradient(y, batch);
        Ok(self.input_backward(model, x, lengths, batch))
    }

    /// Mean loss and accuracy over any number of samples, `B` at a time (inference mode);
    /// accuracy is over what the loss scores ([`Loss::scored`]: samples, or the positions of
    /// a sequence loss, less the targets it ignores).
    ///
    /// # Panics
    /// As [`run`](Self::run), but for any number of samples, counted from the first of `x`;
    /// [`try_evaluate`](Self::try_evaluate) returns the error.
    #[track_caller]
    pub fn evaluate<X: ?Sized + Inputs<M::Input>, Y: ?Sized + Targets<M::Loss>>(
        &mut self,
        model: &M,
        x: &X,
        y: &Y,
    ) -> Evaluation {
        expect(self.try_evaluate(model, x, y))
    }

    /// [`evaluate`](Self::evaluate), or a [`BatchError`] where it panics; a sample's place
    /// in it counts from the first of `x`.
    pub fn try_evaluate<X: ?Sized + Inputs<M::Input>, Y: ?Sized + Targets<M::Loss>>(
        &mut self,
        model: &M,
        x: &X,
        y: &Y,
    ) -> Result<Evaluation, BatchError> {
        let (y, lengths, x) = (y.as_targets(), x.lengths(), x.values());
        batch::labelled::<M>(x, lengths, y, usize::MAX)?;
        let per = <M::Loss as Loss>::targets_per_sample(M::OUT);
        let (mut loss, mut weight) = (Accumulator::ZERO, Accumulator::ZERO);
        let (mut correct, mut scored) = (0usize, 0usize);
        let mut has_accuracy = true;
        for (c, (xs, ys)) in x.chunks(B * M::IN).zip(y.chunks(B * per)).enumerate() {
            let batch = xs.len() / M::IN;
            let out = self.predict_of(model, xs, lengths.from(c * B), batch);
            let w = batch_weight(ys, batch) as Wide;
            loss.add(widen(<M::Loss as Loss>::loss(out, ys, M::OUT)) * w);
            weight.add(w);
            match <M::Loss as Loss>::correct(out, ys, M::OUT) {
                Some(c) => correct += c,
                None => has_accuracy = false,
            }
            scored += <M::Loss as Loss>::scored(ys, M::OUT);
        }
        let weight = weight.total();
        let scored = scored.max(1) as Wide;
        Ok(Evaluation {
            loss: if weight > 0.0 {
                narrow(loss.total() / weight)
            } else {
                0.0
            },
            accuracy: has_accuracy.then(|| narrow(correct as Wide / scored)),
        })
    }

    /// Copies the model's running statistics aside (into the buffer of inference's copy),
    /// for [`update_or_skip`] to put back.
    pub(crate) fn keep_state(&mut self, model: &M) {
        self.bufs.state.copy_from_slice(model.state());
    }

    /// The forward pass in training mode over the model's own state, and the loss and its
    /// gradient, for a checked batch of `batch` samples; returns the loss.
    fn forward_loss(
        &mut self,
        model: &mut M,
        x: &[M::Input],
        lengths: Lengths<'_>,
        y: &[Target<M>],
        batch: usize,
    ) -> f32 {
        let (params, state) = model.split_mut();
        self.forward(params, Some(state), x, lengths, batch, Mode::Train);
        self.loss_gradient(y, batch)
    }

    /// The loss of a checked batch of `batch` samples and its gradients, without an update;
    /// each layer's gradient is also handed to `each`, if given, once it is whole.
    fn gradients_of(
        &mut self,
        model: &mut M,
        x: &[M::Input],
        lengths: Lengths<'_>,
        y: &[Target<M>],
        batch: usize,
        each: Option<EachLayer<'_>>,
    ) -> f32
    where
        U: AllGradientsFirst,
    {
        let loss = self.forward_loss(model, x, lengths, y, batch);
        let to = match each {
            Some(each) => Gradients::Share(model.params(), each),
            None => Gradients::Store(model.params()),
        };
        self.backward(to, x, lengths, batch, false, Mode::Train);
        loss
    }

    /// The backward pass of [`run`](Self::run) after its forward pass over `batch` samples,
    /// and the optimizer's update: layer by layer during the backward pass in a fused mode,
    /// after it otherwise.
    fn backward_and_update(
        &mut self,
        model: &mut M,
        x: &[M::Input],
        lengths: Lengths<'_>,
        batch: usize,
    ) {
        if U::FUSED {
            let plan = self.optimizer.plan();
            let to = Gradients::Apply(model.params_mut(), &plan);
            self.backward(to, x, lengths, batch, false, Mode::Train);
            self.optimizer.finish(&plan);
        } else {
            let before = parallel::splits();
            self.backward(
                Gradients::Store(model.params()),
                x,
                lengths,
                batch,
                false,
                Mode::Train,
            );
            self.optimizer
                .set_gradients_spread(parallel::splits() != before);
            optimizer_step::<M, R, U, S>(&mut self.optimizer, model, &self.bufs.grads);
        }
    }

    /// The model's output for a checked batch of `batch` samples (inference mode).
    fn predict_of(
        &mut self,
        model: &M,
        x: &[M::Input],
        lengths: Lengths<'_>,
        batch: usize,
    ) -> &[f32] {
        self.forward_eval(model, x, lengths, batch);
        self.output(batch)
    }

    /// The forward pass in inference mode over a copy of the model's state.
    fn forward_eval(&mut self, model: &M, x: &[M::Input], lengths: Lengths<'_>, batch: usize) {
        self.bufs.state.copy_from_slice(model.state());
        self.forward(model.params(), None, x, lengths, batch, Mode::Eval);
    }

    /// d sum(output) / d output, all ones, at the output's place of the node gradients.
    fn seed_output_gradient(&mut self, batch: usize) {
        let g = M::OUTPUT_GRAD_OFFSET * batch;
        self.bufs.node_grads[g..g + M::OUT * batch].fill(1.0);
    }

    /// The forward pass over a checked batch of `batch` samples in `mode`; `state` is the
    /// model's own in training, the copy otherwise.
    fn forward(
        &mut self,
        params: &[f32],
        state: Option<&mut [f32]>,
        x: &[M::Input],
        lengths: Lengths<'_>,
        batch: usize,
        mode: Mode,
    ) {
        let mut rng = self.stream();
        let first = self.first_sample;
        let b = &mut self.bufs;
        let mut ctx = context(&mut b.gemm, &mut b.scratch, &mut rng, first, mode, lengths);
        let state = match state {
            Some(s) => s,
            None => &mut b.state,
        };
        M::forward(&mut ctx, params, state, x, &mut b.acts, batch);
    }

    /// The loss of the last forward pass over `batch` samples, and its gradient at the
    /// output's place of the node gradients.
    fn loss_gradient(&mut self, y: &[Target<M>], batch: usize) -> f32 {
        let (o, g, n) = (
            M::OUTPUT_OFFSET * batch,
            M::OUTPUT_GRAD_OFFSET * batch,
            M::OUT * batch,
        );
        <M::Loss as Loss>::loss_and_grad(
            &self.bufs.acts[o..o + n],
            y,
            &mut self.bufs.node_grads[g..g + n],
            M::OUT,
        )
    }

    /// The backward pass from the node gradients of the last forward pass, sending the
    /// parameter gradients `to` where the step says, and the input gradient into `dx` when
    /// `with_dx`.
    fn backward(
        &mut self,
        to: Gradients<'_, R>,
        x: &[M::Input],
        lengths: Lengths<'_>,
        batch: usize,
        with_dx: bool,
        mode: Mode,
    ) {
        let mut rng = self.stream();
        let first = self.first_sample;
        let Buffers {
            grads,
            acts,
            node_grads,
            dx,
            scratch,
            gemm,
            ..
        } = &mut self.bufs;
        let mut ctx = context(gemm, scratch, &mut rng, first, mode, lengths);
        let dx = if with_dx {
            Grad::Set(&mut dx[..M::IN * batch])
        } else {
            Grad::Skip
        };
        let (mut store, mut share, mut discard, mut apply);
        let sink: &mut dyn GradSink = match to {
            Gradients::Store(params) => {
                store = Store { params, grads };
                &mut store
            }
            Gradients::Share(params, each) => {
                share = Share {
                    store: Store { params, grads },
                    each,
                };
                &mut share
            }
            Gradients::Discard(params) => {
                discard = Discard { params, grads };
                &mut discard
            }
            Gradients::Apply(params, plan) => {
                apply = Apply {
                    params,
                    grads,
                    optimizer: &mut self.optimizer,
                    plan,
                    splits: parallel::splits(),
                };
                &mut apply
            }
        };
        M::backward(&mut ctx, sink, x, acts, node_grads, dx, batch);
    }

    /// The backward pass of an input gradient (inference mode, parameter gradients let go);
    /// returns d / d x.
    fn input_backward(
        &mut self,
        model: &M,
        x: &[M::Input],
        lengths: Lengths<'_>,
        batch: usize,
    ) -> &[f32] {
        let to = Gradients::Discard(model.params());
        self.backward(to, x, lengths, batch, true, Mode::Eval);
        &self.bufs.dx[..M::IN * batch]
    }

    /// The random stream of the current step (dropout masks).
    fn stream(&self) -> Rng {
        Rng::with_stream(self.seed, self.optimizer.iterations())
    }
}

/// Ends a step that may be skipped: `optimizer`'s update of `model` from `grads` when
/// `loss` and every gradient are finite; otherwise only the model's running statistics go
/// back to `kept` (from [`Step::keep_state`]), and the optimizer stays as it was.
pub(crate) fn update_or_skip<M: Model, R: Rule, U: UpdateMode, S: Storage>(
    optimizer: &mut Optimizer<R, U, S>,
    kept: &[f32],
    model: &mut M,
    loss: f32,
    grads: &[f32],
) -> StepOutcome {
    let skipped = !(loss.is_finite() && grads.iter().all(|g| g.is_finite()));
    if skipped {
        model.split_mut().1.copy_from_slice(kept);
    } else {
        optimizer_step(optimizer, model, grads);
    }
    StepOutcome { loss, skipped }
}

/// `optimizer`'s step over the trainable tensors of `model` from their gradients `grads`.
pub(crate) fn optimizer_step<M: Model, R: Rule, U: UpdateMode, S: Storage>(
    optimizer: &mut Optimizer<R, U, S>,
    model: &mut M,
    grads: &[f32],
) {
    if M::TRAINABLE == M::PARAMS {
        optimizer.step(model.params_mut(), grads);
    } else {
        optimizer.step_runs(model.params_mut(), grads, trainable_runs(M::TENSORS));
    }
}

/// The layer context of one pass over a step's workspace.
fn context<'b>(
    gemm: &'b mut [f32],
    scratch: &'b mut [f32],
    rng: &'b mut Rng,
    first_sample: usize,
    mode: Mode,
    lengths: Lengths<'b>,
) -> Ctx<'b> {
    Ctx {
        gemm,
        scratch,
        rng,
        first_sample,
        mode,
        lengths,
    }
}
