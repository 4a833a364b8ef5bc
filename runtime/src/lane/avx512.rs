//! [`Lane`] on 512-bit AVX-512F registers: sixteen lanes, for x86_64 CPUs that have them,
//! whatever the build's target features.
//!
//! The exact operations (`+ - * /`, `sqrt`, negation, `abs`, comparisons, `select`) are AVX-512F
//! instructions with the semantics of `wide`'s code: IEEE single precision, `-x` and `abs` as
//! sign-bit operations, the comparisons' NaN rules (a comparison's mask register widened to
//! lanes of all ones or all zeros), and a bitwise select. Everything else runs `wide`'s code on
//! each half as an [`f32x8`] (the same 64 bytes, in the same lane order), so every lane type
//! gives the same bits.
//!
//! # Safety
//!
//! [`Avx512`] calls `core::arch` intrinsics that need AVX-512F: its values exist only inside
//! [`run`], which its caller enters after checking the CPU. Outside the lane module only the GEMM
//! names the type, in its kernel entry points, which check the CPU the same way.

use super::{erf, exp};
use super::{Lane, MulAdd, OnLanes};
#[cfg(target_arch = "x86")]
use core::arch::x86::*;
#[cfg(target_arch = "x86_64")]
use core::arch::x86_64::*;
use core::ops::{Add, AddAssign, Div, DivAssign, Mul, MulAssign, Neg, Sub, SubAssign};
use wide::f32x8;

/// Lanes of one register.
const WIDTH: usize = 16;

/// Runs `work` on [`Avx512`] lanes, compiled for AVX-512F.
///
/// # Safety
/// The CPU must have AVX-512F.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn run<W: OnLanes>(work: W) -> W::Output {
    work.run::<Avx512>()
}

/// Sixteen `f32` lanes in one AVX-512 register.
#[derive(Clone, Copy, Debug)]
#[repr(transparent)]
pub(crate) struct Avx512(__m512);

/// `v` in every lane, in a constant (a transmute: `[f32; 16]` and `__m512` are both 64 bytes of
/// `f32`s in lane order).
const fn splat_const(v: f32) -> Avx512 {
    // SAFETY: the same size, and any bits are valid in both.
    Avx512(unsafe { core::mem::transmute::<[f32; WIDTH], __m512>([v; WIDTH]) })
}

/// The mask of the first `min(n, 16)` lanes.
#[inline(always)]
fn first_lanes(n: usize) -> __mmask16 {
    if n >= WIDTH {
        __mmask16::MAX
    } else {
        (1 << n) - 1
    }
}

/// The sign bit of every lane.
const SIGN: Avx512 = splat_const(-0.0);

impl Avx512 {
    /// The two halves as `wide`'s vectors.
    #[inline(always)]
    fn halves(self) -> [f32x8; 2] {
        // SAFETY: both are 64 bytes of sixteen `f32`s in lane order; any bits are valid.
        unsafe { core::mem::transmute::<__m512, [f32x8; 2]>(self.0) }
    }

    /// Two of `wide`'s vectors in one register.
    #[inline(always)]
    fn from_halves(h: [f32x8; 2]) -> Self {
        // SAFETY: as in `halves`.
        Avx512(unsafe { core::mem::transmute::<[f32x8; 2], __m512>(h) })
    }

    /// `f` on each half.
    #[inline(always)]
    fn each_half(self, f: impl Fn(f32x8) -> f32x8) -> Self {
        Avx512::from_halves(self.halves().map(f))
    }

    /// `f` on each pair of halves of `self` and `other`.
    #[inline(always)]
    fn each_half_with(self, other: Self, f: impl Fn(f32x8, f32x8) -> f32x8) -> Self {
        let ([a0, a1], [b0, b1]) = (self.halves(), other.halves());
        Avx512::from_halves([f(a0, b0), f(a1, b1)])
    }

    /// The bits as integers.
    #[inline(always)]
    fn bits(self) -> __m512i {
        // SAFETY: see the module docs.
        unsafe { _mm512_castps_si512(self.0) }
    }

