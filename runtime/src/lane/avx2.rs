//! [`Lane`] on 256-bit AVX2 registers, for x86 CPUs that have AVX2 and FMA, whatever the
//! build's target features.
//!
//! The exact operations (`+ - * /`, `sqrt`, negation, `abs`, comparisons, `select`) are one AVX
//! instruction each, with the semantics of `wide`'s SSE2 code: IEEE single precision, `-x` and
//! `abs` as sign-bit operations, the comparisons' NaN rules of `_mm_cmp*_ps`, and a bitwise
//! select; the bit operations and `wide`'s exponentials ([`exp`]) run on the whole register.
//! Everything else converts to `wide`'s [`f32x8`] (the same 32 bytes, in the same lane
//! order) and runs its code, so both types give the same bits.
//!
//! # Safety
//!
//! [`Avx2`] calls `core::arch` intrinsics that need AVX2: its values exist only inside
//! [`run`], which its caller enters after checking the CPU. Outside the lane module only the GEMM
//! names the type, in its kernel entry points, which check the CPU the same way.

use super::{erf, exp};
use super::{Lane, MulAdd, OnLanes};
use crate::LANES;
#[cfg(target_arch = "x86")]
use core::arch::x86::*;
#[cfg(target_arch = "x86_64")]
use core::arch::x86_64::*;
use core::ops::{Add, AddAssign, Div, DivAssign, Mul, MulAssign, Neg, Sub, SubAssign};
use wide::f32x8;

/// Runs `work` on [`Avx2`] lanes, compiled for AVX2 and FMA.
///
/// # Safety
/// The CPU must have AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn run<W: OnLanes>(work: W) -> W::Output {
    work.run::<Avx2>()
}

/// Eight `f32` lanes in one AVX register.
#[derive(Clone, Copy, Debug)]
#[repr(transparent)]
pub(crate) struct Avx2(__m256);

/// `v` in every lane, in a constant (a transmute: `[f32; 8]` and `__m256` are both 32 bytes of
/// `f32`s in lane order).
const fn splat_const(v: f32) -> Avx2 {
    // SAFETY: `[f32; 8]` and `__m256` have the same size and any bits are valid in both.
    Avx2(unsafe { core::mem::transmute::<[f32; LANES], __m256>([v; LANES]) })
}

impl Avx2 {
    /// The same lanes as `wide`'s vector.
    #[inline(always)]
    fn wide(self) -> f32x8 {
        // SAFETY: both are 32 bytes of eight `f32`s in lane order; any bits are valid.
        unsafe { core::mem::transmute::<__m256, f32x8>(self.0) }
    }

    /// `wide`'s vector in a register.
    #[inline(always)]
    fn from_wide(x: f32x8) -> Self {
        // SAFETY: as in `wide`.
        Avx2(unsafe { core::mem::transmute::<f32x8, __m256>(x) })
    }

    /// Lane-wise comparison with predicate `P` (one of `_CMP_*`).
    #[inline(always)]
    fn cmp<const P: i32>(self, other: Self) -> Self {
        // SAFETY: see the module docs.
        Avx2(unsafe { _mm256_cmp_ps::<P>(self.0, other.0) })
    }
}

binary!(
    Avx2:
    Add add AddAssign add_assign _mm256_add_ps,
    Sub sub SubAssign sub_assign _mm256_sub_ps,
    Mul mul MulAssign mul_assign _mm256_mul_ps,
    Div div DivAssign div_assign _mm256_div_ps
);

impl Neg for Avx2 {
    type Output = Avx2;
    #[inline(always)]
    fn neg(self) -> Avx2 {
        // SAFETY: see the module docs.
        Avx2(unsafe { _mm256_xor_ps(self.0, splat_const(-0.0).0) })
    }
}

/// Lane methods that run `wide`'s code on the same bits.
macro_rules! through_wide {
    ($($method:ident),*) => {$(
        #[inline(always)]
        fn $method(self) -> Self {
            Avx2::from_wide(self.wide().$method())
        }
    )*};
}

