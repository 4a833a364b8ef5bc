//! The error function of `f32`, written once over [`Lane`] so that the scalar
//! [`math::erf`](crate::math::erf) (the one-lane `f32`) and the lane
//! [`lane::erf`](crate::lane::erf) run the same operations in the same order and give the same
//! bits. It uses `+ - *`, comparisons, selects
//! and bit operations, never `mul_add`, so SSE2, AVX2 and FMA builds give the same bits too.
//!
//! For `|x| < 0.921875`, `erf(x) = x + x P(x²)`; above, `erf(x) = 1 - e^(-Q(|x|))` with `Q`
//! close to `-ln erfc`, and from `|x| = 4` on (where `erfc < 2^-25`) it is `±1` exactly. `P`
//! and `Q` are minimax polynomials of degree 6 fitted in `f64`, and the exponential is
//! range-reduced by `ln 2` with its own polynomial of degree 6. The error, measured once against
//! `f64` `erf` over every `f32`, is at most 1.28 ulp (1.24 below 0.921875; the tests sweep every
//! 251st `f32`); the sign of zero is kept, `±inf` gives `±1` and NaN stays NaN.

use super::Lane;

/// `1.5 * 2^23`, which rounds any `|v| < 2^22` to a whole number when added and taken away.
const ROUND: f32 = 12_582_912.0;
/// `2^23 + 127`: added to a whole `n` in `[-126, 127]`, it leaves `n + 127` in the low bits.
const POW2_BIAS: f32 = 8_388_735.0;

/// Where the two approximations meet.
const SPLIT: f32 = 0.921_875;
/// From here on `erf` rounds to `±1`.
const SATURATED: f32 = 4.0;

/// `P(s)`, `erf(a) = a + a P(a²)` for `a < SPLIT`; `P(0) = 2/√π - 1`.
const NEAR_ZERO: [f32; 7] = [
    0.128_379_17,
    -0.376_126_35,
    0.112_836_96,
    -0.026_859_399,
    0.005_201_032_4,
    -0.000_814_270_4,
    8.370_1e-5,
];
/// `Q(a) ≈ -ln erfc(a)` for `a` in `[SPLIT, SATURATED]`.
const TAIL: [f32; 7] = [
    0.000_209_922_6,
    1.127_615_5,
    0.637_285_8,
    0.103_838_846,
    -0.022_181_368,
    0.003_031_592_6,
    -0.000_194_733_63,
];
/// `E(r)`, `e^r = 1 + r + r² E(r)` for `|r| <= ln 2 / 2`.
const EXP: [f32; 5] = [
    0.499_999_94,
    0.166_665_21,
    0.041_668_39,
    0.008_368_71,
    0.001_381_461_3,
];

/// `c[0] + c[1] x + c[2] x² + ...`, by Horner's rule.
#[inline(always)]
fn horner<T: Lane>(c: &[f32], x: T) -> T {
    c.iter()
        .rev()
        .skip(1)
        .fold(T::splat(c[c.len() - 1]), |p, &k| p * x + T::splat(k))
}

/// `e^y` for `y` in `[-30, 0]`: `y = n ln 2 + r` with a whole `n` and `|r| <= ln 2 / 2`
/// (`ln 2` in two parts, so that `n ln 2` is exact), then `2^n e^r`.
#[inline(always)]
fn exp_negative<T: Lane>(y: T) -> T {
    // Exactly 0.693359375: nine significant bits, so that `n * LN2_HI` is exact.
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    let round = T::splat(ROUND);
    let n = (y * T::splat(core::f32::consts::LOG2_E) + round) - round;
    let r = (y - n * T::splat(LN2_HI)) - n * T::splat(LN2_LO);
    let e = horner(&EXP, r) * r * r + r + T::ONE;
    e * (n + T::splat(POW2_BIAS)).shl23()
}

/// `erf(a) = a + a P(a²)`, for `0 <= a < SPLIT`.
#[inline(always)]
fn near_zero<T: Lane>(a: T) -> T {
    a * horner(&NEAR_ZERO, a * a) + a
}

/// `erf(a) = 1 - e^(-Q(a))`, for `a >= SPLIT`; clamped where `SATURATED < a`, so that `inf`
/// gives 1 and NaN stays NaN.
#[inline(always)]
fn tail<T: Lane>(a: T) -> T {
    let saturated = T::splat(SATURATED);
    let a = saturated.simd_lt(a).select(saturated, a);
    T::ONE - exp_negative(-horner(&TAIL, a))
}