    /// Integer bits as lanes.
    #[inline(always)]
    fn from_int(x: __m512i) -> Self {
        // SAFETY: see the module docs.
        Avx512(unsafe { _mm512_castsi512_ps(x) })
    }

    /// A mask register widened to lanes of all ones or all zeros.
    #[inline(always)]
    fn widen(m: __mmask16) -> Self {
        // SAFETY: see the module docs.
        Avx512::from_int(unsafe { _mm512_maskz_mov_epi32(m, _mm512_set1_epi32(-1)) })
    }

    /// Lane-wise comparison with predicate `P` (one of `_CMP_*`), widened to a lane mask.
    #[inline(always)]
    fn cmp<const P: i32>(self, other: Self) -> Self {
        // SAFETY: see the module docs.
        Avx512::widen(unsafe { _mm512_cmp_ps_mask::<P>(self.0, other.0) })
    }

    /// The lanes whose sign bit is set, as a mask register.
    #[inline(always)]
    fn sign_mask(self) -> __mmask16 {
        // SAFETY: see the module docs.
        unsafe { _mm512_cmplt_epi32_mask(self.bits(), _mm512_setzero_si512()) }
    }
}

binary!(
    Avx512:
    Add add AddAssign add_assign _mm512_add_ps,
    Sub sub SubAssign sub_assign _mm512_sub_ps,
    Mul mul MulAssign mul_assign _mm512_mul_ps,
    Div div DivAssign div_assign _mm512_div_ps
);

impl Neg for Avx512 {
    type Output = Avx512;
    #[inline(always)]
    fn neg(self) -> Avx512 {
        // SAFETY: see the module docs.
        Avx512::from_int(unsafe { _mm512_xor_si512(self.bits(), SIGN.bits()) })
    }
}

/// Lane methods that run `wide`'s code on each half.
macro_rules! through_wide {
    (unary: $($unary:ident),*; binary: $($binary:ident),*) => {
        $(
            #[inline(always)]
            fn $unary(self) -> Self {
                self.each_half(f32x8::$unary)
            }
        )*
        $(
            #[inline(always)]
            fn $binary(self, other: Self) -> Self {
                self.each_half_with(other, f32x8::$binary)
            }
        )*
    };
}

