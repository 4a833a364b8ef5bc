//! [`Lane`] on one `f32`: what targets without SIMD run, and the reference every other lane
//! type is tested against, bit for bit.
//!
//! The exact operations (`+ - * /`, negation, `abs`, the comparisons, `select` and the bit
//! operations) are Rust's scalar ones, IEEE single precision, with masks of all ones or all
//! zeros as the other lane types give them. `min`, `max` and `round_ties_even` are scalar code
//! with `wide`'s rules (which operand a NaN or an equal pair gives; the build's rounding), and
//! `exp` branches on its special values before the generic code's finite path: on one value
//! the masks and selects that keep a register's lanes apart cost more than the value itself
//! (a microcontroller runs these in the loss and the activations). `exp_m1`, `tanh` and `erf`
//! run the runtime's generic code; everything else (`sqrt`, `ln`, `powf_simd`, `mul_add`, ...)
//! runs `wide`'s code on the value in every lane of an [`f32x8`] and keeps the first, so it
//! gives `wide`'s bits by construction.

use super::{erf, exp, Lane, MulAdd};
use wide::f32x8;

/// The sign bit.
const SIGN: u32 = 0x8000_0000;

/// `2^23`: from here up every `f32` is a whole number.
const WHOLE: f32 = 8_388_608.0;

/// Whether `round_ties_even` rounds as SSE2's conversion through integers (what `wide` runs on
/// x86 without SSE4.1): a zero result is `+0.0` whatever the sign of the value.
const ROUNDS_THROUGH_INTEGERS: bool = cfg!(all(
    any(target_arch = "x86", target_arch = "x86_64"),
    target_feature = "sse2",
    not(target_feature = "sse4.1")
));

/// `x` rounded to a whole number, ties to even, by adding and subtracting `2^23` to its
/// magnitude (exact below `2^23`; above, NaN and infinities stay themselves), its sign put back
/// (as `wide`'s software rounding, SSE4.1's and NEON's) or, with `unsigned_zero`, dropped from
/// a zero (as `wide`'s SSE2 rounding through integers).
#[inline(always)]
pub(super) fn round_ties_even(x: f32, unsigned_zero: bool) -> f32 {
    let magnitude = f32::from_bits(x.to_bits() & !SIGN);
    if magnitude < WHOLE {
        let rounded = (magnitude + WHOLE) - WHOLE;
        if unsigned_zero && rounded == 0.0 {
            return 0.0;
        }
        return f32::from_bits(rounded.to_bits() | (x.to_bits() & SIGN));
    }
    x
}

/// A mask of all ones where `holds`, all zeros elsewhere: `0 - holds` in an integer register,
/// where a `select` after it works (a choice between two floating-point constants would be
/// moved there first).
#[inline(always)]
fn mask(holds: bool) -> f32 {
    f32::from_bits(u32::from(holds).wrapping_neg())
}

/// Lane methods that run `wide`'s code on the value in every lane and keep the first.
macro_rules! through_wide {
    (unary: $($unary:ident),*; binary: $($binary:ident),*; ternary: $($ternary:ident),*) => {
        $(
            #[inline(always)]
            fn $unary(self) -> Self {
                f32x8::splat(self).$unary().as_array()[0]
            }
        )*
        $(
            #[inline(always)]
            fn $binary(self, other: Self) -> Self {
                f32x8::splat(self).$binary(f32x8::splat(other)).as_array()[0]
            }
        )*
        $(
            #[inline(always)]
            fn $ternary(self, a: Self, b: Self) -> Self {
                f32x8::splat(self)
                    .$ternary(f32x8::splat(a), f32x8::splat(b))
                    .as_array()[0]
            }
        )*
    };
}

