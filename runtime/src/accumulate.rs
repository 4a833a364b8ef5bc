//! The accumulator choice: the scalar type that losses, normalization statistics and reductions
//! sum, log and divide in ([`Wide`]), and the one sum they all use ([`Accumulator`]), chosen
//! at compile time.
//!
//! - **Default: `f64`.** Values are widened to `f64` and summed one after another in plain
//!   `f64`; logarithms, exponentials and divisions are `f64`'s. These are the bits fusegraph
//!   has always given, the ones the golden cases were recorded with. Right for the host and for
//!   targets with a double-precision FPU.
//! - **Feature `f32-accumulators`: `f32`.** The same code, in the same fixed order, with
//!   `Wide = f32`: each sum is a compensated (Neumaier) sum, which carries the rounding error
//!   of every addition in a second `f32` and adds it back at the end, so the total is as good
//!   as a sum in twice the precision, rounded once, for all but pathological inputs
//!   (an error below `2 ε |total| + O(n ε²) Σ|x|`, `ε = 2^-24`); logarithms, exponentials and
//!   divisions are `f32`'s (`libm`'s `logf`, `expf`, ...). For a target whose FPU is single
//!   precision only (the Cortex-M4F), where `f64` is emulated in software. The results differ
//!   from the default's in the last bits of a loss and its gradient, so a host build with the
//!   feature (and only one with it) reproduces such a target's bits.
//!
//! Either way the order of operations depends on the lengths alone, not on threads, lanes or
//! alignment, so each choice gives the same bits serially and in parallel.
//!
//! The feature is off by default everywhere: features unify across a workspace, so a workspace
//! that also builds for the host should enable it only in the crate of the target (as
//! `embedded/firmware` does).
//!
//! ```
//! use fusegraph_runtime::accumulate::{widen, Accumulator};
//! let mut sum = Accumulator::ZERO;
//! for x in [1.0e8_f32, 1.0, -1.0e8] {
//!     sum.add(widen(x));
//! }
//! // Exact either way: in `f64` plainly, in `f32` thanks to the compensation.
//! assert_eq!(sum.total(), 1.0);
//! ```

/// The scalar type of the accumulator choice: `f64` by default, `f32` with the feature
/// `f32-accumulators`.
#[cfg(not(feature = "f32-accumulators"))]
pub type Wide = f64;

/// The scalar type of the accumulator choice: `f64` by default, `f32` with the feature
/// `f32-accumulators`.
#[cfg(feature = "f32-accumulators")]
pub type Wide = f32;

/// `x` as a [`Wide`] (exact).
#[inline(always)]
#[allow(clippy::useless_conversion)]
pub fn widen(x: f32) -> Wide {
    Wide::from(x)
}

/// `x` rounded to `f32` (nothing to round with `f32` accumulators).
#[inline(always)]
#[allow(clippy::unnecessary_cast)]
pub fn narrow(x: Wide) -> f32 {
    x as f32
}

/// `x` as an `f64` (exact), for tests that compare with `f64` references.
#[cfg(test)]
#[allow(clippy::useless_conversion)]
pub(crate) fn to_f64(x: Wide) -> f64 {
    f64::from(x)
}

/// A sum of [`Wide`] values in the order they are added: plain `f64` additions by default, a
/// compensated `f32` sum with `f32-accumulators` (see the [module](self)).
#[derive(Clone, Copy, Debug)]
pub struct Accumulator {
    /// The running sum.
    sum: Wide,
    /// The rounding errors of the additions so far, to add back at the end.
    #[cfg(feature = "f32-accumulators")]
    carry: Wide,
}

impl Accumulator {
    /// The empty sum, `0`.
    pub const ZERO: Accumulator = Accumulator {
        sum: 0.0,
        #[cfg(feature = "f32-accumulators")]
        carry: 0.0,
    };

    /// Adds `x`.
    #[inline(always)]
    pub fn add(&mut self, x: Wide) {
        #[cfg(not(feature = "f32-accumulators"))]
        {
            self.sum += x;
        }
        #[cfg(feature = "f32-accumulators")]
        {
            // Neumaier: the error of `sum + x` is exact in `f32`, computed from the larger
            // operand.
            let t = self.sum + x;
            self.carry += if crate::math::abs(self.sum) >= crate::math::abs(x) {
                (self.sum - t) + x
            } else {
                (x - t) + self.sum
            };
            self.sum = t;
        }
    }

