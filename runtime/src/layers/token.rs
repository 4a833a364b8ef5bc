//! Layers that read token ids: [`TokenLayer`], the only kind of layer a model declared with
//! `input = u32` feeds its input to, and the words of an id outside a vocabulary.

use super::{Backward, Ctx, Forward, Layer};
use core::fmt;

/// A layer that reads token ids, such as [`Embedding`](super::Embedding): the only kind of
/// layer a model with `input = u32` may feed its input to. The ids go from the model's input
/// to the layer as they are, `u32`, through [`Forward<u32>`](Forward).
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not read token ids",
    label = "a model with `input = u32` feeds its input to an `Embedding`",
    note = "read the ids with `Embedding<VOCAB, DIM, SEQ>` first, or declare `input = f32`"
)]
pub trait TokenLayer: Layer {
    /// Ids the layer accepts: `0..VOCAB`, any vocabulary a `u32` id addresses (at most 2^32).
    const VOCAB: usize;
    /// [`Layer::forward`] over `io.batch` samples of [`IN`](Layer::IN) ids each.
    fn forward_ids(ctx: &mut Ctx<'_>, io: Forward<'_, u32>);
    /// [`Layer::backward`] over the ids `forward_ids` read. Ids have no gradient: `io.dx`, if
    /// asked for, gets zeros.
    fn backward_ids(ctx: &mut Ctx<'_>, io: Backward<'_, u32>);
}

/// A token id outside a vocabulary, where it was in its batch: the words of a layer's panic
/// and of a train step's error for it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OutsideVocabulary<I> {
    /// The sample, counting from 0.
    pub sample: usize,
    /// The id's position in the sample.
    pub position: usize,
    /// The id, as given.
    pub id: I,
    /// The ids of the vocabulary: `0..vocab`.
    pub vocab: usize,
}

impl<I: fmt::Display> fmt::Display for OutsideVocabulary<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let OutsideVocabulary {
            sample,
            position,
            vocab,
            ..
        } = *self;
        write!(
            f,
            "sample {sample}, position {position}: token id {} is outside the vocabulary of \
             {vocab} ids (0..{vocab})",
            self.id
        )
    }
}
