//! Scalar math that works without `std`: the one place where `sqrt`, `exp`, `powf` and friends
//! come from (`libm`), so that the core and generated code behave the same with and without std.
//!
//! ```
//! use fusegraph_runtime::math;
//! assert_eq!(math::sqrt(9.0_f32), 3.0);
//! assert_eq!(math::powf(2.0_f64, 10.0), 1024.0);
//! ```

/// Scalar floating-point operations used by generated step code, for `f32` and `f64`.
pub trait Float:
    Copy
    + PartialOrd
    + core::ops::Add<Output = Self>
    + core::ops::Sub<Output = Self>
    + core::ops::Mul<Output = Self>
    + core::ops::Div<Output = Self>
    + core::ops::Neg<Output = Self>
{
    /// `0`.
    const ZERO: Self;
    /// `1`.
    const ONE: Self;
    /// Absolute value.
    fn abs_(self) -> Self;
    /// Magnitude of `self` with the sign of `sign`.
    fn copysign_(self, sign: Self) -> Self;
    /// Square root.
    fn sqrt_(self) -> Self;
    /// `e^self`.
    fn exp_(self) -> Self;
    /// Natural logarithm.
    fn ln_(self) -> Self;
    /// `self^e` with a floating-point exponent.
    fn powf_(self, e: Self) -> Self;
    /// Hyperbolic tangent.
    fn tanh_(self) -> Self;
    /// Round towards negative infinity.
    fn floor_(self) -> Self;
    /// Cosine.
    fn cos_(self) -> Self;
    /// `e^self - 1`, accurate near 0.
    fn expm1_(self) -> Self;
    /// `ln(1 + self)`, accurate near 0.
    fn ln_1p_(self) -> Self;
    /// The error function.
    fn erf_(self) -> Self;
}

macro_rules! float_impl {
    ($t:ty, $abs:path, $copysign:path, $sqrt:path, $exp:path, $ln:path, $pow:path, $tanh:path, $floor:path, $cos:path, $expm1:path, $ln_1p:path, $erf:path) => {
        impl Float for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            #[inline]
            fn abs_(self) -> Self {
                $abs(self)
            }
            #[inline]
            fn copysign_(self, sign: Self) -> Self {
                $copysign(self, sign)
            }
            #[inline]
            fn sqrt_(self) -> Self {
                $sqrt(self)
            }
            #[inline]
            fn exp_(self) -> Self {
                $exp(self)
            }
            #[inline]
            fn ln_(self) -> Self {
                $ln(self)
            }
            #[inline]
            fn powf_(self, e: Self) -> Self {
                $pow(self, e)
            }
            #[inline]
            fn tanh_(self) -> Self {
                $tanh(self)
            }
            #[inline]
            fn floor_(self) -> Self {
                $floor(self)
            }
            #[inline]
            fn cos_(self) -> Self {
                $cos(self)
            }
            #[inline]
            fn expm1_(self) -> Self {
                $expm1(self)
            }
            #[inline]
            fn ln_1p_(self) -> Self {
                $ln_1p(self)
            }
            #[inline]
            fn erf_(self) -> Self {
                $erf(self)
            }
        }
    };
}

float_impl!(
    f32,
    libm::fabsf,
    libm::copysignf,
    libm::sqrtf,
    libm::expf,
    libm::logf,
    libm::powf,
    libm::tanhf,
    libm::floorf,
    libm::cosf,
    libm::expm1f,
    libm::log1pf,
    crate::lane::erf::<f32>
);
float_impl!(
    f64,
    libm::fabs,
    libm::copysign,
    libm::sqrt,
    libm::exp,
    libm::log,
    libm::pow,
    libm::tanh,
    libm::floor,
    libm::cos,
    libm::expm1,
    libm::log1p,
    libm::erf
);

/// Square root.
#[inline]
pub fn sqrt<T: Float>(x: T) -> T {
    x.sqrt_()
}
/// `e^x`.
#[inline]
pub fn exp<T: Float>(x: T) -> T {
    x.exp_()
}
/// `e^x - 1`, accurate near 0.
#[inline]
pub fn expm1<T: Float>(x: T) -> T {
    x.expm1_()
}
/// `ln(1 + x)`, accurate near 0.
#[inline]
pub fn ln_1p<T: Float>(x: T) -> T {
    x.ln_1p_()
}
/// The error function, `2/sqrt(pi) * integral of e^(-t^2) from 0 to x`: `libm`'s for `f64`;
/// for `f32`, the same bits as [`lane::erf`](crate::lane::erf) gives each lane.
#[inline]
pub fn erf<T: Float>(x: T) -> T {
    x.erf_()
}
/// Natural logarithm.
#[inline]
pub fn ln<T: Float>(x: T) -> T {
    x.ln_()
}
/// `x^e`; also used for `powi`, since repeated multiplication loses accuracy that the
/// frameworks' `pow` keeps (`1 - beta2^t` is sensitive to it).
#[inline]
pub fn powf<T: Float>(x: T, e: T) -> T {
    x.powf_(e)
}
/// Hyperbolic tangent.
#[inline]
pub fn tanh<T: Float>(x: T) -> T {
    x.tanh_()
}
/// Round towards negative infinity.
#[inline]
pub fn floor<T: Float>(x: T) -> T {
    x.floor_()
}
/// Cosine.
#[inline]
pub fn cos<T: Float>(x: T) -> T {
    x.cos_()
}

