//! [`Lane`] on `wide`'s [`f32x8`], with the instructions the build enables (two SSE2 halves in
//! a default x86_64 build, NEON on aarch64): every method is `wide`'s own code of the same
//! name, so this type is what the other lane types match.

use super::Lane;
use crate::LANES;
use wide::bytemuck::cast;
use wide::{f32x8, i32x8};

/// `Lane` methods that call `wide`'s inherent methods of the same name.
macro_rules! inherent {
    (unary: $($unary:ident),*; binary: $($binary:ident),*; ternary: $($ternary:ident),*) => {
        $(
            #[inline(always)]
            fn $unary(self) -> Self {
                f32x8::$unary(self)
            }
        )*
        $(
            #[inline(always)]
            fn $binary(self, other: Self) -> Self {
                f32x8::$binary(self, other)
            }
        )*
        $(
            #[inline(always)]
            fn $ternary(self, a: Self, b: Self) -> Self {
                f32x8::$ternary(self, a, b)
            }
        )*
    };
}

impl Lane for f32x8 {
    const LANES: usize = LANES;
    const ZERO: Self = f32x8::ZERO;
    const ONE: Self = f32x8::ONE;
    #[inline(always)]
    fn splat(v: f32) -> Self {
        f32x8::splat(v)
    }
    #[inline(always)]
    fn load(s: &[f32]) -> Self {
        let a: [f32; LANES] = s[..LANES].try_into().expect("eight values");
        f32x8::from(a)
    }
    #[inline(always)]
    fn store(self, s: &mut [f32]) {
        s[..LANES].copy_from_slice(self.as_array());
    }
    #[inline(always)]
    fn erf(self) -> Self {
        super::erf::erf(self)
    }
    #[inline(always)]
    fn select(self, if_true: Self, if_false: Self) -> Self {
        f32x8::select(self, if_true, if_false)
    }
    inherent!(
        unary: sqrt, abs, signum, exp, exp_m1, ln, ln_1p, tanh, cosh, sinh, round_ties_even,
            is_nan, is_finite, is_sign_negative;
        binary: min, max, powf_simd, simd_gt, simd_lt, simd_ge, simd_le, simd_eq, simd_ne;
        ternary: mul_add, mul_neg_add
    );
    #[inline(always)]
    fn and(self, other: Self) -> Self {
        self & other
    }
    #[inline(always)]
    fn or(self, other: Self) -> Self {
        self | other
    }
    #[inline(always)]
    fn xor(self, other: Self) -> Self {
        self ^ other
    }
    #[inline(always)]
    fn not(self) -> Self {
        !self
    }
    #[inline(always)]
    fn all(self) -> bool {
        f32x8::all(self)
    }
    #[inline(always)]
    fn any(self) -> bool {
        f32x8::any(self)
    }
    #[inline(always)]
    fn shl23(self) -> Self {
        cast(cast::<f32x8, i32x8>(self) << 23)
    }
    #[inline(always)]
    fn one_shl(shift: Self) -> Self {
        cast(i32x8::ONE << shift.trunc_int())
    }
    #[inline(always)]
    fn from_bits(bits: u32) -> Self {
        cast(i32x8::splat(bits as i32))
    }
}
