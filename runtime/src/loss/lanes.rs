//! The lane passes of element-wise losses that `loss!` generates: value and gradient in one
//! pass over `f32x8` lanes, summed in `f64` in a fixed order.

use super::{check_lengths, inv_count, Reduce};
use crate::kernels::simd::{load_padded, pieces, store_partial};
use crate::LANES;
use wide::f32x8;

/// A deterministic sum of `f32` lane values in `f64`: each value is widened and added to the
/// accumulator of its position in the lane, and the eight accumulators are added in a fixed
/// order at the end, so the result depends on the values and their order only (not on
/// threads, alignment or how a caller chunks its slices beyond their length).
pub(super) struct LaneSum([f64; LANES]);

impl LaneSum {
    /// Zero in every accumulator.
    pub(super) fn new() -> LaneSum {
        LaneSum([0.0; LANES])
    }

    /// Adds the first `k` lanes of `v`; the others (a padded tail) are left out.
    #[inline(always)]
    pub(super) fn add(&mut self, v: f32x8, k: usize) {
        let v = v.to_array();
        for (j, (a, x)) in self.0.iter_mut().zip(v).enumerate() {
            if j < k {
                *a += f64::from(x);
            }
        }
    }

    /// `((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))`.
    pub(super) fn total(&self) -> f64 {
        let a = &self.0;
        ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]))
    }
}

/// The reduced value of a sum of `count` element values.
fn reduce_sum(sum: f64, count: usize, reduce: Reduce) -> f32 {
    match reduce {
        Reduce::Mean => (sum * inv_count(count)) as f32,
        Reduce::Sum => sum as f32,
    }
}

/// Value and gradient of an element-wise loss from its lane function `f(pred, target) ->
/// (value, d value / d pred)`, in one pass over [`f32x8`] lanes; what `loss!` generates calls
/// it.
///
/// The tail is padded with zeros into a full lane and runs the same lane code; its padded
/// lanes are left out of the sum and not stored. Each element's value is computed in `f32`
/// and summed in `f64` (see `LaneSum`); with [`Reduce::Mean`] the sum and each derivative are
/// divided by the count (an empty batch gives 0).
///
/// # Panics
/// If the lengths of `pred`, `target` and `grad` differ, or are not whole samples of `n`.
#[inline(always)]
pub fn lanes_loss_and_grad(
    pred: &[f32],
    target: &[f32],
    grad: &mut [f32],
    n: usize,
    reduce: Reduce,
    f: impl Fn(f32x8, f32x8) -> (f32x8, f32x8),
) -> f32 {
    check_lengths(pred, target, n);
    assert_eq!(grad.len(), pred.len(), "loss: grad and pred lengths differ");
    let count = f32x8::splat(pred.len() as f32);
    let mut sum = LaneSum::new();
    for (i, k) in pieces(pred.len()) {
        let (v, d) = f(
            load_padded(&pred[i..i + k], 0.0),
            load_padded(&target[i..i + k], 0.0),
        );
        sum.add(v, k);
        let d = match reduce {
            Reduce::Mean => d / count,
            Reduce::Sum => d,
        };
        store_partial(&mut grad[i..i + k], d);
    }
    reduce_sum(sum.total(), pred.len(), reduce)
}

/// The value alone of an element-wise loss from its lane function `f(pred, target)`, computed
/// and reduced as in [`lanes_loss_and_grad`].
///
/// # Panics
/// If the lengths of `pred` and `target` differ, or are not whole samples of `n`.
#[inline(always)]
pub fn lanes_loss(
    pred: &[f32],
    target: &[f32],
    n: usize,
    reduce: Reduce,
    f: impl Fn(f32x8, f32x8) -> f32x8,
) -> f32 {
    check_lengths(pred, target, n);
    let mut sum = LaneSum::new();
    for (i, k) in pieces(pred.len()) {
        sum.add(
            f(
                load_padded(&pred[i..i + k], 0.0),
                load_padded(&target[i..i + k], 0.0),
            ),
            k,
        );
    }
    reduce_sum(sum.total(), pred.len(), reduce)
}