fn is_nan<T: Float>(x: T) -> bool {
    x.partial_cmp(&x).is_none()
}

/// Absolute value.
#[inline]
pub fn abs<T: Float>(x: T) -> T {
    x.abs_()
}
/// `1` for `+0.0` and positive numbers, `-1` for `-0.0` and negative ones, NaN for NaN (as
/// Rust's `f32::signum`).
#[inline]
pub fn signum<T: Float>(x: T) -> T {
    if is_nan(x) {
        x
    } else {
        T::ONE.copysign_(x)
    }
}
/// `1`, `-1`, or `0` for zero (PyTorch's and NumPy's `sign`).
#[inline]
pub fn sign<T: Float>(x: T) -> T {
    if x > T::ZERO {
        T::ONE
    } else if x < T::ZERO {
        -T::ONE
    } else {
        T::ZERO
    }
}
/// The smaller of two numbers; a NaN operand gives the other one (as Rust's `f32::min`).
#[inline]
pub fn min<T: Float>(a: T, b: T) -> T {
    if b < a || is_nan(a) {
        b
    } else {
        a
    }
}
/// The larger of two numbers; a NaN operand gives the other one (as Rust's `f32::max`).
#[inline]
pub fn max<T: Float>(a: T, b: T) -> T {
    if b > a || is_nan(a) {
        b
    } else {
        a
    }
}
/// `x` limited to `[lo, hi]`; NaN stays NaN.
#[inline]
pub fn clamp<T: Float>(x: T, lo: T, hi: T) -> T {
    if x < lo {
        lo
    } else if x > hi {
        hi
    } else {
        x
    }
}
/// The logistic function `1 / (1 + e^-x)`.
#[inline]
pub fn sigmoid<T: Float>(x: T) -> T {
    T::ONE / (T::ONE + exp(-x))
}

/// Widens an `f32` hyper-parameter to the `f64` a user meant by it: the `f64` nearest to the
/// shortest decimal that round-trips the `f32`. `0.999_f32` becomes `0.999_f64`, as the same
/// literal typed into Python would, where `f64::from` gives `0.99900001287...`. PyTorch computes
/// its per-step scalars from such Python floats.
///
/// ```
/// assert_eq!(fusegraph_runtime::math::decimal_f64(0.999), 0.999_f64);
/// assert_eq!(fusegraph_runtime::math::decimal_f64(1e-8), 1e-8_f64);
/// ```
pub fn decimal_f64(x: f32) -> f64 {
    match shortest_decimal(x) {
        Some(w) => w,
        None => formatted_decimal(x),
    }
}

/// `10^p` for `p <= 22`: the powers of ten that `f64` holds exactly.
const EXACT_POWERS_OF_TEN: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// [`decimal_f64`] in integers, without formatting, where the answer is quick to prove; `None`
/// where it is not (subnormals, `|x|` outside `[2^-41, 2^24)`, a shortest decimal with more
/// than 22 digits after the point, or two shortest decimals to choose from), and for zeros and
/// non-finite values.
///
/// The values that round to `x = M * 2^E` lie between the midpoints to its neighbours, `lo`
/// and `hi` (included when `M` is even: ties go to even). Trying `p = 0, 1, 2...` digits after
/// the point, the first `p` at which one integer `d` has `d / 10^p` between them gives the
/// shortest decimal: had a shorter one `D / 10^q` existed, it would have been found at `q <
/// p`, or the power of ten between it and `d / 10^p` would be a second candidate at `p`. The
/// comparisons `d * 2^(2 - E)` against `4 lo` and `4 hi` times `10^p` are exact in `u128`, and
/// `d / 10^p`, with `d < 2^53` and `10^p` exact in `f64`, is one correctly rounded division.
fn shortest_decimal(x: f32) -> Option<f64> {
    let bits = x.to_bits() & 0x7FFF_FFFF;
    let (biased, fraction) = (bits >> 23, bits & 0x7F_FFFF);
    if biased == 0 || biased == 0xFF {
        return None;
    }
    let m = u128::from(fraction | 1 << 23);
    let e = biased as i32 - 150;
    if !(-64..=0).contains(&e) {
        return None;
    }
    // Scaled by 2^shift, so that x is 4m and its neighbours' midpoints are integers.
    let shift = (2 - e) as u32;
    let below = if fraction == 0 && biased > 1 { 1 } else { 2 };
    let (lo, hi) = (4 * m - below, 4 * m + 2);
    let inclusive = m % 2 == 0;
    let mut ten_to_p = 1u128;
    for &power in &EXACT_POWERS_OF_TEN {
        let (l, h) = (lo * ten_to_p, hi * ten_to_p);
        let exact = |v: u128| v & ((1u128 << shift) - 1) == 0;
        let first = if inclusive && exact(l) {
            l >> shift
        } else {
            (l >> shift) + 1
        };
        let last = if inclusive || !exact(h) {
            h >> shift
        } else {
            (h >> shift) - 1
        };
        if first == last && first < 1 << 53 {
            let w = first as f64 / power;
            return Some(if x.is_sign_negative() { -w } else { w });
        }
        if first < last {
            return None;
        }
        ten_to_p *= 10;
    }
    None
}

