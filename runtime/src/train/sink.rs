//! Where the backward pass puts each layer's parameter gradient: the one generated backward
//! pass hands every layer's gradient to a [`GradSink`] that the step chooses. It stores the
//! gradient in the full gradient buffer ([`Store`]), also hands each layer's part on as soon as
//! it is whole ([`Share`], for a data-parallel step's exchange), updates the layer at once
//! ([`Apply`]), or lets it go ([`Discard`], for input gradients).

use super::tensors::{trainable_runs, NamedTensor};
use crate::kernels::parallel::splits;
use crate::optim::{Optimizer, Plan, Rule, Storage, UpdateMode};
use core::ops::Range;

/// Where one layer's tensors lie, which the backward pass hands to its [`GradSink`].
#[derive(Clone, Debug)]
pub struct LayerAt {
    /// The layer's range of the parameter buffer.
    pub params: Range<usize>,
    /// The range of the layer's trainable tensors in the buffers of the trainable tensors
    /// (gradients, optimizer slots): `params` again when none of the model's tensors is frozen.
    pub grads: Range<usize>,
    /// The layer's tensors, in the model's table, when some tensor of the model is frozen
    /// (empty otherwise: the layer is then one run).
    pub tensors: &'static [NamedTensor],
}

/// Where the backward pass of a model puts each layer's parameter gradient. Generated code
/// calls [`layer`](Self::layer) before a layer's backward call and [`done`](Self::done) after
/// it, for every layer it calls, with where the layer's tensors lie.
pub trait GradSink {
    /// The parameters of the layer at `at` (which its backward reads) and the buffer its
    /// backward writes the gradient of its trainable tensors into (`at.grads.len()` values).
    fn layer(&mut self, at: &LayerAt) -> (&[f32], &mut [f32]);
    /// The layer at `at` has its whole gradient, and has already taken the gradient for the
    /// layer below from its parameters.
    fn done(&mut self, at: &LayerAt);
}

/// Stores each layer's gradient at its place in the full gradient buffer.
pub(crate) struct Store<'a> {
    /// The model's parameters.
    pub(crate) params: &'a [f32],
    /// The full gradient buffer, as long as the trainable parameters.
    pub(crate) grads: &'a mut [f32],
}

impl GradSink for Store<'_> {
    fn layer(&mut self, at: &LayerAt) -> (&[f32], &mut [f32]) {
        (
            &self.params[at.params.clone()],
            &mut self.grads[at.grads.clone()],
        )
    }
    fn done(&mut self, _: &LayerAt) {}
}

/// What gets each layer's gradient once it is whole: its range of the full gradient buffer
/// and its values.
pub(crate) type EachLayer<'a> = &'a mut dyn FnMut(Range<usize>, &[f32]);

/// Stores each layer's gradient as [`Store`] does, and hands it on as soon as it is whole:
/// `each` gets the layer's range of the full gradient buffer and its values.
pub(crate) struct Share<'a> {
    /// Where the gradients are stored.
    pub(crate) store: Store<'a>,
    /// Called with each layer's range and gradient, the last layer first.
    pub(crate) each: EachLayer<'a>,
}

impl GradSink for Share<'_> {
    fn layer(&mut self, at: &LayerAt) -> (&[f32], &mut [f32]) {
        self.store.layer(at)
    }
    fn done(&mut self, at: &LayerAt) {
        (self.each)(at.grads.clone(), &self.store.grads[at.grads.clone()]);
    }
}

/// Lets each layer's gradient go: it is written into a buffer the size of the largest layer
/// and overwritten by the next.
pub(crate) struct Discard<'a> {
    /// The model's parameters.
    pub(crate) params: &'a [f32],
    /// At least as long as the largest layer's trainable parameters.
    pub(crate) grads: &'a mut [f32],
}

impl GradSink for Discard<'_> {
    fn layer(&mut self, at: &LayerAt) -> (&[f32], &mut [f32]) {
        let n = at.grads.len();
        (&self.params[at.params.clone()], &mut self.grads[..n])
    }
    fn done(&mut self, _: &LayerAt) {}
}

/// Updates each layer as soon as its gradient is known, with the step's [`Plan`]: the
/// gradient lives in a buffer the size of the largest layer.
pub(crate) struct Apply<'a, R: Rule, U: UpdateMode, S: Storage> {
    /// The model's parameters, updated layer by layer.
    pub(crate) params: &'a mut [f32],
    /// At least as long as the largest layer's trainable parameters.
    pub(crate) grads: &'a mut [f32],
    /// The optimizer whose state the update reads and writes.
    pub(crate) optimizer: &'a mut Optimizer<R, U, S>,
    /// This step's plan.
    pub(crate) plan: &'a Plan<R>,
    /// This thread's [`splits`] when the last layer's update ran (or the backward pass began).
    pub(crate) splits: u64,
}

impl<R: Rule, U: UpdateMode, S: Storage> GradSink for Apply<'_, R, U, S> {
    fn layer(&mut self, at: &LayerAt) -> (&[f32], &mut [f32]) {
        let n = at.grads.len();
        (&self.params[at.params.clone()], &mut self.grads[..n])
    }
    fn done(&mut self, at: &LayerAt) {
        if at.grads.is_empty() {
            return;
        }
        let splits = splits();
        self.optimizer.set_gradients_spread(splits != self.splits);
        self.splits = splits;
        let n = at.grads.len();
        if at.params.len() == n {
            // Nothing of the layer is frozen: one run, as without frozen tensors.
            let params = &mut self.params[at.params.clone()];
            let grads = &self.grads[..n];
            self.optimizer
                .update(self.plan, at.grads.clone(), params, grads);
            return;
        }
        let first = at.grads.start;
        for (params, grads) in trainable_runs(at.tensors) {
            let local = grads.start - first..grads.end - first;
            let (params, grads_here) = (&mut self.params[params], &self.grads[local]);
            self.optimizer.update(self.plan, grads, params, grads_here);
        }
    }
}
