//! [`Lengths`]: how many steps of each sample of a call are real, the rest being padding at
//! the end (right padding), as PyTorch's `pack_padded_sequence(x, lengths, batch_first=True)`
//! and `key_padding_mask` see a batch.

/// The valid time steps of each sample of one forward or backward call ([`Ctx::lengths`]):
/// sample `b`'s steps `0..lengths[b]` are real, the steps after them padding. The layers that
/// honour it ([`Layer::STEPS`] is their sequence length) never let a padded step change what
/// a real one computes: a [`Gru`] or [`Lstm`] keeps its state over them (and outputs 0
/// there), [`CausalSelfAttention`] masks padded keys, [`MeanOverTime`] averages the real
/// steps only. [`Lengths::FULL`] (no lengths) is every step real, with the bits of a call
/// without lengths.
///
/// Indices are the call's samples, `0..batch`; a length above a layer's steps counts as all
/// of them.
///
/// ```
/// use fusegraph_runtime::layers::Lengths;
/// let lengths = Lengths::new(&[3, 1, 5]);
/// assert_eq!((lengths.of(0, 4), lengths.of(1, 4), lengths.of(2, 4)), (3, 1, 4));
/// assert_eq!(Lengths::FULL.of(2, 4), 4);
/// assert_eq!(lengths.from(1).of(0, 4), 1);
/// ```
///
/// [`Ctx::lengths`]: super::Ctx::lengths
/// [`Layer::STEPS`]: super::Layer::STEPS
/// [`Gru`]: super::Gru
/// [`Lstm`]: super::Lstm
/// [`CausalSelfAttention`]: super::CausalSelfAttention
/// [`MeanOverTime`]: super::MeanOverTime
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lengths<'a>(Option<&'a [u32]>);

impl<'a> Lengths<'a> {
    /// Every step of every sample is real.
    pub const FULL: Lengths<'static> = Lengths(None);

    /// The lengths of the call's samples, one each.
    pub const fn new(lengths: &'a [u32]) -> Self {
        Lengths(Some(lengths))
    }

    /// The lengths given, or `None` for [`FULL`](Self::FULL).
    pub const fn get(self) -> Option<&'a [u32]> {
        self.0
    }

    /// Whether every step is real: no lengths were given.
    pub const fn is_full(self) -> bool {
        self.0.is_none()
    }

    /// The real steps of sample `sample` of a sequence of `steps`: its length, at most
    /// `steps`; `steps` for [`FULL`](Self::FULL).
    ///
    /// # Panics
    /// If lengths were given and `sample` has none.
    #[inline]
    pub fn of(self, sample: usize, steps: usize) -> usize {
        match self.0 {
            None => steps,
            Some(lengths) => (lengths[sample] as usize).min(steps),
        }
    }

    /// Whether step `t` of sample `sample` is real (`t` below its length).
    #[inline]
    pub fn is_real(self, sample: usize, t: usize) -> bool {
        match self.0 {
            None => true,
            Some(lengths) => t < lengths[sample] as usize,
        }
    }

    /// The lengths of the samples from `first` on, as a run of them starting there sees them
    /// (its sample 0 is this call's `first`).
    pub fn from(self, first: usize) -> Lengths<'a> {
        Lengths(self.0.map(|l| &l[first..]))
    }
}
