//! What a model reads: `f32` features or `u32` token ids ([`InputValue`]), as a batch of them
//! ([`Inputs`]) whose sequences may be padded ([`Padded`]).

use crate::layers::Lengths;

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for u32 {}
}

/// The element type of a model's input, chosen with `#[fusegraph::model(input = u32)]`
/// (`f32`, the default, otherwise): `f32` features, or `u32` token ids for a model whose first
/// layers read ids ([`TokenLayer`](crate::layers::TokenLayer)). The model hands its input to
/// those layers as it is: ids stay `u32` from the step's methods to the table row they name.
#[diagnostic::on_unimplemented(
    message = "a model reads `f32` features or `u32` token ids, not `{Self}`",
    label = "write `input = f32` or `input = u32`"
)]
pub trait InputValue:
    sealed::Sealed + Copy + Default + Send + Sync + PartialEq + core::fmt::Debug + 'static
{
    /// The value read as a token id: a `u32` as it is, an `f32` if it is a whole number from
    /// 0 to `u32::MAX` (an id carried as `f32`); otherwise the value as given, which names no
    /// id.
    ///
    /// ```
    /// use fusegraph_runtime::train::InputValue;
    /// assert_eq!((7u32.id(), 7.0f32.id(), (-0.0f32).id()), (Ok(7), Ok(7), Ok(0)));
    /// assert_eq!((2.5f32.id(), (-1.0f32).id(), 4294967296.0f32.id()), (Err(2.5), Err(-1.0), Err(4294967296.0)));
    /// assert!(f32::NAN.id().is_err());
    /// ```
    fn id(self) -> Result<u32, f32>;

    /// The value's 32 bits, for hashes that compare data bit for bit.
    fn bits(self) -> u32;
}

impl InputValue for f32 {
    fn id(self) -> Result<u32, f32> {
        // `as` saturates (and takes NaN to 0): the round trip holds for whole numbers in range.
        let id = self as u32;
        if self < 4_294_967_296.0 && id as f32 == self {
            Ok(id)
        } else {
            Err(self)
        }
    }

    fn bits(self) -> u32 {
        self.to_bits()
    }
}

impl InputValue for u32 {
    fn id(self) -> Result<u32, f32> {
        Ok(self)
    }

    fn bits(self) -> u32 {
        self
    }
}

/// The input of a batch for a model reading `V` values: a slice, an array or (feature
/// `alloc`) a `Vec` of them, every step of every sample real; or [`Padded`], the same values
/// with the real length of each sample.
#[diagnostic::on_unimplemented(
    message = "the model reads `{V}` values: pass `&[{V}]` or `&Padded::new(&x, &lengths)`, not `&{Self}`",
    label = "expected a slice, an array or a `Vec` of `{V}`, or `Padded`"
)]
pub trait Inputs<V> {
    /// The values, sample after sample.
    fn values(&self) -> &[V];
    /// The real steps of each sample ([`Lengths::FULL`] when every step is).
    fn lengths(&self) -> Lengths<'_>;
}

#[diagnostic::do_not_recommend]
impl<V> Inputs<V> for [V] {
    fn values(&self) -> &[V] {
        self
    }
    fn lengths(&self) -> Lengths<'_> {
        Lengths::FULL
    }
}

#[diagnostic::do_not_recommend]
impl<V, const N: usize> Inputs<V> for [V; N] {
    fn values(&self) -> &[V] {
        self
    }
    fn lengths(&self) -> Lengths<'_> {
        Lengths::FULL
    }
}

#[cfg(feature = "alloc")]
#[diagnostic::do_not_recommend]
impl<V> Inputs<V> for alloc::vec::Vec<V> {
    fn values(&self) -> &[V] {
        self
    }
    fn lengths(&self) -> Lengths<'_> {
        Lengths::FULL
    }
}

/// A batch of sequences padded at the end to the model's length, with the real length of
/// each: PyTorch's `pack_padded_sequence(x, lengths, batch_first=True)`. The layers that
/// honour lengths ([`Layer::STEPS`](crate::layers::Layer::STEPS)) read sample `b`'s steps
/// `0..lengths[b]` only; what the padding holds changes nothing they compute. A train step
/// checks that there is one length per sample, each from 1 to the model's
/// [`STEPS`](super::Model::STEPS).
///
/// ```
/// use fusegraph_runtime::train::{Inputs, Padded};
/// // Two samples of 3 steps of 2 features; the second is 1 step long.
/// let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 0.0, 0.0, 0.0, 0.0];
/// let batch = Padded::new(&x, &[3, 1]);
/// assert_eq!(batch.values().len(), 12);
/// assert_eq!(batch.lengths().of(1, 3), 1);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Padded<'a, V> {
    values: &'a [V],
    lengths: Lengths<'a>,
}

impl<'a, V> Padded<'a, V> {
    /// The samples of `values`, sample `b` real for its first `lengths[b]` steps.
    pub const fn new(values: &'a [V], lengths: &'a [u32]) -> Self {
        Padded::with(values, Lengths::new(lengths))
    }

    /// The samples of `values` with `lengths`, which may be [`Lengths::FULL`]: the batch of
    /// code that handles data with or without lengths alike, the same as `values` alone when
    /// there are none.
    pub const fn with(values: &'a [V], lengths: Lengths<'a>) -> Self {
        Padded { values, lengths }
    }

    /// Samples `at` (of `per_sample` values each) with their lengths: a part of the batch.
    ///
    /// ```
    /// use fusegraph_runtime::train::{Inputs, Padded};
    /// let x = [1u32, 2, 3, 4, 5, 6];
    /// let part = Padded::new(&x, &[2, 1, 2]).samples(1..3, 2);
    /// assert_eq!((part.values(), part.lengths().get()), (&[3, 4, 5, 6][..], Some(&[1, 2][..])));
    /// ```
    ///
    /// # Panics
    /// If the batch has no such samples.
    pub fn samples(&self, at: core::ops::Range<usize>, per_sample: usize) -> Self {
        let values = &self.values[at.start * per_sample..at.end * per_sample];
        let lengths = Lengths::given(self.lengths.get().map(|lengths| &lengths[at]));
        Padded { values, lengths }
    }
}

/// The length of each sample of `steps` token ids padded at the end with `pad` (Keras'
/// `mask_zero=True` for `pad = 0`), written to `lengths` (one a sample): the steps up to and
/// including its last id that is not `pad`, and at least 1 (a sample of padding only is one
/// step long, so that no sample is empty).
///
/// ```
/// use fusegraph_runtime::train::padding_lengths;
/// let ids = [5, 3, 0, 0, 7, 0, 2, 0, 0, 0, 0, 0];
/// let mut lengths = [0; 3];
/// padding_lengths(&ids, 4, 0, &mut lengths);
/// assert_eq!(lengths, [2, 3, 1]);
/// ```
///
/// # Panics
/// If `ids` is not `lengths.len()` samples of `steps` ids.
pub fn padding_lengths(ids: &[u32], steps: usize, pad: u32, lengths: &mut [u32]) {
    assert_eq!(
        ids.len(),
        steps * lengths.len(),
        "{} ids are not {} samples of {steps}",
        ids.len(),
        lengths.len()
    );
    for (sample, length) in ids.chunks_exact(steps).zip(lengths.iter_mut()) {
        let real = sample
            .iter()
            .rposition(|&id| id != pad)
            .map_or(1, |t| t + 1);
        *length = real as u32;
    }
}

impl<V> Inputs<V> for Padded<'_, V> {
    fn values(&self) -> &[V] {
        self.values
    }
    fn lengths(&self) -> Lengths<'_> {
        self.lengths
    }
}
