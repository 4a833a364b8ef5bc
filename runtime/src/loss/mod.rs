//! Losses and their gradients, reduced over the batch: the built-ins by a mean (as Keras and
//! PyTorch), losses written with `loss!` by a mean or a sum ([`Reduce`]).
//!
//! The built-ins are not written with `loss!`, which computes each element in `f32` and sums by
//! lane: they compute in [`Wide`] (`f64`, or `f32` with the feature `f32-accumulators`: see
//! [`accumulate`](crate::accumulate)) and sum in order, so none would keep its bits
//! (tests/loss.rs finds the rewritten ones within 1e-6), and `SoftmaxCrossEntropy` is not
//! element-wise (its exponentials are `f32`, on the dispatched lanes, as PyTorch's; its sums
//! and logarithm [`Wide`]).
//!
//! A train step takes a batch's targets as [`Targets`] of the model's loss, so that targets of
//! the wrong type are an error that names the loss and the type it takes.

pub(crate) mod lanes;
mod targets;

pub use targets::Targets;

use crate::accumulate::{narrow, widen, Accumulator, Wide};
use crate::lane::{self, Lane, OnLanes};
use lanes::LaneSum;

/// A target of a loss: a class label or a real value.
pub trait TargetValue: Copy {
    /// The target as a value to compare an output with (`None` for class labels).
    fn value(self) -> Option<f32>;
    /// The target as a class label (`None` for real values).
    fn class(self) -> Option<u32>;
}

impl TargetValue for f32 {
    fn value(self) -> Option<f32> {
        Some(self)
    }
    fn class(self) -> Option<u32> {
        None
    }
}

impl TargetValue for u32 {
    fn value(self) -> Option<f32> {
        None
    }
    fn class(self) -> Option<u32> {
        Some(self)
    }
}

/// A loss over a batch of predictions (`batch * n` values) and targets.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a loss",
    label = "not a loss",
    note = "the losses are Mse, Mae, Huber, BinaryCrossEntropyWithLogits, SoftmaxCrossEntropy and SequenceCrossEntropy<C>, and those defined with `fusegraph::loss!`"
)]
pub trait Loss {
    /// One target: a class index (`u32`) or a value (`f32`).
    type Target: TargetValue + Default + Send + Sync + 'static;
    /// Writes what the loss computes, with its options (`SequenceCrossEntropy<40>`): a
    /// checkpoint records it and loads only into a model with the same loss.
    fn describe(out: &mut dyn core::fmt::Write) -> core::fmt::Result;
    /// Targets per sample: `n` for value targets, 1 for class indices.
    fn targets_per_sample(n: usize) -> usize;
    /// The loss, a mean over the batch (and, for element-wise losses, the outputs, as Keras
    /// and PyTorch reduce them; a sum for a `loss!` with `reduce = sum`), and its gradient
    /// with respect to `pred` in `grad`.
    fn loss_and_grad(pred: &[f32], target: &[Self::Target], grad: &mut [f32], n: usize) -> f32;
    /// The loss alone.
    fn loss(pred: &[f32], target: &[Self::Target], n: usize) -> f32;
    /// How many samples are predicted right (arg-max equals the class; for binary targets,
    /// the sign of the logit), for accuracy; `None` where accuracy has no meaning. A loss over
    /// positions counts positions, and a label equal to [`IGNORE`] is never counted
    /// ([`scored`](Self::scored)).
    fn correct(pred: &[f32], target: &[Self::Target], n: usize) -> Option<usize>;
    /// How many predictions [`correct`](Self::correct) scores for `target` (samples of `n`
    /// outputs), the denominator of accuracy: by default the samples; the losses of class
    /// labels count their labels that are not [`IGNORE`] (one per sample for
    /// [`SoftmaxCrossEntropy`], one per position for [`SequenceCrossEntropy`]).
    fn scored(target: &[Self::Target], n: usize) -> usize {
        target.len() / Self::targets_per_sample(n).max(1)
    }
    /// The classes a target names for a sample of `n` outputs (its labels are `0..classes`),
    /// or `None` for a loss of real-valued targets, the default. A train step's checked
    /// methods refuse a label outside them.
    fn classes(n: usize) -> Option<usize> {
        let _ = n;
        None
    }
}

use crate::math;

/// The class label that a loss of class labels ([`SoftmaxCrossEntropy`],
/// [`SequenceCrossEntropy`]) leaves out: PyTorch's `ignore_index=-100`, the target of a padded
/// position. An ignored target gets no loss and a gradient of exactly 0, the mean is over the
/// targets that are not ignored (over the whole batch: PyTorch's
/// `F.cross_entropy(..., ignore_index=-100)`), a batch with nothing to count has a loss of 0
/// (not NaN), and accuracy leaves it out ([`Loss::scored`]).
///
/// ```
/// use fusegraph_runtime::loss::{Loss, SequenceCrossEntropy, IGNORE};
/// type Tagger = SequenceCrossEntropy<2>;
/// // One sample of three positions, the last one padding.
/// let logits = [2.0, 0.0, 0.0, 1.0, 9.0, -9.0];
/// let labels = [0, 1, IGNORE];
/// let mut grad = [f32::NAN; 6];
/// let loss = Tagger::loss_and_grad(&logits, &labels, &mut grad, 6);
/// let nll = |margin: f64| (1.0 + (-margin).exp()).ln();
/// assert!((f64::from(loss) - (nll(2.0) + nll(1.0)) / 2.0).abs() < 1e-6);
/// assert_eq!(grad[4..], [0.0, 0.0]);
/// assert_eq!((Tagger::correct(&logits, &labels, 6), Tagger::scored(&labels, 6)), (Some(2), 2));
/// ```
pub const IGNORE: u32 = u32::MAX;

/// What a batch of `samples` samples with `target` weighs in a mean of batches' mean losses:
/// `samples` times the share of its targets that are not [`IGNORE`]d, so that the mean is
/// over the counted targets of all the batches; `samples` itself (exactly) when nothing is
/// ignored.
pub(crate) fn batch_weight<T: TargetValue>(target: &[T], samples: usize) -> f64 {
    let ignored = target.iter().filter(|t| t.class() == Some(IGNORE)).count();
    if ignored == 0 {
        return samples as f64;
    }
    samples as f64 * (target.len() - ignored) as f64 / target.len() as f64
}