impl Lane for Avx512 {
    const LANES: usize = WIDTH;
    const ZERO: Self = splat_const(0.0);
    const ONE: Self = splat_const(1.0);
    #[inline(always)]
    fn splat(v: f32) -> Self {
        // SAFETY: see the module docs.
        Avx512(unsafe { _mm512_set1_ps(v) })
    }
    #[inline(always)]
    fn load(s: &[f32]) -> Self {
        let s = &s[..WIDTH];
        // SAFETY: see the module docs; `s` holds the sixteen values read.
        Avx512(unsafe { _mm512_loadu_ps(s.as_ptr()) })
    }
    #[inline(always)]
    fn store(self, s: &mut [f32]) {
        let s = &mut s[..WIDTH];
        // SAFETY: see the module docs; `s` has room for the sixteen values written.
        unsafe { _mm512_storeu_ps(s.as_mut_ptr(), self.0) };
    }
    #[inline(always)]
    fn load_padded(s: &[f32]) -> Self {
        // SAFETY: see the module docs; the mask reads only the values `s` holds, and masked
        // lanes neither read memory nor fault.
        Avx512(unsafe { _mm512_maskz_loadu_ps(first_lanes(s.len()), s.as_ptr()) })
    }
    #[inline(always)]
    fn store_partial(self, s: &mut [f32]) {
        // SAFETY: as in `load_padded`, for the values written.
        unsafe { _mm512_mask_storeu_ps(s.as_mut_ptr(), first_lanes(s.len()), self.0) };
    }
    #[inline(always)]
    fn sqrt(self) -> Self {
        // SAFETY: see the module docs.
        Avx512(unsafe { _mm512_sqrt_ps(self.0) })
    }
    #[inline(always)]
    fn abs(self) -> Self {
        // SAFETY: see the module docs.
        Avx512::from_int(unsafe { _mm512_andnot_si512(SIGN.bits(), self.bits()) })
    }
    exponentials!(exp::exp);
    through_wide!(
        unary: signum, ln, ln_1p, cosh, sinh;
        binary: min, max, powf_simd
    );
    compare!();
    #[inline(always)]
    fn select(self, if_true: Self, if_false: Self) -> Self {
        // SAFETY: see the module docs.
        Avx512::from_int(unsafe {
            _mm512_or_si512(
                _mm512_and_si512(self.bits(), if_true.bits()),
                _mm512_andnot_si512(self.bits(), if_false.bits()),
            )
        })
    }
    #[inline(always)]
    fn or(self, other: Self) -> Self {
        // SAFETY: see the module docs.
        Avx512::from_int(unsafe { _mm512_or_si512(self.bits(), other.bits()) })
    }
    #[inline(always)]
    fn and(self, other: Self) -> Self {
        // SAFETY: see the module docs.
        Avx512::from_int(unsafe { _mm512_and_si512(self.bits(), other.bits()) })
    }
    #[inline(always)]
    fn xor(self, other: Self) -> Self {
        // SAFETY: see the module docs.
        Avx512::from_int(unsafe { _mm512_xor_si512(self.bits(), other.bits()) })
    }
    #[inline(always)]
    fn not(self) -> Self {
        self.xor(Avx512::from_bits(u32::MAX))
    }
    #[inline(always)]
    fn all(self) -> bool {
        self.sign_mask() == 0xFFFF
    }
    #[inline(always)]
    fn any(self) -> bool {
        self.sign_mask() != 0
    }
    #[inline(always)]
    fn round_ties_even(self) -> Self {
        if cfg!(target_feature = "sse4.1") {
            // SAFETY: see the module docs.
            return Avx512(unsafe { _mm512_roundscale_ps::<_MM_FROUND_TO_NEAREST_INT>(self.0) });
        }
        // SSE2's way: through integers, keeping the lanes that do not fit.
        // SAFETY: see the module docs.
        Avx512(unsafe {
            let i = _mm512_cvtps_epi32(self.0);
            let overflow = _mm512_cmpeq_epi32_mask(i, _mm512_set1_epi32(i32::MIN));
            _mm512_mask_blend_ps(overflow, _mm512_cvtepi32_ps(i), self.0)
        })
    }
    multiply_add!(Avx512, _mm512_fmadd_ps, _mm512_fnmadd_ps);
    #[inline(always)]
    fn is_nan(self) -> Self {
        self.cmp::<_CMP_UNORD_Q>(self)
    }
    #[inline(always)]
    fn is_finite(self) -> Self {
        // SAFETY: see the module docs.
        Avx512::widen(unsafe {
            let e = _mm512_set1_epi32(0xFF00_0000_u32 as i32);
            let shifted = _mm512_and_si512(_mm512_slli_epi32::<1>(self.bits()), e);
            _mm512_cmpneq_epi32_mask(shifted, e)
        })
    }
    #[inline(always)]
    fn is_sign_negative(self) -> Self {
        Avx512::widen(self.sign_mask())
    }
    #[inline(always)]
    fn shl23(self) -> Self {
        // SAFETY: see the module docs.
        Avx512::from_int(unsafe { _mm512_slli_epi32::<23>(self.bits()) })
    }
    #[inline(always)]
    fn one_shl(shift: Self) -> Self {
        // SAFETY: see the module docs.
        Avx512::from_int(unsafe {
            _mm512_sllv_epi32(_mm512_set1_epi32(1), _mm512_cvttps_epi32(shift.0))
        })
    }
    #[inline(always)]
    fn from_bits(bits: u32) -> Self {
        // SAFETY: see the module docs.
        Avx512::from_int(unsafe { _mm512_set1_epi32(bits as i32) })
    }
}

impl MulAdd for Avx512 {
    #[inline(always)]
    fn mul_add_native(self, b: Self, c: Self) -> Self {
        // SAFETY: see the module docs.
        Avx512(unsafe { _mm512_fmadd_ps(self.0, b.0, c.0) })
    }
}
