//! What the train step's methods take as targets: anything that is a run of a loss's
//! [`Target`](Loss::Target) values in memory, so that targets of the wrong type are an error
//! that names the loss and the type it takes.

use super::Loss;

/// The targets of a batch for loss `L`: a slice, an array or (feature `alloc`) a `Vec` of
/// `L::Target`, read as a slice without a copy. `V` is `L::Target`, a parameter only so that
/// targets of another type are an error that names it.
#[diagnostic::on_unimplemented(
    message = "`{L}` takes `{V}` targets: pass `&[{V}]`, not `&{Self}`",
    label = "expected a slice, an array or a `Vec` of `{V}`",
    note = "`u32` targets are class indices: one per sample (`SoftmaxCrossEntropy`), or one per position (`SequenceCrossEntropy<C>`)",
    note = "`f32` targets are values: one per output (`Mse`, `Mae`, `Huber`, `BinaryCrossEntropyWithLogits` and the losses of `fusegraph::loss!`)"
)]
pub trait Targets<L: Loss, V = <L as Loss>::Target> {
    /// The targets as a slice.
    fn as_targets(&self) -> &[V];
}

#[diagnostic::do_not_recommend]
impl<L: Loss<Target = V>, V> Targets<L, V> for [V] {
    fn as_targets(&self) -> &[V] {
        self
    }
}

#[diagnostic::do_not_recommend]
impl<L: Loss<Target = V>, V, const N: usize> Targets<L, V> for [V; N] {
    fn as_targets(&self) -> &[V] {
        self
    }
}

#[cfg(feature = "alloc")]
#[diagnostic::do_not_recommend]
impl<L: Loss<Target = V>, V> Targets<L, V> for alloc::vec::Vec<V> {
    fn as_targets(&self) -> &[V] {
        self
    }
}