/// Checks that an element-wise loss has one target per prediction and whole samples of `n`.
fn check_lengths(pred: &[f32], target: &[f32], n: usize) {
    assert_eq!(
        pred.len(),
        target.len(),
        "loss: {} predictions for {} targets",
        pred.len(),
        target.len()
    );
    assert!(
        n > 0 && pred.len().is_multiple_of(n) || pred.is_empty(),
        "loss: {} predictions are not samples of {n}",
        pred.len()
    );
}

/// `(pred, target)` pairs of an element-wise loss, in [`Wide`], after [`check_lengths`]; the
/// mean divides by their count (batch times outputs).
fn pairs<'a>(
    pred: &'a [f32],
    target: &'a [f32],
    n: usize,
) -> impl Iterator<Item = (Wide, Wide)> + 'a {
    check_lengths(pred, target, n);
    pred.iter().zip(target).map(|(&p, &t)| (widen(p), widen(t)))
}

/// The sum of `values` in order, in an [`Accumulator`].
fn sum_in_order(values: impl Iterator<Item = Wide>) -> Wide {
    let mut sum = Accumulator::ZERO;
    values.for_each(|v| sum.add(v));
    sum.total()
}

/// `1 / count`, and 0 for an empty batch (whose loss and gradient are 0, not NaN).
fn inv_count(count: usize) -> Wide {
    if count == 0 {
        0.0
    } else {
        1.0 / count as Wide
    }
}

/// Implements [`Loss`] for an element-wise loss from `f(pred, target) -> (loss, d loss / d
/// pred)` in [`Wide`]; the sum runs in order in an [`Accumulator`].
macro_rules! elementwise_loss {
    ($ty:ty, $f:expr) => {
        impl Loss for $ty {
            type Target = f32;
            fn describe(out: &mut dyn core::fmt::Write) -> core::fmt::Result {
                out.write_str(stringify!($ty))
            }
            fn targets_per_sample(n: usize) -> usize {
                n
            }
            fn loss_and_grad(pred: &[f32], target: &[f32], grad: &mut [f32], n: usize) -> f32 {
                assert_eq!(grad.len(), pred.len(), "loss: grad and pred lengths differ");
                let inv = inv_count(pred.len());
                let f: fn(Wide, Wide) -> (Wide, Wide) = $f;
                let mut sum = Accumulator::ZERO;
                for ((p, t), g) in pairs(pred, target, n).zip(grad.iter_mut()) {
                    let (l, d) = f(p, t);
                    sum.add(l);
                    *g = narrow(d * inv);
                }
                narrow(sum.total() * inv)
            }
            fn loss(pred: &[f32], target: &[f32], n: usize) -> f32 {
                let f: fn(Wide, Wide) -> (Wide, Wide) = $f;
                let sum = sum_in_order(pairs(pred, target, n).map(|(p, t)| f(p, t).0));
                narrow(sum * inv_count(pred.len()))
            }
            fn correct(_pred: &[f32], _target: &[f32], _n: usize) -> Option<usize> {
                None
            }
        }
    };
}

/// How a loss written with `loss!` reduces its per-element values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduce {
    /// The mean over the batch and the outputs (the built-ins', Keras' and PyTorch's default).
    Mean,
    /// The sum over the batch and the outputs.
    Sum,
}

/// Mean squared error, `mean((pred - target)²)` over the batch and the outputs (Keras'
/// `MeanSquaredError`, PyTorch's `MSELoss`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mse;

elementwise_loss!(Mse, |p, t| ((p - t) * (p - t), 2.0 * (p - t)));

/// Mean absolute error, `mean(|pred - target|)` (Keras' `MeanAbsoluteError`, PyTorch's
/// `L1Loss`); its gradient at `pred == target` is 0, as both frameworks give it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mae;

elementwise_loss!(Mae, |p, t| (math::abs(p - t), math::sign(p - t)));

/// Huber loss with delta 1 (Keras' `Huber` and PyTorch's `HuberLoss` defaults, where it equals
/// `SmoothL1Loss`): `d²/2` for `|d| <= 1`, `|d| - 1/2` beyond, `d = pred - target`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Huber;

elementwise_loss!(Huber, |p, t| {
    let d = p - t;
    if math::abs(d) <= 1.0 {
        (0.5 * d * d, d)
    } else {
        (math::abs(d) - 0.5, math::sign(d))
    }
});

/// Binary cross-entropy on logits (Keras' `BinaryCrossentropy(from_logits=True)`, PyTorch's
/// `BCEWithLogitsLoss`), each output its own binary problem with a target in `[0, 1]`.
///
/// Computed stably for any logit `z` as `max(z, 0) - z * y + ln(1 + e^-|z|)`; the gradient is
/// `(sigmoid(z) - y) / count`. A sample counts as [correct](Loss::correct) when every output's
/// sign (`z > 0`) agrees with its target (`y >= 0.5`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BinaryCrossEntropyWithLogits;

/// The logistic function, without overflow for either sign.
fn sigmoid_wide(z: Wide) -> Wide {
    if z >= 0.0 {
        1.0 / (1.0 + math::exp(-z))
    } else {
        let e = math::exp(z);
        e / (1.0 + e)
    }
}

impl Loss for BinaryCrossEntropyWithLogits {
    type Target = f32;
    fn describe(out: &mut dyn core::fmt::Write) -> core::fmt::Result {
        out.write_str("BinaryCrossEntropyWithLogits")
    }
    fn targets_per_sample(n: usize) -> usize {
        n
    }
    fn loss_and_grad(pred: &[f32], target: &[f32], grad: &mut [f32], n: usize) -> f32 {
        assert_eq!(grad.len(), pred.len(), "loss: grad and pred lengths differ");
        let inv = inv_count(pred.len());
        let mut sum = Accumulator::ZERO;
        for ((z, y), g) in pairs(pred, target, n).zip(grad.iter_mut()) {
            sum.add(bce(z, y));
            *g = narrow((sigmoid_wide(z) - y) * inv);
        }
        narrow(sum.total() * inv)
    }
    fn loss(pred: &[f32], target: &[f32], n: usize) -> f32 {
        let sum = sum_in_order(pairs(pred, target, n).map(|(z, y)| bce(z, y)));
        narrow(sum * inv_count(pred.len()))
    }
    fn correct(pred: &[f32], target: &[f32], n: usize) -> Option<usize> {
        check_lengths(pred, target, n);
        if n == 0 {
            return Some(0);
        }
        let right = pred
            .chunks_exact(n)
            .zip(target.chunks_exact(n))
            .filter(|(p, t)| p.iter().zip(*t).all(|(&z, &y)| (z > 0.0) == (y >= 0.5)))
            .count();
        Some(right)
    }
}