/// [`decimal_f64`] by writing `x` in its shortest round-trip form and reading that back.
fn formatted_decimal(x: f32) -> f64 {
    use core::fmt::Write;
    struct Buf {
        bytes: [u8; 64],
        len: usize,
    }
    impl Write for Buf {
        fn write_str(&mut self, s: &str) -> core::fmt::Result {
            let end = self.len + s.len();
            if end > self.bytes.len() {
                return Err(core::fmt::Error);
            }
            self.bytes[self.len..end].copy_from_slice(s.as_bytes());
            self.len = end;
            Ok(())
        }
    }
    if !x.is_finite() {
        return f64::from(x);
    }
    let mut buf = Buf {
        bytes: [0; 64],
        len: 0,
    };
    // `{:e}` is the shortest round-trip form and at most ~16 bytes for any finite f32.
    if write!(buf, "{x:e}").is_err() {
        return f64::from(x);
    }
    core::str::from_utf8(&buf.bytes[..buf.len])
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(f64::from(x))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_widening_keeps_the_typed_value_and_round_trips() {
        for &x in &[
            0.9_f32, 0.999, 1e-7, 1e-8, 0.004, 3.0e38, -2.5e-40, 0.0, -0.0,
        ] {
            let w = decimal_f64(x);
            assert_eq!(w as f32, x, "{x} must round-trip");
        }
        assert_eq!(decimal_f64(0.9), 0.9_f64);
        assert_ne!(decimal_f64(0.9), f64::from(0.9_f32));
        assert!(decimal_f64(f32::NAN).is_nan());
        assert_eq!(decimal_f64(f32::INFINITY), f64::INFINITY);
    }

    /// Checks the integer path against the formatted one on `x`; returns whether it answered.
    fn same_as_formatted(x: f32) -> bool {
        let Some(w) = shortest_decimal(x) else {
            return false;
        };
        assert_eq!(w.to_bits(), formatted_decimal(x).to_bits(), "{x:e}");
        true
    }

    #[test]
    fn the_integer_path_gives_the_formatted_decimal() {
        // Decimals of one to nine digits at every scale it covers, as hyper-parameters are typed.
        let mut answered = 0;
        for digits in [
            1u32,
            7,
            9,
            12,
            25,
            99,
            125,
            999,
            1234,
            65_537,
            3_333_333,
            123_456_789,
        ] {
            for p in 0..=22 {
                let x = (f64::from(digits) / 10f64.powi(p)) as f32;
                for y in [
                    x,
                    -x,
                    f32::from_bits(x.to_bits() + 1),
                    f32::from_bits(x.to_bits() - 1),
                ] {
                    answered += usize::from(same_as_formatted(y));
                }
            }
        }
        // A sweep over the bit patterns of the positive finite values, powers of two included.
        for bits in (0..0x7F80_0000u32)
            .step_by(9_973)
            .chain((1..255).map(|e| e << 23))
        {
            answered += usize::from(same_as_formatted(f32::from_bits(bits)));
        }
        assert!(
            answered > 20_000,
            "the integer path answered {answered} times"
        );
        for x in [
            0.9_f32, 0.999, 0.99, 0.95, 1e-7, 1e-8, 1e-3, 3e-4, 0.5, 1.0, 2.0, 1e6,
        ] {
            assert!(
                shortest_decimal(x).is_some(),
                "{x} should not need formatting"
            );
        }
    }

    #[test]
    fn powf_is_accurate_where_repeated_multiplication_is_not() {
        let b = 0.999_f32;
        let exact = (f64::from(b)).powi(12);
        let err = (f64::from(powf(b, 12.0)) - exact).abs();
        assert!(err <= f64::from(f32::EPSILON) * exact, "{err}");
    }
}
