//! Where the backward pass puts each layer's parameter gradient: the one generated backward
//! pass hands every layer's gradient to a [`GradSink`] that the step chooses. It stores the
//! gradient in the full gradient buffer ([`Store`]), updates the layer at once ([`Apply`]), or
//! lets it go ([`Discard`], for input gradients).

use crate::kernels::parallel::splits;
use crate::optim::{Optimizer, Plan, Rule, Storage, UpdateMode};
use core::ops::Range;

/// Where the backward pass of a model puts each layer's parameter gradient. Generated code
/// calls [`layer`](Self::layer) before a layer's backward call and [`done`](Self::done) after
/// it, for every layer, with the layer's range of the flat parameter buffer.
pub trait GradSink {
    /// The parameters of the layer at `at` (which its backward reads) and the buffer its
    /// backward writes their gradient into (`at.len()` values).
    fn layer(&mut self, at: Range<usize>) -> (&[f32], &mut [f32]);
    /// The layer at `at` has its whole gradient, and has already taken the gradient for the
    /// layer below from its parameters.
    fn done(&mut self, at: Range<usize>);
}

/// Stores each layer's gradient at its place in the full gradient buffer.
pub(crate) struct Store<'a> {
    /// The model's parameters.
    pub(crate) params: &'a [f32],
    /// The full gradient buffer, as long as the parameters.
    pub(crate) grads: &'a mut [f32],
}

impl GradSink for Store<'_> {
    fn layer(&mut self, at: Range<usize>) -> (&[f32], &mut [f32]) {
        (&self.params[at.clone()], &mut self.grads[at])
    }
    fn done(&mut self, _: Range<usize>) {}
}

/// Lets each layer's gradient go: it is written into a buffer the size of the largest layer
/// and overwritten by the next.
pub(crate) struct Discard<'a> {
    /// The model's parameters.
    pub(crate) params: &'a [f32],
    /// At least as long as the largest layer's parameters.
    pub(crate) grads: &'a mut [f32],
}

impl GradSink for Discard<'_> {
    fn layer(&mut self, at: Range<usize>) -> (&[f32], &mut [f32]) {
        let n = at.len();
        (&self.params[at], &mut self.grads[..n])
    }
    fn done(&mut self, _: Range<usize>) {}
}

/// Updates each layer as soon as its gradient is known, with the step's [`Plan`]: the
/// gradient lives in a buffer the size of the largest layer.
pub(crate) struct Apply<'a, R: Rule, U: UpdateMode, S: Storage> {
    /// The model's parameters, updated layer by layer.
    pub(crate) params: &'a mut [f32],
    /// At least as long as the largest layer's parameters.
    pub(crate) grads: &'a mut [f32],
    /// The optimizer whose state the update reads and writes.
    pub(crate) optimizer: &'a mut Optimizer<R, U, S>,
    /// This step's plan.
    pub(crate) plan: &'a Plan<R>,
    /// This thread's [`splits`] when the last layer's update ran (or the backward pass began).
    pub(crate) splits: u64,
}

impl<R: Rule, U: UpdateMode, S: Storage> GradSink for Apply<'_, R, U, S> {
    fn layer(&mut self, at: Range<usize>) -> (&[f32], &mut [f32]) {
        let n = at.len();
        (&self.params[at], &mut self.grads[..n])
    }
    fn done(&mut self, at: Range<usize>) {
        if !at.is_empty() {
            let n = at.len();
            let params = &mut self.params[at.clone()];
            let splits = splits();
            self.optimizer.set_gradients_spread(splits != self.splits);
            self.splits = splits;
            self.optimizer
                .update(self.plan, at, params, &self.grads[..n]);
        }
    }
}
