//! The lane passes of element-wise losses that `loss!` generates: value and gradient in one
//! pass over the lanes [`lane::dispatch`] picks, summed in [`Wide`] in a fixed order.

use super::{check_lengths, inv_count, Reduce};
use crate::accumulate::{narrow, widen, Accumulator, Wide};
use crate::lane::{self, pieces, Lane, OnLanes, MAX_LANES};
use crate::LANES;
use core::marker::PhantomData;
use wide::f32x8;

/// A deterministic sum of `f32` values in [`Wide`]: value `i` of the walk is widened and added
/// to accumulator `i % 8` (its position in an `f32x8` lane), and the eight accumulators are
/// added in a fixed order at the end, so the result depends on the values and their order only
/// (not on the lane type, threads, alignment or how a caller chunks its slices into whole
/// lanes).
pub(super) struct LaneSum {
    /// The accumulators, in lane order.
    sums: [Accumulator; LANES],
    /// Values added so far.
    count: usize,
}

impl LaneSum {
    /// Zero in every accumulator.
    pub(super) fn new() -> LaneSum {
        LaneSum {
            sums: [Accumulator::ZERO; LANES],
            count: 0,
        }
    }

    /// Adds the first `k` lanes of `v`, the next `k` values of the walk; the others (a padded
    /// tail) are left out.
    #[inline(always)]
    pub(super) fn add<L: Lane>(&mut self, v: L, k: usize) {
        let mut lanes = [0.0; MAX_LANES];
        v.store(&mut lanes);
        if k == L::LANES && L::LANES.is_multiple_of(LANES) && self.count.is_multiple_of(LANES) {
            for chunk in lanes[..k].chunks_exact(LANES) {
                for (a, &x) in self.sums.iter_mut().zip(chunk) {
                    a.add(widen(x));
                }
            }
            self.count += k;
            return;
        }
        for &x in &lanes[..k] {
            self.sums[self.count % LANES].add(widen(x));
            self.count += 1;
        }
    }

    /// Adds the values of `s`, the next `s.len()` values of the walk, eight at a time.
    #[inline(always)]
    pub(super) fn add_slice(&mut self, s: &[f32]) {
        for (i, k) in pieces::<f32x8>(s.len()) {
            self.add(f32x8::load_padded(&s[i..i + k]), k);
        }
    }

    /// `((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))`, each `+` an
    /// [`Accumulator::merged`].
    pub(super) fn total(&self) -> Wide {
        let a = &self.sums;
        let pair = |i: usize| a[i].merged(a[i + 1]);
        (pair(0).merged(pair(2)))
            .merged(pair(4).merged(pair(6)))
            .total()
    }
}

/// The reduced value of a sum of `count` element values.
fn reduce_sum(sum: Wide, count: usize, reduce: Reduce) -> f32 {
    match reduce {
        Reduce::Mean => narrow(sum * inv_count(count)),
        Reduce::Sum => narrow(sum),
    }
}

/// The lane functions of an element-wise loss, over any [`Lane`] type: what `loss!` generates
/// for a loss (the value, and the value with its derivative by the prediction, sharing their
/// sub-expressions), which [`lanes_loss_and_grad`] and [`lanes_loss`] run on the lanes
/// [`lane::dispatch`] picks.
pub trait LaneLoss {
    /// The value of each element from its prediction and target.
    fn value<L: Lane>(pred: L, target: L) -> L;
    /// The value of each element and its derivative by the prediction.
    fn value_and_grad<L: Lane>(pred: L, target: L) -> (L, L);
}

/// Value and gradient of the element-wise loss `F`, in one pass over the lanes
/// [`lane::dispatch`] picks; what `loss!` generates calls it.
///
/// The tail is padded with zeros into a full lane and runs the same lane code; its padded
/// lanes are left out of the sum and not stored. Each element's value is computed in `f32`
/// and summed in [`Wide`] (see `LaneSum`, the same order on every lane type); with
/// [`Reduce::Mean`] the sum and each derivative are divided by the count (an empty batch
/// gives 0).
///
/// # Panics
/// If the lengths of `pred`, `target` and `grad` differ, or are not whole samples of `n`.
#[inline(always)]
pub fn lanes_loss_and_grad<F: LaneLoss>(
    pred: &[f32],
    target: &[f32],
    grad: &mut [f32],
    n: usize,
    reduce: Reduce,
) -> f32 {
    check_lengths(pred, target, n);
    assert_eq!(grad.len(), pred.len(), "loss: grad and pred lengths differ");
    let sum = lane::dispatch_for(
        pred.len(),
        LossPass::<F> {
            pred,
            target,
            grad: Some((grad, reduce)),
            loss: PhantomData,
        },
    );
    reduce_sum(sum, pred.len(), reduce)
}

/// The value alone of the element-wise loss `F`, computed and reduced as in
/// [`lanes_loss_and_grad`].
///
/// # Panics
/// If the lengths of `pred` and `target` differ, or are not whole samples of `n`.
#[inline(always)]
pub fn lanes_loss<F: LaneLoss>(pred: &[f32], target: &[f32], n: usize, reduce: Reduce) -> f32 {
    check_lengths(pred, target, n);
    let sum = lane::dispatch_for(
        pred.len(),
        LossPass::<F> {
            pred,
            target,
            grad: None,
            loss: PhantomData,
        },
    );
    reduce_sum(sum, pred.len(), reduce)
}

/// The pass of [`lanes_loss_and_grad`] (with `grad`) or [`lanes_loss`], on any lane type: the
/// sum of the values, before the reduction.
pub(super) struct LossPass<'a, F> {
    pub(super) pred: &'a [f32],
    pub(super) target: &'a [f32],
    pub(super) grad: Option<(&'a mut [f32], Reduce)>,
    pub(super) loss: PhantomData<F>,
}

impl<F: LaneLoss> OnLanes for LossPass<'_, F> {
    type Output = Wide;
    #[inline(always)]
    fn run<L: Lane>(self) -> Wide {
        let (pred, target) = (self.pred, self.target);
        let mut sum = LaneSum::new();
        let load = |i: usize, k: usize| {
            (
                L::load_padded(&pred[i..i + k]),
                L::load_padded(&target[i..i + k]),
            )
        };
        match self.grad {
            Some((grad, reduce)) => {
                let count = L::splat(pred.len() as f32);
                for (i, k) in pieces::<L>(pred.len()) {
                    let (p, t) = load(i, k);
                    let (v, d) = F::value_and_grad(p, t);
                    sum.add(v, k);
                    let d = match reduce {
                        Reduce::Mean => d / count,
                        Reduce::Sum => d,
                    };
                    d.store_partial(&mut grad[i..i + k]);
                }
            }
            None => {
                for (i, k) in pieces::<L>(pred.len()) {
                    let (p, t) = load(i, k);
                    sum.add(F::value(p, t), k);
                }
            }
        }
        sum.total()
    }
}