/// The error function, `2/√π ∫₀ˣ e^(-t²) dt`, of every lane (the same bits on every lane type).
/// Lanes compute only the approximation that some lane needs.
#[inline(always)]
pub(crate) fn erf<T: Lane>(x: T) -> T {
    let a = x.abs();
    let split = T::splat(SPLIT);
    let near = a.simd_lt(split);
    let r = if near.all() {
        near_zero(a)
    } else if !near.any() {
        tail(a)
    } else {
        near.select(near_zero(a), tail(a))
    };
    r.or(x.and(T::splat(-0.0)))
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;
    use wide::f32x8;

    /// `|got - want|` in units in the last place of an `f32` in the binade of `want`.
    fn ulps(got: f32, want: f64) -> f64 {
        let binade = ((want.abs().to_bits() >> 52) as i32 - 1023).max(-126);
        let ulp = f64::from_bits(((binade - 23 + 1023) as u64) << 52);
        (f64::from(got) - want).abs() / ulp
    }

    /// Every 251st `f32` from `+0` to 4.5: subnormals, tiny values, both approximations and
    /// where they meet, and the saturated tail.
    fn sweep() -> impl Iterator<Item = f32> {
        (0..=4.5_f32.to_bits()).step_by(251).map(f32::from_bits)
    }

    const SPECIAL: [f32; 16] = [
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::MAX,
        -f32::MAX,
        1e-45,
        -1e-45,
        f32::MIN_POSITIVE,
        1e-30,
        SPLIT,
        -SPLIT,
        SATURATED,
        3.9,
        -1e30,
    ];

    #[test]
    fn within_1_3_ulp_of_the_f64_error_function_and_odd() {
        let mut worst = (0.0, 0.0);
        for x in sweep() {
            let got = erf(x);
            let err = ulps(got, libm::erf(f64::from(x)));
            if err > worst.0 {
                worst = (err, x);
            }
            assert_eq!(erf(-x).to_bits(), (-got).to_bits(), "erf(-{x:e})");
        }
        assert!(worst.0 <= 1.3, "{} ulp at {:e}", worst.0, worst.1);
        assert!(worst.0 > 0.5, "the sweep must reach values that round");
    }

    #[test]
    fn edges_keep_signs_and_saturate() {
        assert_eq!(erf(0.0_f32).to_bits(), 0.0_f32.to_bits());
        assert_eq!(erf(-0.0_f32).to_bits(), (-0.0_f32).to_bits());
        assert_eq!(erf(f32::INFINITY), 1.0);
        assert_eq!(erf(f32::NEG_INFINITY), -1.0);
        assert!(erf(f32::NAN).is_nan());
        assert!(erf(-f32::NAN).is_nan());
        assert_eq!(erf(f32::MAX), 1.0);
        assert_eq!(erf(-1e30_f32), -1.0);
        assert_eq!(erf(SATURATED), 1.0);
        // erf(3.9) = 1 - 3.5e-8, nearer to 1 - 2^-24 than to 1.
        assert_eq!(erf(3.9_f32), 1.0 - f32::EPSILON / 2.0);
        // 2/√π x, rounded, for the smallest subnormal and for a tiny normal value.
        assert_eq!(erf(1e-45_f32), 1e-45);
        assert_eq!(erf(1e-30_f32), 1.128_379_2e-30);
    }

    /// Each lane of `erf(v)` against the scalar `erf` of its value, bit for bit.
    fn assert_lanes_match(v: [f32; 8]) {
        let lanes = erf(f32x8::from(v)).to_array();
        for (x, got) in v.iter().zip(lanes) {
            let want = erf(*x);
            assert!(
                got.to_bits() == want.to_bits() || got.is_nan() && want.is_nan(),
                "erf({x:e}) in {v:?}: lane {got:e}, scalar {want:e}"
            );
        }
    }

    #[test]
    fn lanes_give_the_scalar_bits() {
        // Neighbours in the sweep: mostly lanes on one side of the split.
        let xs: Vec<f32> = sweep().flat_map(|x| [x, -x]).chain(SPECIAL).collect();
        for chunk in xs.chunks(8) {
            let mut v = [f32::NAN; 8];
            v[..chunk.len()].copy_from_slice(chunk);
            assert_lanes_match(v);
        }
        // Lanes on both sides of the split.
        for x in sweep().step_by(7) {
            assert_lanes_match([x, -0.75 * x, 0.25 * x, 0.5, -2.0, 4.0 * x, f32::NAN, -x]);
        }
    }
}