/// `max(z, 0) - z * y + ln(1 + e^-|z|)`.
fn bce(z: Wide, y: Wide) -> Wide {
    math::max(z, 0.0) - z * y + math::ln_1p(math::exp(-math::abs(z)))
}

/// Softmax cross-entropy on logits with class-index targets (Keras'
/// `SparseCategoricalCrossentropy(from_logits=True)`, PyTorch's `CrossEntropyLoss`): the mean
/// over the batch of `logsumexp(z) - z[class]`, computed with the row's maximum subtracted so
/// any finite logits give a finite loss. The gradient is `(softmax(z) - onehot) / batch`;
/// a sample is [correct](Loss::correct) when the first largest logit is its class. A sample
/// labelled [`IGNORE`] is left out (gradient 0), and `batch` counts the others
/// (`ignore_index=-100`).
///
/// Each `e^(z - max)` is computed in `f32` on the dispatched lanes (the same bits on every lane
/// type), and summed, logged and divided in [`Wide`]. A row's loss is `(max + ln Σ) - z[class]`,
/// so it is known to about an ulp of `Wide` at the largest logit: with `f32` accumulators, a
/// trained row's loss of `1e-4` beside logits near 10 carries about `1e-6` of absolute error
/// (the gradient does not depend on it).
///
/// # Panics
/// If a class index is neither below `n` nor [`IGNORE`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SoftmaxCrossEntropy;

impl SoftmaxCrossEntropy {
    /// The rows of `pred` with their classes, checked: below `n`, or [`IGNORE`].
    fn rows<'a>(
        pred: &'a [f32],
        target: &'a [u32],
        n: usize,
    ) -> impl Iterator<Item = (&'a [f32], u32)> + 'a {
        assert!(
            n > 0 && pred.len() == target.len() * n,
            "loss: {} logits for {} samples of {n} classes",
            pred.len(),
            target.len()
        );
        pred.chunks_exact(n).zip(target).map(move |(row, &class)| {
            assert!(
                class == IGNORE || (class as usize) < n,
                "loss: class {class} of {n}"
            );
            (row, class)
        })
    }

    /// The targets that are not [`IGNORE`]d, which the mean divides by.
    fn counted(target: &[u32]) -> usize {
        target.iter().filter(|&&class| class != IGNORE).count()
    }

    /// `(max, Σ e^(z - max))` of a row: the exponentials in `f32` on the dispatched lanes
    /// (as PyTorch's `log_softmax`), summed in [`Wide`] in the fixed order of [`LaneSum`]. They
    /// are written to `exps` (as long as the row) when it is given, else through a buffer on
    /// the stack, [`CHUNK`] logits at a time (a whole number of lanes, so the sum adds the same
    /// values in the same order either way).
    fn max_and_sum(row: &[f32], mut exps: Option<&mut [f32]>) -> (Wide, Wide) {
        let max = lane::dispatch(RowMax(row));
        let mut buffer = [0.0; CHUNK];
        let mut sum = LaneSum::new();
        for (c, z) in row.chunks(CHUNK).enumerate() {
            let out = match exps.as_deref_mut() {
                Some(exps) => &mut exps[c * CHUNK..c * CHUNK + z.len()],
                None => &mut buffer[..z.len()],
            };
            lane::dispatch(ShiftedExponentials {
                z,
                max,
                out: &mut *out,
            });
            sum.add_slice(out);
        }
        (widen(max), sum.total())
    }

    /// `g` (the row's exponentials) becomes `(softmax - onehot(class)) * inv`.
    fn gradient_row(g: &mut [f32], sum: Wide, class: usize, inv: Wide) {
        for (j, gj) in g.iter_mut().enumerate() {
            let p = widen(*gj) / sum;
            let onehot = if j == class { 1.0 } else { 0.0 };
            *gj = narrow((p - onehot) * inv);
        }
    }
}

/// Logits per dispatch of [`SoftmaxCrossEntropy::max_and_sum`] (a whole number of lanes).
const CHUNK: usize = 64;

/// The largest logit of a row that is not NaN ([`lane::max_of`]).
struct RowMax<'a>(&'a [f32]);

impl OnLanes for RowMax<'_> {
    type Output = f32;
    #[inline(always)]
    fn run<L: Lane>(self) -> f32 {
        lane::max_of::<L>(self.0)
    }
}

/// `out = e^(z - max)`, on any lane type.
struct ShiftedExponentials<'a> {
    z: &'a [f32],
    max: f32,
    out: &'a mut [f32],
}

impl OnLanes for ShiftedExponentials<'_> {
    type Output = ();
    #[inline(always)]
    fn run<L: Lane>(self) {
        let m = L::splat(self.max);
        for (i, n) in lane::pieces::<L>(self.z.len()) {
            let e = (L::load_padded(&self.z[i..i + n]) - m).exp();
            e.store_partial(&mut self.out[i..i + n]);
        }
    }
}

impl Loss for SoftmaxCrossEntropy {
    type Target = u32;
    fn describe(out: &mut dyn core::fmt::Write) -> core::fmt::Result {
        out.write_str("SoftmaxCrossEntropy")
    }
    fn targets_per_sample(_n: usize) -> usize {
        1
    }
    fn classes(n: usize) -> Option<usize> {
        Some(n)
    }
    fn loss_and_grad(pred: &[f32], target: &[u32], grad: &mut [f32], n: usize) -> f32 {
        assert_eq!(grad.len(), pred.len(), "loss: grad and pred lengths differ");
        let inv = inv_count(Self::counted(target));
        let mut total = Accumulator::ZERO;
        for ((row, class), g) in Self::rows(pred, target, n).zip(grad.chunks_exact_mut(n)) {
            if class == IGNORE {
                g.fill(0.0);
                continue;
            }
            let class = class as usize;
            let (max, sum) = Self::max_and_sum(row, Some(&mut *g));
            total.add(max + math::ln(sum) - widen(row[class]));
            Self::gradient_row(g, sum, class, inv);
        }
        narrow(total.total() * inv)
    }
    fn loss(pred: &[f32], target: &[u32], n: usize) -> f32 {
        let total = sum_in_order(
            Self::rows(pred, target, n)
                .filter(|&(_, class)| class != IGNORE)
                .map(|(row, class)| {
                    let (max, sum) = Self::max_and_sum(row, None);
                    max + math::ln(sum) - widen(row[class as usize])
                }),
        );
        narrow(total * inv_count(Self::counted(target)))
    }
    fn correct(pred: &[f32], target: &[u32], n: usize) -> Option<usize> {
        let right = Self::rows(pred, target, n)
            .filter(|(row, class)| {
                let mut best = 0;
                for (j, &z) in row.iter().enumerate() {
                    if z > row[best] {
                        best = j;
                    }
                }
                *class as usize == best
            })
            .count();
        Some(right)
    }
    fn scored(target: &[u32], _n: usize) -> usize {
        Self::counted(target)
    }
}