impl Lane for f32 {
    const LANES: usize = 1;
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
    #[inline(always)]
    fn splat(v: f32) -> Self {
        v
    }
    #[inline(always)]
    fn load(s: &[f32]) -> Self {
        s[0]
    }
    #[inline(always)]
    fn store(self, s: &mut [f32]) {
        s[0] = self;
    }
    #[inline(always)]
    fn abs(self) -> Self {
        f32::from_bits(self.to_bits() & !SIGN)
    }
    through_wide!(
        unary: sqrt, signum, ln, ln_1p, cosh, sinh;
        binary: powf_simd;
        ternary: mul_add, mul_neg_add
    );
    /// `wide`'s `max`: `other` if `self > other` does not hold, unless `other` is NaN (so an
    /// equal pair, `±0.0` included, gives `other`, and a NaN `self` gives `other`).
    #[inline(always)]
    fn max(self, other: Self) -> Self {
        if self > other || other.is_nan() {
            self
        } else {
            other
        }
    }
    /// `wide`'s `min`, the mirror of [`max`](Lane::max).
    #[inline(always)]
    fn min(self, other: Self) -> Self {
        if self < other || other.is_nan() {
            self
        } else {
            other
        }
    }
    #[inline(always)]
    fn round_ties_even(self) -> Self {
        round_ties_even(self, ROUNDS_THROUGH_INTEGERS)
    }
    exponentials!(exp::exp_of_one);
    #[inline(always)]
    fn simd_gt(self, other: Self) -> Self {
        mask(self > other)
    }
    #[inline(always)]
    fn simd_lt(self, other: Self) -> Self {
        mask(self < other)
    }
    #[inline(always)]
    fn simd_ge(self, other: Self) -> Self {
        mask(self >= other)
    }
    #[inline(always)]
    fn simd_le(self, other: Self) -> Self {
        mask(self <= other)
    }
    #[inline(always)]
    fn simd_eq(self, other: Self) -> Self {
        mask(self == other)
    }
    #[inline(always)]
    fn simd_ne(self, other: Self) -> Self {
        mask(self != other)
    }
    #[inline(always)]
    fn select(self, if_true: Self, if_false: Self) -> Self {
        let m = self.to_bits();
        f32::from_bits((m & if_true.to_bits()) | (!m & if_false.to_bits()))
    }
    #[inline(always)]
    fn and(self, other: Self) -> Self {
        f32::from_bits(self.to_bits() & other.to_bits())
    }
    #[inline(always)]
    fn or(self, other: Self) -> Self {
        f32::from_bits(self.to_bits() | other.to_bits())
    }
    #[inline(always)]
    fn xor(self, other: Self) -> Self {
        f32::from_bits(self.to_bits() ^ other.to_bits())
    }
    #[inline(always)]
    fn not(self) -> Self {
        f32::from_bits(!self.to_bits())
    }
    #[inline(always)]
    fn all(self) -> bool {
        self.to_bits() & SIGN != 0
    }
    #[inline(always)]
    fn any(self) -> bool {
        self.to_bits() & SIGN != 0
    }
    #[inline(always)]
    fn is_nan(self) -> Self {
        mask(f32::is_nan(self))
    }
    #[inline(always)]
    fn is_finite(self) -> Self {
        mask(self.to_bits() & 0x7F80_0000 != 0x7F80_0000)
    }
    #[inline(always)]
    fn is_sign_negative(self) -> Self {
        mask(self.to_bits() & SIGN != 0)
    }
    #[inline(always)]
    fn shl23(self) -> Self {
        f32::from_bits(self.to_bits() << 23)
    }
    #[inline(always)]
    fn one_shl(shift: Self) -> Self {
        // Truncation toward zero, as `wide`'s conversion; other lanes may give any value.
        f32::from_bits(1_u32.wrapping_shl(shift as i32 as u32))
    }
    #[inline(always)]
    fn from_bits(bits: u32) -> Self {
        f32::from_bits(bits)
    }
}

/// The GEMM's multiply-add on one `f32`: [`Lane::mul_add`], `wide`'s rounding (once where the
/// build enables FMA, twice elsewhere), or with `--cfg fusegraph_core_fma` core's `mul_add`,
/// rounded once (`vfma.f32` on a Cortex-M4F, M7 or M33; a toolchain that allows the unstable
/// `core_float_math`, such as `RUSTC_BOOTSTRAP=1`). Stable Rust has no fused multiply-add
/// in `no_std` code, and its inline assembly cannot name the single-precision registers of a
/// Cortex-M4F (they need `vfp2`, which implies double precision).
impl MulAdd for f32 {
    #[inline(always)]
    fn mul_add_native(self, b: Self, c: Self) -> Self {
        #[cfg(fusegraph_core_fma)]
        {
            core::f32::math::mul_add(self, b, c)
        }
        #[cfg(not(fusegraph_core_fma))]
        {
            Lane::mul_add(self, b, c)
        }
    }
}