impl Lane for Avx2 {
    const LANES: usize = LANES;
    const ZERO: Self = splat_const(0.0);
    const ONE: Self = splat_const(1.0);
    #[inline(always)]
    fn splat(v: f32) -> Self {
        // SAFETY: see the module docs.
        Avx2(unsafe { _mm256_set1_ps(v) })
    }
    #[inline(always)]
    fn load(s: &[f32]) -> Self {
        let s = &s[..LANES];
        // SAFETY: see the module docs; `s` holds the eight values read.
        Avx2(unsafe { _mm256_loadu_ps(s.as_ptr()) })
    }
    #[inline(always)]
    fn store(self, s: &mut [f32]) {
        let s = &mut s[..LANES];
        // SAFETY: see the module docs; `s` has room for the eight values written.
        unsafe { _mm256_storeu_ps(s.as_mut_ptr(), self.0) };
    }
    #[inline(always)]
    fn sqrt(self) -> Self {
        // SAFETY: see the module docs.
        Avx2(unsafe { _mm256_sqrt_ps(self.0) })
    }
    #[inline(always)]
    fn abs(self) -> Self {
        // SAFETY: see the module docs.
        Avx2(unsafe { _mm256_andnot_ps(splat_const(-0.0).0, self.0) })
    }
    through_wide!(signum, ln, ln_1p, cosh, sinh);
    exponentials!(exp::exp);
    #[inline(always)]
    fn min(self, other: Self) -> Self {
        Avx2::from_wide(self.wide().min(other.wide()))
    }
    #[inline(always)]
    fn max(self, other: Self) -> Self {
        Avx2::from_wide(self.wide().max(other.wide()))
    }
    #[inline(always)]
    fn powf_simd(self, n: Self) -> Self {
        Avx2::from_wide(self.wide().powf_simd(n.wide()))
    }
    compare!();
    #[inline(always)]
    fn select(self, if_true: Self, if_false: Self) -> Self {
        // SAFETY: see the module docs.
        Avx2(unsafe {
            _mm256_or_ps(
                _mm256_and_ps(self.0, if_true.0),
                _mm256_andnot_ps(self.0, if_false.0),
            )
        })
    }
    #[inline(always)]
    fn or(self, other: Self) -> Self {
        // SAFETY: see the module docs.
        Avx2(unsafe { _mm256_or_ps(self.0, other.0) })
    }
    #[inline(always)]
    fn and(self, other: Self) -> Self {
        // SAFETY: see the module docs.
        Avx2(unsafe { _mm256_and_ps(self.0, other.0) })
    }
    #[inline(always)]
    fn xor(self, other: Self) -> Self {
        // SAFETY: see the module docs.
        Avx2(unsafe { _mm256_xor_ps(self.0, other.0) })
    }
    #[inline(always)]
    fn not(self) -> Self {
        self.xor(Avx2::from_bits(u32::MAX))
    }
    #[inline(always)]
    fn all(self) -> bool {
        // SAFETY: see the module docs.
        unsafe { _mm256_movemask_ps(self.0) == 0xFF }
    }
    #[inline(always)]
    fn any(self) -> bool {
        // SAFETY: see the module docs.
        unsafe { _mm256_movemask_ps(self.0) != 0 }
    }
    #[inline(always)]
    fn round_ties_even(self) -> Self {
        if cfg!(target_feature = "sse4.1") {
            // SAFETY: see the module docs.
            return Avx2(unsafe { _mm256_round_ps::<_MM_FROUND_TO_NEAREST_INT>(self.0) });
        }
        // SSE2's way: through integers, keeping the lanes that do not fit.
        // SAFETY: see the module docs.
        let (whole, overflow) = unsafe {
            let i = _mm256_cvtps_epi32(self.0);
            let indefinite = _mm256_set1_epi32(i32::MIN);
            (_mm256_cvtepi32_ps(i), _mm256_cmpeq_epi32(i, indefinite))
        };
        Avx2::from_int(overflow).select(self, Avx2(whole))
    }
    multiply_add!(Avx2, _mm256_fmadd_ps, _mm256_fnmadd_ps);
    #[inline(always)]
    fn is_nan(self) -> Self {
        self.cmp::<_CMP_UNORD_Q>(self)
    }
    #[inline(always)]
    fn is_finite(self) -> Self {
        // SAFETY: see the module docs.
        let exponent_all_ones = unsafe {
            let e = _mm256_set1_epi32(0xFF00_0000_u32 as i32);
            let shifted = _mm256_and_si256(_mm256_slli_epi32::<1>(self.int()), e);
            _mm256_cmpeq_epi32(shifted, e)
        };
        Avx2::from_int(exponent_all_ones).not()
    }
    #[inline(always)]
    fn is_sign_negative(self) -> Self {
        // SAFETY: see the module docs.
        Avx2::from_int(unsafe {
            let sign = _mm256_set1_epi32(i32::MIN);
            _mm256_cmpeq_epi32(_mm256_and_si256(self.int(), sign), sign)
        })
    }
    #[inline(always)]
    fn shl23(self) -> Self {
        // SAFETY: see the module docs.
        Avx2::from_int(unsafe { _mm256_slli_epi32::<23>(self.int()) })
    }
    #[inline(always)]
    fn one_shl(shift: Self) -> Self {
        // SAFETY: see the module docs.
        Avx2::from_int(unsafe {
            _mm256_sllv_epi32(_mm256_set1_epi32(1), _mm256_cvttps_epi32(shift.0))
        })
    }
    #[inline(always)]
    fn from_bits(bits: u32) -> Self {
        // SAFETY: see the module docs.
        Avx2::from_int(unsafe { _mm256_set1_epi32(bits as i32) })
    }
}

impl Avx2 {
    /// Integer bits as lanes.
    #[inline(always)]
    fn from_int(x: __m256i) -> Self {
        // SAFETY: see the module docs.
        Avx2(unsafe { _mm256_castsi256_ps(x) })
    }

    /// The bits as integers.
    #[inline(always)]
    fn int(self) -> __m256i {
        // SAFETY: see the module docs.
        unsafe { _mm256_castps_si256(self.0) }
    }
}

impl MulAdd for Avx2 {
    #[inline(always)]
    fn mul_add_native(self, b: Self, c: Self) -> Self {
        // SAFETY: see the module docs (the CPU has FMA wherever an `Avx2` exists).
        Avx2(unsafe { _mm256_fmadd_ps(self.0, b.0, c.0) })
    }
}
