//! Scalar math that works without `std`: the one place where `sqrt`, `exp`, `powf` and friends
//! come from (`libm`), so that the core and generated code behave the same with and without std.
//!
//! ```
//! use fusegraph_runtime::math;
//! assert_eq!(math::sqrt(9.0_f32), 3.0);
//! assert_eq!(math::powf(2.0_f64, 10.0), 1024.0);
//! ```

mod decimal;

pub use decimal::{decimal_f64, Decimal};

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn powf_is_accurate_where_repeated_multiplication_is_not() {
        let b = 0.999_f32;
        let exact = (f64::from(b)).powi(12);
        let err = (f64::from(powf(b, 12.0)) - exact).abs();
        assert!(err <= f64::from(f32::EPSILON) * exact, "{err}");
    }
}