    /// The sum of `self` and `other`, as if `other`'s values had been added after `self`'s
    /// (up to rounding): by default exactly `self.total() + other.total()`.
    #[inline(always)]
    pub fn merged(mut self, other: Accumulator) -> Accumulator {
        self.add(other.sum);
        #[cfg(feature = "f32-accumulators")]
        {
            self.carry += other.carry;
        }
        self
    }

    /// The sum of the values added.
    ///
    /// With `f32-accumulators` the carried errors are added back if the sum is finite; an
    /// infinite or NaN sum is returned as it is (an overflow stays infinite, not NaN).
    #[inline(always)]
    pub fn total(&self) -> Wide {
        #[cfg(not(feature = "f32-accumulators"))]
        {
            self.sum
        }
        #[cfg(feature = "f32-accumulators")]
        {
            if self.sum.is_finite() {
                self.sum + self.carry
            } else {
                self.sum
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values of every magnitude and both signs, whose sum cancels most of them.
    fn values(n: usize) -> impl Iterator<Item = f32> {
        (0..n).map(|i| {
            let scale = [1e-3, 1.0, 1e4, 1e7][i % 4];
            let sign = if i % 3 == 0 { -1.0 } else { 1.0 };
            sign * scale * (1.0 + ((i * 7919) % 1000) as f32 / 1000.0)
        })
    }

    /// The sum of the values and the sum of their magnitudes, in `f64`.
    fn reference(n: usize) -> (f64, f64) {
        values(n).fold((0.0, 0.0), |(s, a), x| {
            (s + f64::from(x), a + f64::from(x).abs())
        })
    }

    /// Within the bound the module states: twice the precision, rounded once
    /// (`2 ε |total|` with `ε = 2^-24` for `f32`, `2^-53` for `f64`) plus `n ε²` of the
    /// magnitudes (and, with `f64`, `n ε` of them: a plain sum).
    #[test]
    fn the_sum_is_within_its_bound_of_the_exact_one() {
        for n in [0, 1, 2, 7, 100, 1000, 10_000] {
            let mut acc = Accumulator::ZERO;
            values(n).for_each(|x| acc.add(widen(x)));
            let (want, magnitudes) = reference(n);
            let eps = to_f64(Wide::EPSILON) / 2.0;
            let plain = if cfg!(feature = "f32-accumulators") {
                0.0
            } else {
                n as f64 * eps
            };
            let bound = 2.0 * eps * want.abs() + (n as f64 * eps * eps + plain) * magnitudes;
            let got = to_f64(acc.total());
            assert!(
                (got - want).abs() <= bound,
                "{n}: {got} vs {want} ± {bound}"
            );
        }
    }

    /// With `f32` accumulators a plain `f32` sum would be far off: the compensation matters.
    #[test]
    #[cfg(feature = "f32-accumulators")]
    fn the_compensation_recovers_what_a_plain_f32_sum_loses() {
        let n = 10_000;
        let plain: f32 = values(n).fold(0.0, |s, x| s + x);
        let mut acc = Accumulator::ZERO;
        values(n).for_each(|x| acc.add(x));
        let (want, _) = reference(n);
        let (plain_err, err) = (
            (f64::from(plain) - want).abs(),
            (to_f64(acc.total()) - want).abs(),
        );
        assert!(
            err * 100.0 < plain_err,
            "compensated {err}, plain {plain_err}"
        );
    }

    #[test]
    fn merging_adds_the_second_sum_after_the_first() {
        let (mut a, mut b, mut all) = (Accumulator::ZERO, Accumulator::ZERO, Accumulator::ZERO);
        for (i, x) in values(500).enumerate() {
            if i < 200 { &mut a } else { &mut b }.add(widen(x));
            all.add(widen(x));
        }
        let merged = a.merged(b).total();
        if cfg!(feature = "f32-accumulators") {
            let (want, _) = reference(500);
            assert!((to_f64(merged) - want).abs() <= 1e-7 * want.abs());
        } else {
            assert_eq!(merged.to_bits(), (a.total() + b.total()).to_bits());
        }
    }

    #[test]
    fn overflow_stays_infinite_and_nan_stays_nan() {
        let mut acc = Accumulator::ZERO;
        acc.add(Wide::MAX);
        acc.add(Wide::MAX);
        assert_eq!(acc.total(), Wide::INFINITY);
        acc.add(Wide::NAN);
        assert!(acc.total().is_nan());
        let zero = Accumulator::ZERO.total();
        assert!(
            zero == 0.0 && zero.is_sign_positive(),
            "the empty sum is +0"
        );
    }
}