/// Softmax cross-entropy at every position of a sequence of `C`-way logits, with one class
/// index per position: a sample's `n` outputs are `[T, C]` (`T = n / C` positions, each a row
/// of logits), its targets `[T]`; the loss is the mean over the batch **and** the positions of
/// `logsumexp(z) - z[class]`, PyTorch's
/// `F.cross_entropy(logits.reshape(-1, C), y.reshape(-1))` for a language model or a sequence
/// tagger. A position whose target is [`IGNORE`] (a padded one) is left out: the mean is over
/// the counted positions of the whole batch (`ignore_index=-100`).
///
/// Each position is a sample of [`SoftmaxCrossEntropy`] over `C` classes, with its bits: the
/// gradient is `(softmax(z) - onehot) / (batch * T)`; [`correct`](Loss::correct) counts the
/// positions whose first largest logit is their class, and
/// [`scored`](Loss::scored) counts the positions that are not ignored, so accuracy is per
/// position.
///
/// ```
/// use fusegraph_runtime::loss::{Loss, SequenceCrossEntropy};
/// type Tagger = SequenceCrossEntropy<2>;
/// // One sample of three positions, two classes each.
/// let logits = [2.0, 0.0, 0.0, 1.0, 0.5, 0.5];
/// let labels = [0, 1, 0];
/// assert_eq!(Tagger::targets_per_sample(6), 3);
/// assert_eq!(Tagger::correct(&logits, &labels, 6), Some(3)); // a tie goes to class 0
/// let mut grad = [0.0; 6];
/// let loss = Tagger::loss_and_grad(&logits, &labels, &mut grad, 6);
/// let nll = |margin: f64| (1.0 + (-margin).exp()).ln(); // a row of two logits
/// let expected = (nll(2.0) + nll(1.0) + nll(0.0)) / 3.0;
/// assert!((f64::from(loss) - expected).abs() < 1e-6);
/// // softmax minus one-hot, over the three positions: the tie gives (-1/2, 1/2) / 3.
/// assert!((grad[5] - 0.5 / 3.0).abs() < 1e-7 && (grad[4] + 0.5 / 3.0).abs() < 1e-7);
/// ```
///
/// # Panics
/// If `n` is not a multiple of `C`, or a class index is neither below `C` nor [`IGNORE`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SequenceCrossEntropy<const C: usize>;

impl<const C: usize> SequenceCrossEntropy<C> {
    /// Positions in a sample of `n` outputs.
    fn positions(n: usize) -> usize {
        assert!(
            C > 0 && n.is_multiple_of(C),
            "loss: {n} outputs per sample are not positions of {C} classes"
        );
        n / C
    }
}

impl<const C: usize> Loss for SequenceCrossEntropy<C> {
    type Target = u32;
    fn describe(out: &mut dyn core::fmt::Write) -> core::fmt::Result {
        write!(out, "SequenceCrossEntropy<{C}>")
    }
    fn targets_per_sample(n: usize) -> usize {
        Self::positions(n)
    }
    fn loss_and_grad(pred: &[f32], target: &[u32], grad: &mut [f32], n: usize) -> f32 {
        Self::positions(n);
        SoftmaxCrossEntropy::loss_and_grad(pred, target, grad, C)
    }
    fn loss(pred: &[f32], target: &[u32], n: usize) -> f32 {
        Self::positions(n);
        SoftmaxCrossEntropy::loss(pred, target, C)
    }
    fn correct(pred: &[f32], target: &[u32], n: usize) -> Option<usize> {
        Self::positions(n);
        SoftmaxCrossEntropy::correct(pred, target, C)
    }
    fn scored(target: &[u32], n: usize) -> usize {
        Self::positions(n);
        SoftmaxCrossEntropy::counted(target)
    }
    fn classes(_n: usize) -> Option<usize> {
        Some(C)
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::lanes::{lanes_loss, lanes_loss_and_grad, LaneLoss, LossPass};
    use super::*;
    use crate::lane::Tested;
    use core::marker::PhantomData;
    use std::vec;
    use std::vec::Vec;

    /// A row of logits of many classes, some far below the others.
    fn wide_row(n: usize) -> Vec<f32> {
        (0..n)
            .map(|i| ((i * 37 % 41) as f32 - 20.0) * 0.53 - if i % 9 == 4 { 60.0 } else { 0.0 })
            .collect()
    }

    #[test]
    fn cross_entropy_exponentials_give_the_same_bits_on_every_lane_type() {
        let row = wide_row(150);
        let max = Tested::One.run(RowMax(&row));
        assert_eq!(max, row.iter().fold(f32::MIN, |m, &v| m.max(v)));
        let mut want = vec![0.0; row.len()];
        let z = &row;
        Tested::One.run(ShiftedExponentials {
            z,
            max,
            out: &mut want,
        });
        for lanes in Tested::every() {
            assert_eq!(lanes.run(RowMax(&row)).to_bits(), max.to_bits());
            let mut got = vec![f32::NAN; row.len()];
            lanes.run(ShiftedExponentials {
                z,
                max,
                out: &mut got,
            });
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "{lanes:?}");
        }
    }

