//! `wide`'s `exp`, `exp_m1` and `tanh` of `f32x8`, operation for operation, over any
//! [`Lane`] type, so that the register types run them on the whole register and the one-lane
//! `f32` on its value, and all give `wide`'s bits.
//!
//! Each function follows `wide` 1.7's `f32x8` code: the same constants, the same operations in
//! the same order, the same `mul_add` (fused where the build enables FMA, as `wide`'s) and the
//! same rounding of `round_ties_even` (SSE4.1's where the build enables it, else SSE2's
//! conversion through integers, as `wide`'s). Its early returns (every lane underflowing, or
//! saturating) give the values the full computation gives, so a register of sixteen lanes may
//! skip them where two halves of eight would each take them. The lane test compares every
//! function with `wide` on awkward values.

use super::Lane;

/// `1/2!` to `1/7!`: the Taylor coefficients of `wide`'s exponential polynomial.
const P: [f32; 6] = [
    1.0 / 2.0,
    1.0 / 6.0,
    1.0 / 24.0,
    1.0 / 120.0,
    1.0 / 720.0,
    1.0 / 5040.0,
];
/// `ln 2` split in two: the high part, 0.693359375 (355/512), exact in few bits.
const LN2_HI: f32 = 0.693_359_4;
/// The rest of `ln 2`.
const LN2_LO: f32 = -2.121_944_4e-4;
/// Above this `e^x` overflows.
const MAX_X: f32 = 88.723;
/// Below this `e^x` underflows to zero.
const MIN_X: f32 = -103.63;
/// The largest exponent of a normal `f32`.
const MAX_R: f32 = 127.0;
/// `wide`'s NaN for results of NaN.
const NAN_POW: u32 = 0x7FC0_0101;

/// `wide`'s `polynomial_5!`: `c3 x + c2`, `c5 x + c4` and `c1 x + c0`, joined by `x²` and `x⁴`.
#[inline(always)]
fn polynomial_5<L: Lane>(x: L) -> L {
    let c = P.map(L::splat);
    let x2 = x * x;
    let x4 = x2 * x2;
    c[3].mul_add(x, c[2])
        .mul_add(x2, c[5].mul_add(x, c[4]).mul_add(x4, c[1].mul_add(x, c[0])))
}

/// `wide`'s `vm_pow2n`: `2^n` for a whole `n`, from its bits, subnormal below `-126`.
#[inline(always)]
fn pow2n<L: Lane>(n: L) -> L {
    let std_result = (n + L::splat(127.0 + 8_388_608.0)).shl23();
    let is_sub = n.simd_lt(L::splat(-126.0));
    if !is_sub.any() {
        return std_result;
    }
    let valid = n.simd_ge(L::splat(-149.0));
    let shift = valid.select(n + L::splat(149.0), L::ZERO);
    let sub_result = valid.select(L::one_shl(shift), L::ZERO);
    is_sub.select(sub_result, std_result)
}

/// What `exp` and `exp_m1` share: `r`, the whole power of two, and `e^x` before the special
/// values.
struct Reduced<L> {
    r: L,
    z: L,
    value: L,
}

/// `(r, z)` with `e^x = 2^r (1 + z)`: `r` the whole power of two, `z` the polynomial of the
/// reduced argument.
#[inline(always)]
fn power_and_polynomial<L: Lane>(x: L) -> (L, L) {
    let r = (x * L::splat(core::f32::consts::LOG2_E)).round_ties_even();
    let y = r.mul_neg_add(L::splat(LN2_HI), x);
    let y = r.mul_neg_add(L::splat(LN2_LO), y);
    (r, polynomial_5(y).mul_add(y * y, y))
}

/// `2^r (1 + z)`, the power split in two where it is above the largest exponent.
#[inline(always)]
fn scaled<L: Lane>(r: L, z: L) -> L {
    let max_r = L::splat(MAX_R);
    let big = r.simd_gt(max_r);
    let r_safe = big.select(max_r, r);
    let excess = big.select(r - max_r, L::ZERO);
    let scale = pow2n(excess);
    (z + L::ONE) * scale * pow2n(r_safe)
}

