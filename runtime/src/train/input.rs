//! What a model reads: `f32` features or `u32` token ids.

use crate::layers::Layer;

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for u32 {}
}

/// The element type of a model's input, chosen with `#[fusegraph::model(input = u32)]`
/// (`f32`, the default, otherwise): `f32` features, or `u32` token ids for a model whose first
/// layers read ids ([`TokenLayer`]).
///
/// Layers read `f32`. A token model keeps one `f32` per id beside its activations
/// ([`CARRIED`](Self::CARRIED)), written at the start of every forward pass: ids below 2^24
/// are exact there, and a [`TokenLayer`]'s vocabulary is at most 2^24, so an id it cannot hold
/// can never alias one it can.
#[diagnostic::on_unimplemented(
    message = "a model reads `f32` features or `u32` token ids, not `{Self}`",
    label = "write `input = f32` or `input = u32`"
)]
pub trait InputValue:
    sealed::Sealed + Copy + Default + Send + Sync + PartialEq + core::fmt::Debug + 'static
{
    /// `f32` values the model keeps per input value to hand its layers: 0 for `f32` (they
    /// read the input itself), 1 for token ids.
    const CARRIED: usize;
    /// The input as `f32`: `x` itself, or its ids written into `carrier` (`x.len()` values).
    fn to_f32<'a>(x: &'a [Self], carrier: &'a mut [f32]) -> &'a [f32];
    /// The input as `f32` again, in the backward pass: `x`, or what
    /// [`to_f32`](Self::to_f32) wrote into `carrier`.
    fn as_f32<'a>(x: &'a [Self], carrier: &'a [f32]) -> &'a [f32];
    /// The value as a token id (`None` for a feature).
    fn token(self) -> Option<u32>;
}

impl InputValue for f32 {
    const CARRIED: usize = 0;
    fn to_f32<'a>(x: &'a [f32], _carrier: &'a mut [f32]) -> &'a [f32] {
        x
    }
    fn as_f32<'a>(x: &'a [f32], _carrier: &'a [f32]) -> &'a [f32] {
        x
    }
    fn token(self) -> Option<u32> {
        None
    }
}

impl InputValue for u32 {
    const CARRIED: usize = 1;
    fn to_f32<'a>(x: &'a [u32], carrier: &'a mut [f32]) -> &'a [f32] {
        let carrier = &mut carrier[..x.len()];
        for (c, &id) in carrier.iter_mut().zip(x) {
            // Ids of 2^24 and more round to values that are still at least 2^24, which no
            // vocabulary holds.
            *c = id as f32;
        }
        carrier
    }
    fn as_f32<'a>(x: &'a [u32], carrier: &'a [f32]) -> &'a [f32] {
        &carrier[..x.len()]
    }
    fn token(self) -> Option<u32> {
        Some(self)
    }
}

/// The largest vocabulary a [`TokenLayer`] may have: ids below it are exact as `f32`.
pub const MAX_VOCAB: usize = 1 << 24;

/// A layer that reads token ids (carried as exact `f32` values), such as
/// [`Embedding`](crate::layers::Embedding): the only kind of layer a model with
/// `input = u32` may feed its input to.
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not read token ids",
    label = "a model with `input = u32` feeds its input to an `Embedding`",
    note = "read the ids with `Embedding<VOCAB, DIM, SEQ>` first, or declare `input = f32`"
)]
pub trait TokenLayer: Layer {
    /// Ids the layer accepts: `0..VOCAB`; at most [`MAX_VOCAB`].
    const VOCAB: usize;
}