    #[test]
    fn the_loss_alone_sums_the_exponentials_of_loss_and_grad() {
        for classes in [3, 64, 65, 150, 300] {
            let pred: Vec<f32> = wide_row(2 * classes);
            let target = [1, (classes - 1) as u32];
            let mut grad = vec![0.0; pred.len()];
            let both = SoftmaxCrossEntropy::loss_and_grad(&pred, &target, &mut grad, classes);
            let alone = SoftmaxCrossEntropy::loss(&pred, &target, classes);
            assert_eq!(both.to_bits(), alone.to_bits(), "{classes} classes");
            let mut exact = 0.0;
            for (row, &class) in pred.chunks(classes).zip(&target) {
                let max = row.iter().fold(f64::MIN, |m, &v| m.max(f64::from(v)));
                let sum: f64 = row.iter().map(|&v| (f64::from(v) - max).exp()).sum();
                exact += (max + sum.ln() - f64::from(row[class as usize])) / 2.0;
            }
            assert!(
                (f64::from(both) - exact).abs() < 1e-6 * exact.abs(),
                "{classes} classes"
            );
        }
    }

    /// Central differences of `L::loss` in `f64` steps on `f32` inputs are too coarse, so
    /// the check perturbs by a relatively large step and compares loosely; the exact values
    /// are checked separately.
    fn check_grad<L: Loss>(pred: &[f32], target: &[L::Target], n: usize, f: fn(&[f64]) -> f64) {
        let mut grad = vec![f32::NAN; pred.len()];
        let loss = L::loss_and_grad(pred, target, &mut grad, n);
        let p64: Vec<f64> = pred.iter().map(|&v| f64::from(v)).collect();
        let expected = f(&p64);
        assert!(
            (f64::from(loss) - expected).abs() <= 1e-6 * expected.abs() + 1e-7,
            "loss {loss} vs {expected}"
        );
        assert_eq!(
            loss,
            L::loss(pred, target, n),
            "loss and loss_and_grad agree"
        );
        let mut p = p64.clone();
        for j in 0..p.len() {
            let h = 1e-6;
            p[j] = p64[j] + h;
            let plus = f(&p);
            p[j] = p64[j] - h;
            let minus = f(&p);
            p[j] = p64[j];
            let num = (plus - minus) / (2.0 * h);
            let g = f64::from(grad[j]);
            assert!(
                (g - num).abs() <= 1e-3 * num.abs() + 1e-5,
                "grad[{j}] = {g}, numerically {num}"
            );
        }
    }

    const PRED: [f32; 6] = [0.3, -1.7, 2.5, 0.0, 4.0, -0.2];
    const TARGET: [f32; 6] = [0.5, -1.0, 0.1, 1.0, 1.5, -2.1];

    #[test]
    fn regression_losses() {
        check_grad::<Mse>(&PRED, &TARGET, 3, |p| {
            p.iter()
                .zip(TARGET)
                .map(|(p, t)| (p - f64::from(t)).powi(2))
                .sum::<f64>()
                / 6.0
        });
        check_grad::<Mae>(&PRED, &TARGET, 2, |p| {
            p.iter()
                .zip(TARGET)
                .map(|(p, t)| (p - f64::from(t)).abs())
                .sum::<f64>()
                / 6.0
        });
        check_grad::<Huber>(&PRED, &TARGET, 6, |p| {
            p.iter()
                .zip(TARGET)
                .map(|(p, t)| {
                    let d = (p - f64::from(t)).abs();
                    if d <= 1.0 {
                        0.5 * d * d
                    } else {
                        d - 0.5
                    }
                })
                .sum::<f64>()
                / 6.0
        });
        let mut g = [f32::NAN; 2];
        assert_eq!(Mae::loss_and_grad(&[1.0, 2.0], &[1.0, 0.0], &mut g, 1), 1.0);
        assert_eq!(g, [0.0, 0.5], "no gradient where pred equals target");
        assert_eq!(Mse::correct(&PRED, &TARGET, 3), None);
        assert_eq!(Mse::targets_per_sample(7), 7);
        assert_eq!(Mse::loss(&[], &[], 3), 0.0);
    }

    const LOGITS: [f32; 6] = [0.3, -1.7, 2.5, 0.0, 4.0, -0.2];
    const LABELS: [f32; 6] = [1.0, 0.0, 1.0, 0.0, 0.25, 1.0];

    #[test]
    fn binary_cross_entropy() {
        check_grad::<BinaryCrossEntropyWithLogits>(&LOGITS, &LABELS, 2, |z| {
            z.iter()
                .zip(LABELS)
                .map(|(&z, y)| {
                    let s = 1.0 / (1.0 + (-z).exp());
                    let y = f64::from(y);
                    -(y * s.ln() + (1.0 - y) * (1.0 - s).ln())
                })
                .sum::<f64>()
                / 6.0
        });
        // Samples (0.3, -1.7 | 1, 0): right; (2.5, 0.0 | 1, 0): right (0 is not positive);
        // (4.0, -0.2 | 0.25, 1): both wrong.
        assert_eq!(
            BinaryCrossEntropyWithLogits::correct(&LOGITS, &LABELS, 2),
            Some(2)
        );
        assert_eq!(
            BinaryCrossEntropyWithLogits::correct(&LOGITS, &LABELS, 1),
            Some(4)
        );
    }

    #[test]
    fn large_logits_stay_finite() {
        let z = [80.0, -80.0, 80.0, -80.0, 1e30, -1e30];
        let y = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0];
        let mut g = [f32::NAN; 6];
        let l = BinaryCrossEntropyWithLogits::loss_and_grad(&z, &y, &mut g, 1);
        // 0 + 0 + 80 + 80 + 0 + 1e30, averaged.
        assert!(
            (f64::from(l) - (160.0 + 1e30) / 6.0).abs() / 1e30 < 1e-6,
            "{l}"
        );
        let expected = [0.0, 0.0, 1.0 / 6.0, -1.0 / 6.0, 0.0, -1.0 / 6.0];
        for (a, b) in g.iter().zip(expected) {
            assert!((a - b).abs() < 1e-7, "{g:?}");
        }