/// `e^x` as `2^r (1 + z)`, `z` the polynomial of the reduced argument.
#[inline(always)]
fn reduce<L: Lane>(x: L) -> Reduced<L> {
    let (r, z) = power_and_polynomial(x);
    Reduced {
        r,
        z,
        value: scaled(r, z),
    }
}

/// `wide`'s `f32x8::exp`, for the lane types of x86 (one `f32` runs [`exp_of_one`]).
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
#[inline(always)]
pub(super) fn exp<L: Lane>(x: L) -> L {
    let finite = x.is_finite();
    let neg_underflow = x.simd_lt(L::splat(MIN_X)).and(finite);
    if neg_underflow.all() {
        return L::ZERO;
    }
    let value = reduce(x).value;
    let nan = x.is_nan();
    let inf = L::from_bits(f32::INFINITY.to_bits());
    let mut result = nan.select(L::from_bits(NAN_POW), value);
    result = x.simd_gt(L::splat(MAX_X)).and(finite).select(inf, result);
    result = neg_underflow.select(L::ZERO, result);
    let infinite = finite.not().and(nan.not());
    let negative = x.is_sign_negative();
    result = infinite.and(negative.not()).select(inf, result);
    infinite.and(negative).select(L::ZERO, result)
}

/// [`exp`] of one value, its special values by branches: NaN gives `wide`'s NaN, above
/// [`MAX_X`] (`+inf` included) `+inf`, below [`MIN_X`] (`-inf` included) zero, as `exp`'s
/// selects give them; the rest takes the same finite path, without the split of the power
/// where it fits an exponent (where `scaled` multiplies by `2^0`, exactly).
#[inline(always)]
pub(super) fn exp_of_one(x: f32) -> f32 {
    if x.is_nan() {
        return f32::from_bits(NAN_POW);
    }
    if x > MAX_X {
        return f32::INFINITY;
    }
    if x < MIN_X {
        return 0.0;
    }
    let (r, z) = power_and_polynomial(x);
    if r > MAX_R {
        return scaled(r, z);
    }
    (z + 1.0) * pow2n(r)
}

/// `wide`'s `f32x8::exp_m1`.
#[inline(always)]
pub(super) fn exp_m1<L: Lane>(x: L) -> L {
    let minus_one = L::splat(-1.0);
    if x.simd_lt(L::splat(-17.329)).all() {
        return minus_one;
    }
    let Reduced { r, z, value } = reduce(x);
    let z = r.simd_eq(L::ZERO).select(z, value - L::ONE);
    let nan = x.is_nan();
    let finite = x.is_finite();
    let inf = L::from_bits(f32::INFINITY.to_bits());
    let mut result = nan.select(L::from_bits(NAN_POW), z);
    result = x.simd_gt(L::splat(MAX_X)).and(finite).select(inf, result);
    result = x
        .simd_lt(L::splat(MIN_X))
        .and(finite)
        .select(-L::ONE, result);
    let infinite = finite.not().and(nan.not());
    let negative = x.is_sign_negative();
    result = infinite.and(negative.not()).select(inf, result);
    result = infinite.and(negative).select(-L::ONE, result);
    x.simd_eq(L::ZERO).select(x, result)
}

/// `self` with its sign flipped where `sign` is negative (`wide`'s `flip_signs`).
#[inline(always)]
fn flip_signs<L: Lane>(x: L, sign: L) -> L {
    x.xor(sign.and(L::splat(-0.0)))
}

/// `wide`'s `f32x8::tanh`.
#[inline(always)]
pub(super) fn tanh<L: Lane>(x: L) -> L {
    let a = x.abs();
    let large = a.simd_gt(L::splat(9.011));
    let saturated = flip_signs(L::ONE, x);
    if large.all() {
        return saturated;
    }
    let small = a.simd_lt(L::splat(2e-4));
    let t = exp_m1(L::splat(-2.0) * a);
    let exp_based = flip_signs(-t / (t + L::splat(2.0)), x);
    large.select(saturated, small.select(x, exp_based))
}
