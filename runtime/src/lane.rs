//! Lane functions that `wide` does not provide, used by code that `optimizer!`,
//! `activation!` and `loss!` generate. Each has the same semantics as its scalar twin in
//! [`math`](crate::math) (`softplus` has none: scalar code spells it out).

use wide::f32x8;

/// `1` for positive, `-1` for negative, `0` for zero (PyTorch's and NumPy's `sign`, unlike
/// `signum`, which gives `1` for `+0.0`).
#[inline(always)]
pub fn sign(x: f32x8) -> f32x8 {
    let pos = x.simd_gt(f32x8::ZERO).select(f32x8::ONE, f32x8::ZERO);
    let neg = x.simd_lt(f32x8::ZERO).select(f32x8::ONE, f32x8::ZERO);
    pos - neg
}

/// The logistic function `1 / (1 + e^-x)`.
#[inline(always)]
pub fn sigmoid(x: f32x8) -> f32x8 {
    f32x8::ONE / (f32x8::ONE + (-x).exp())
}

/// `ln(1 + e^x)`, computed as `max(x, 0) + ln_1p(e^-|x|)`: no overflow for large `x`, no
/// lost digits for very negative `x`.
#[inline(always)]
pub fn softplus(x: f32x8) -> f32x8 {
    x.max(f32x8::ZERO) + (-x.abs()).exp().ln_1p()
}

/// The error function of each value (`wide` has none): the same bits as the scalar
/// [`math::erf`](crate::math::erf) gives each, within 1.3 ulp of the exact value.
#[inline(always)]
pub fn erf(x: f32x8) -> f32x8 {
    crate::erf::erf(x)
}

/// `x` limited to `[lo, hi]`; a NaN `x` stays NaN.
#[inline(always)]
pub fn clamp(x: f32x8, lo: f32x8, hi: f32x8) -> f32x8 {
    let x = x.simd_lt(lo).select(lo, x);
    x.simd_gt(hi).select(hi, x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math;

    fn lanes(xs: [f32; 8]) -> f32x8 {
        f32x8::from(xs)
    }

    const XS: [f32; 8] = [-3.5, -1.0, -0.0, 0.0, 1e-30, 0.5, 2.0, 40.0];

    #[test]
    fn lane_functions_match_scalar_twins() {
        let s = sign(lanes(XS)).to_array();
        let c = clamp(lanes(XS), f32x8::splat(-1.0), f32x8::splat(1.0)).to_array();
        let g = sigmoid(lanes(XS)).to_array();
        let e = erf(lanes(XS)).to_array();
        for i in 0..8 {
            assert_eq!(e[i].to_bits(), math::erf(XS[i]).to_bits(), "erf({})", XS[i]);
            assert_eq!(s[i], math::sign(XS[i]), "sign({})", XS[i]);
            assert_eq!(c[i], math::clamp(XS[i], -1.0, 1.0));
            assert!((g[i] - math::sigmoid(XS[i])).abs() <= 2.0 * f32::EPSILON);
        }
        let p = softplus(lanes(XS)).to_array();
        for i in 0..8 {
            let want = (f64::from(XS[i]).exp()).ln_1p();
            assert!(
                (f64::from(p[i]) - want).abs() <= 2e-7 * want.max(1e-30),
                "softplus({})",
                XS[i]
            );
        }
        assert!(clamp(f32x8::splat(f32::NAN), f32x8::ZERO, f32x8::ONE).to_array()[0].is_nan());
    }
}