        let z = [80.0, -80.0, 0.0, -80.0, 80.0, 79.0];
        let mut g = [f32::NAN; 6];
        let l = SoftmaxCrossEntropy::loss_and_grad(&z, &[1, 2], &mut g, 3);
        // Row 0: logsumexp = 80, minus -80 = 160. Row 1: logsumexp = 80 + ln(1 + e^-1), minus 79.
        let row1 = 1.0 + (1.0 + (-1.0f64).exp()).ln();
        assert!((f64::from(l) - (160.0 + row1) / 2.0).abs() < 1e-5, "{l}");
        assert!(g.iter().all(|v| v.is_finite()));
        assert!((g[1] + 0.5).abs() < 1e-7 && (g[0] - 0.5).abs() < 1e-7);
    }

    /// Within a few `f32` roundings of the `f64` value: `u` per element of the values (each
    /// rounded to `f32` once by default; computed in `f32` with `f32-accumulators`, `ln` and
    /// `exp` within an ulp), the sum compensated, the mean multiplied by `1 / count`.
    const MANY_ELEMENTS_RTOL: f64 = 8.0 * f32::EPSILON as f64;

    /// `loss` and `grad` against `f64` references of the value and of each derivative (each
    /// within the tolerance of the largest derivative: `softmax - 1` cancels).
    fn check_many<L: Loss>(
        pred: &[f32],
        target: &[L::Target],
        n: usize,
        value: f64,
        derivative: impl Fn(usize) -> f64,
    ) {
        let mut grad = vec![f32::NAN; pred.len()];
        let loss = f64::from(L::loss_and_grad(pred, target, &mut grad, n));
        assert!(
            (loss - value).abs() <= MANY_ELEMENTS_RTOL * value.abs(),
            "loss {loss} vs {value}"
        );
        let scale = grad.iter().fold(0.0f64, |m, &g| m.max(f64::from(g).abs()));
        for (j, &g) in grad.iter().enumerate() {
            let want = derivative(j);
            assert!(
                (f64::from(g) - want).abs() <= MANY_ELEMENTS_RTOL * (want.abs() + scale),
                "grad[{j}] = {g}, in f64 {want}"
            );
        }
    }

    /// Thousands of elements, whose sum a plain `f32` sum would get wrong in its last few
    /// bits: the accumulator choice keeps the built-ins within [`MANY_ELEMENTS_RTOL`] of `f64`.
    #[test]
    fn losses_of_many_elements_stay_within_a_few_roundings_of_f64() {
        let len = 4096;
        let pred: Vec<f32> = (0..len)
            .map(|i| ((i * 7919 % 1000) as f32 - 500.0) / 97.0)
            .collect();
        let target: Vec<f32> = (0..len)
            .map(|i| ((i * 104_729 % 1000) as f32) / 1000.0)
            .collect();
        let (p64, t64): (Vec<f64>, Vec<f64>) = pred
            .iter()
            .zip(&target)
            .map(|(&p, &t)| (f64::from(p), f64::from(t)))
            .unzip();
        let count = len as f64;
        let mse = p64
            .iter()
            .zip(&t64)
            .map(|(p, t)| (p - t) * (p - t))
            .sum::<f64>()
            / count;
        check_many::<Mse>(&pred, &target, 16, mse, |j| 2.0 * (p64[j] - t64[j]) / count);
        let bce = |z: f64, y: f64| z.max(0.0) - z * y + (-z.abs()).exp().ln_1p();
        let value = p64.iter().zip(&t64).map(|(&z, &y)| bce(z, y)).sum::<f64>() / count;
        check_many::<BinaryCrossEntropyWithLogits>(&pred, &target, 16, value, |j| {
            (1.0 / (1.0 + (-p64[j]).exp()) - t64[j]) / count
        });
        let classes = 16;
        let labels: Vec<u32> = (0..len / classes)
            .map(|i| (i * 5 % classes) as u32)
            .collect();
        let rows = labels.len() as f64;
        let sums: Vec<f64> = p64
            .chunks(classes)
            .map(|r| r.iter().map(|v| v.exp()).sum::<f64>())
            .collect();
        let value = p64
            .chunks(classes)
            .zip(&labels)
            .zip(&sums)
            .map(|((r, &c), s)| s.ln() - r[c as usize])
            .sum::<f64>()
            / rows;
        check_many::<SoftmaxCrossEntropy>(&pred, &labels, classes, value, |j| {
            let (r, c) = (j / classes, j % classes);
            let onehot = if c == labels[r] as usize { 1.0 } else { 0.0 };
            (p64[j].exp() / sums[r] - onehot) / rows
        });
    }

    #[test]
    fn softmax_cross_entropy() {
        let labels = [2u32, 0];
        check_grad::<SoftmaxCrossEntropy>(&LOGITS, &labels, 3, |z| {
            z.chunks(3)
                .zip([2usize, 0])
                .map(|(r, c)| r.iter().map(|v| v.exp()).sum::<f64>().ln() - r[c])
                .sum::<f64>()
                / 2.0
        });
        // Row 0's largest logit is class 2 (right); row 1's is class 1, labelled 0 (wrong).
        assert_eq!(SoftmaxCrossEntropy::correct(&LOGITS, &labels, 3), Some(1));
        // Ties go to the first class.
        assert_eq!(SoftmaxCrossEntropy::correct(&[1.0, 1.0], &[0], 2), Some(1));
        assert_eq!(SoftmaxCrossEntropy::targets_per_sample(10), 1);
        assert_eq!(SoftmaxCrossEntropy::loss(&[], &[], 10), 0.0);
    }

    #[test]
    fn sequence_cross_entropy_is_the_mean_over_positions() {
        // Two samples of three positions of two classes.
        let logits: [f32; 12] = [
            0.3, -1.7, 2.5, 0.0, 4.0, -0.2, -0.5, 0.5, 1.25, 1.0, -3.0, 0.75,
        ];
        const LABELS: [u32; 6] = [1, 0, 0, 1, 0, 1];
        let labels = LABELS;
        type Seq = SequenceCrossEntropy<2>;
        check_grad::<Seq>(&logits, &labels, 6, |z| {
            z.chunks(2)
                .zip(LABELS)
                .map(|(r, c)| r.iter().map(|v| v.exp()).sum::<f64>().ln() - r[c as usize])
                .sum::<f64>()
                / 6.0
        });
        let mut seq = [f32::NAN; 12];
        let mut rows = [f32::NAN; 12];
        let l = Seq::loss_and_grad(&logits, &labels, &mut seq, 6);
        let r = SoftmaxCrossEntropy::loss_and_grad(&logits, &labels, &mut rows, 2);
        assert_eq!(
            (l.to_bits(), seq),
            (r.to_bits(), rows),
            "each position a row"
        );
        // Every position is right but the first (0.3 > -1.7, labelled 1).
        assert_eq!(Seq::correct(&logits, &labels, 6), Some(5));
        assert_eq!(Seq::targets_per_sample(6), 3);
        assert_eq!(Seq::scored(&labels, 6), 6);
        assert_eq!(SoftmaxCrossEntropy::scored(&labels, 2), 6);
        assert_eq!(Mse::scored(&[0.0; 6], 3), 2, "value losses score samples");
        assert_eq!(Seq::loss(&[], &[], 6), 0.0);
    }

    /// Logits of four positions of three classes, two of them ignored.
    const MASKED_LOGITS: [f32; 12] = [
        0.3, -1.7, 2.5, 0.0, 4.0, -0.2, -0.5, 0.5, 1.25, 1.0, -3.0, 0.75,
    ];
    const MASKED_LABELS: [u32; 4] = [2, IGNORE, 0, IGNORE];

    /// The loss of [`MASKED_LOGITS`] by hand: rows 0 and 2 only, divided by 2.
    fn masked_loss(z: &[f64]) -> f64 {
        let nll = |r: &[f64], c: usize| r.iter().map(|v| v.exp()).sum::<f64>().ln() - r[c];
        (nll(&z[0..3], 2) + nll(&z[6..9], 0)) / 2.0
    }

    #[test]
    fn ignored_targets_are_left_out_of_the_mean() {
        // Row 0: logsumexp(0.3, -1.7, 2.5) - 2.5; row 2: logsumexp(-0.5, 0.5, 1.25) + 0.5.
        let row0 = (0.3f64.exp() + (-1.7f64).exp() + 2.5f64.exp()).ln() - 2.5;
        let row2 = ((-0.5f64).exp() + 0.5f64.exp() + 1.25f64.exp()).ln() + 0.5;
        let loss = SoftmaxCrossEntropy::loss(&MASKED_LOGITS, &MASKED_LABELS, 3);
        assert!(
            (f64::from(loss) - (row0 + row2) / 2.0).abs() < 1e-6,
            "{loss}"
        );
        check_grad::<SoftmaxCrossEntropy>(&MASKED_LOGITS, &MASKED_LABELS, 3, masked_loss);
        check_grad::<SequenceCrossEntropy<3>>(&MASKED_LOGITS, &MASKED_LABELS, 6, masked_loss);
        let mut grad = [f32::NAN; 12];
        SoftmaxCrossEntropy::loss_and_grad(&MASKED_LOGITS, &MASKED_LABELS, &mut grad, 3);
        assert_eq!(grad[3..6], [0.0; 3], "an ignored row has no gradient");
        assert_eq!(grad[9..], [0.0; 3]);
        // Row 0 is right (2.5 is largest, class 2), row 2 is wrong (1.25 is class 2).
        assert_eq!(
            SoftmaxCrossEntropy::correct(&MASKED_LOGITS, &MASKED_LABELS, 3),
            Some(1)
        );
        assert_eq!(SoftmaxCrossEntropy::scored(&MASKED_LABELS, 3), 2);
        assert_eq!(SequenceCrossEntropy::<3>::scored(&MASKED_LABELS, 6), 2);
    }

    #[test]
    fn nothing_counted_is_a_loss_of_zero() {
        let labels = [IGNORE; 4];
        let mut grad = [f32::NAN; 12];
        let loss = SoftmaxCrossEntropy::loss_and_grad(&MASKED_LOGITS, &labels, &mut grad, 3);
        assert_eq!((loss, grad), (0.0, [0.0; 12]));
        assert_eq!(SoftmaxCrossEntropy::loss(&MASKED_LOGITS, &labels, 3), 0.0);
        assert_eq!(
            SoftmaxCrossEntropy::correct(&MASKED_LOGITS, &labels, 3),
            Some(0)
        );
        assert_eq!(SoftmaxCrossEntropy::scored(&labels, 3), 0);
    }

    /// Ignoring a target is dropping its row: the same bits as the loss of the other rows.
    #[test]
    fn ignoring_a_row_gives_the_bits_of_leaving_it_out() {
        let kept: Vec<f32> = [&MASKED_LOGITS[0..3], &MASKED_LOGITS[6..9]].concat();
        let mut g_kept = [f32::NAN; 6];
        let l_kept = SoftmaxCrossEntropy::loss_and_grad(&kept, &[2, 0], &mut g_kept, 3);
        let mut g = [f32::NAN; 12];
        let l = SoftmaxCrossEntropy::loss_and_grad(&MASKED_LOGITS, &MASKED_LABELS, &mut g, 3);
        assert_eq!(l.to_bits(), l_kept.to_bits());
        assert_eq!([&g[0..3], &g[6..9]].concat(), g_kept);
    }

    #[test]
    #[should_panic(expected = "class 2 of 2")]
    fn sequence_class_out_of_range_panics() {
        SequenceCrossEntropy::<2>::loss(&[0.0; 4], &[1, 2], 4);
    }

    #[test]
    #[should_panic(expected = "not positions of 2 classes")]
    fn sequence_outputs_must_be_whole_positions() {
        SequenceCrossEntropy::<2>::targets_per_sample(5);
    }

    /// A value of 1 everywhere, padding included, and a derivative of 1.
    struct Ones;
    impl LaneLoss for Ones {
        fn value<L: Lane>(_: L, _: L) -> L {
            L::ONE
        }
        fn value_and_grad<L: Lane>(_: L, _: L) -> (L, L) {
            (L::ONE, L::ONE)
        }
    }

    /// The squared error.
    struct Squared;
    impl LaneLoss for Squared {
        fn value<L: Lane>(p: L, t: L) -> L {
            Self::value_and_grad(p, t).0
        }
        fn value_and_grad<L: Lane>(p: L, t: L) -> (L, L) {
            ((p - t) * (p - t), (p - t) * L::splat(2.0))
        }
    }

    /// Value `t / p + p`, derivative `1 - t / p²`: NaN at the padding (0, 0).
    struct NanOnPadding;
    impl LaneLoss for NanOnPadding {
        fn value<L: Lane>(p: L, t: L) -> L {
            Self::value_and_grad(p, t).0
        }
        fn value_and_grad<L: Lane>(p: L, t: L) -> (L, L) {
            (t / p + p, L::ONE - t / (p * p))
        }
    }

    /// The prediction itself, derivative 1.
    struct Prediction;
    impl LaneLoss for Prediction {
        fn value<L: Lane>(p: L, _: L) -> L {
            p
        }
        fn value_and_grad<L: Lane>(p: L, _: L) -> (L, L) {
            (p, L::ONE)
        }
    }

    #[test]
    fn lane_losses_leave_the_padding_out() {
        for len in 0..=17 {
            let pred: Vec<f32> = (0..len).map(|i| i as f32 * 0.25 - 1.0).collect();
            let target: Vec<f32> = (0..len).map(|i| 0.5 - i as f32 * 0.125).collect();
            // A value of 1 everywhere, padding included: only real elements count.
            assert_eq!(
                lanes_loss::<Ones>(&pred, &target, 1, Reduce::Sum),
                len as f32
            );
            let mut grad = vec![f32::NAN; len];
            let mut want = vec![f32::NAN; len];
            let l = lanes_loss_and_grad::<Squared>(&pred, &target, &mut grad, 1, Reduce::Mean);
            let w = Mse::loss_and_grad(&pred, &target, &mut want, 1);
            // The built-in computes in `f64`, the lanes in `f32`: equal to `f32` rounding.
            assert!((l - w).abs() <= 1e-6 * w.abs(), "{len}: {l} vs {w}");
            for (g, w) in grad.iter().zip(&want) {
                assert!((g - w).abs() <= 1e-6 * w.abs(), "{len}: {g} vs {w}");
            }
            assert_eq!(l, lanes_loss::<Squared>(&pred, &target, 1, Reduce::Mean));
        }
    }

    /// Every length 0..=20, against a scalar reference: a lane function that is NaN and
    /// infinite on the padding (`ln` of a zero target, a division by it) leaves the sum and the
    /// stored gradients untouched; `Sum` gradients are not divided; `Mean` divides by the
    /// count and an empty batch is 0; a NaN target makes its element (and the sum) NaN only;
    /// every lane type gives the same bits.
    #[test]
    fn lane_losses_over_every_tail() {
        let scalar = |p: f32, t: f32| (t / p + p, 1.0 - t / (p * p));
        for len in 0..=20usize {
            let pred: Vec<f32> = (0..len).map(|i| 0.5 + i as f32 * 0.25).collect();
            let target: Vec<f32> = (0..len).map(|i| 1.5 - i as f32 * 0.0625).collect();
            for reduce in [Reduce::Sum, Reduce::Mean] {
                let mut grad = vec![f32::NAN; len + 3];
                let l = lanes_loss_and_grad::<NanOnPadding>(
                    &pred,
                    &target,
                    &mut grad[..len],
                    1,
                    reduce,
                );
                // In f64, one accumulator per lane position, added as a tree.
                let mut acc = [0.0f64; 8];
                for (i, (&p, &t)) in pred.iter().zip(&target).enumerate() {
                    acc[i % 8] += f64::from(scalar(p, t).0);
                }
                let a = acc;
                let want = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
                let want = match reduce {
                    Reduce::Sum => want as f32,
                    Reduce::Mean if len == 0 => 0.0,
                    Reduce::Mean => (want / len as f64) as f32,
                };
                if cfg!(feature = "f32-accumulators") {
                    // The compensated sum rounded once, `1 / len` and the product: 3 roundings.
                    let bound = 3.0 * f32::EPSILON * want.abs();
                    assert!((l - want).abs() <= bound, "{len} {reduce:?}: {l} vs {want}");
                } else {
                    assert_eq!(l, want, "{len} {reduce:?}");
                }
                assert_eq!(l, lanes_loss::<NanOnPadding>(&pred, &target, 1, reduce));
                for lanes in Tested::every() {
                    let mut on_lanes = vec![f32::NAN; len];
                    let sum = lanes.run(LossPass::<NanOnPadding> {
                        pred: &pred,
                        target: &target,
                        grad: Some((&mut on_lanes, reduce)),
                        loss: PhantomData,
                    });
                    let l_lanes = match reduce {
                        Reduce::Sum => sum as f32,
                        Reduce::Mean => (sum * inv_count(len)) as f32,
                    };
                    assert_eq!(l_lanes.to_bits(), l.to_bits(), "{lanes:?} {len}");
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&on_lanes), bits(&grad[..len]), "{lanes:?} {len}");
                }
                for i in 0..len {
                    let d = scalar(pred[i], target[i]).1;
                    let d = match reduce {
                        Reduce::Sum => d,
                        Reduce::Mean => d / len as f32,
                    };
                    assert_eq!(grad[i], d, "{len} {reduce:?} [{i}]");
                }
                assert!(
                    grad[len..].iter().all(|g| g.is_nan()),
                    "nothing stored past the end"
                );
            }
            if len > 0 {
                let mut target = target.clone();
                target[len / 2] = f32::NAN;
                let mut grad = vec![0.0; len];
                let l =
                    lanes_loss_and_grad::<NanOnPadding>(&pred, &target, &mut grad, 1, Reduce::Mean);
                assert!(l.is_nan());
                for (i, g) in grad.iter().enumerate() {
                    assert_eq!(g.is_nan(), i == len / 2, "{len} [{i}]");
                }
            }
        }
    }

    /// The sum of the same values gives the same bits wherever they sit in a larger buffer
    /// (any offset, hence any alignment) and whether computed with the gradient or without.
    #[test]
    fn lane_loss_sums_do_not_depend_on_the_offset() {
        let values: Vec<f32> = (0..37).map(|i| (i as f32 * 0.37).sin() * 1e3).collect();
        let zeros = vec![0.0; 37];
        let want = lanes_loss::<Prediction>(&values, &zeros, 1, Reduce::Sum);
        for offset in 0..9 {
            let mut buf = vec![0.0; offset];
            buf.extend(&values);
            let mut grad = vec![0.0; 37];
            let s = &buf[offset..];
            assert_eq!(
                lanes_loss::<Prediction>(s, &zeros, 1, Reduce::Sum).to_bits(),
                want.to_bits()
            );
            let l = lanes_loss_and_grad::<Prediction>(s, &zeros, &mut grad, 1, Reduce::Sum);
            assert_eq!(l.to_bits(), want.to_bits());
            assert!(
                grad.iter().all(|&g| g == 1.0),
                "sum gradients are not divided"
            );
        }
    }

    #[test]
    #[should_panic(expected = "class 3 of 3")]
    fn class_out_of_range_panics() {
        SoftmaxCrossEntropy::loss(&[0.0; 3], &[3], 3);
    }
}
