//! The SIMD floor of the runtime: what every SIMD pass, the matrix products' microkernels
//! included, computes on. Nothing here imports the kernels, the layers or the optimizers.
//!
//! - [`Capability`]: the one instruction set of the process (detected once, capped by
//!   `FUSEGRAPH_CPU_CAPABILITY`; the build's target features alone without `std`).
//! - [`Lane`]: `f32` lanes and everything lane code does with them: loads and stores (whole,
//!   zero-padded tails, partial stores), arithmetic, comparisons and selects, bit operations and
//!   the transcendental functions of generated code (`optimizer!`, `activation!`, `loss!`).
//!   `MulAdd` (crate-internal) adds the GEMM's multiply-add, rounded as the capability's
//!   instructions round it.
//! - [`OnLanes`] and [`dispatch`]: element-wise work written once over a `Lane` type, run on
//!   the lanes of [`Capability::active`]; [`pieces`] walks a slice a lane at a time.
//! - The lane functions that `wide` does not provide, each with the semantics of its scalar
//!   twin in [`math`](crate::math) (`softplus` has none: scalar code spells it out), and
//!   [`EightSums`], sums that add in `f32x8` lane order whatever the lane type.
//!
//! Four types implement [`Lane`]: one `f32` (what a target without SIMD runs, and the reference
//! of the tests), `wide`'s [`f32x8`] with the instructions the build enables (two SSE2 halves
//! in a default x86_64 build; the lanes of [`Capability::Portable`] where the target has SIMD),
//! and on x86 two register types that [`dispatch`] runs inside `#[target_feature]` entry
//! points: 256-bit AVX2 registers ([`Capability::Avx2Fma`]) and 512-bit AVX-512F registers,
//! sixteen lanes ([`Capability::Avx512`]).
//!
//! A pass walks a slice [`Lane::LANES`] values at a time; the last, shorter piece is padded
//! into a full lane ([`Lane::load_padded`]) and only its valid lanes are written back
//! ([`Lane::store_partial`]), so it runs the same lane code and a value's result never depends
//! on where it sits.
//!
//! # Bits
//!
//! Every lane type gives the same bits for every operation (a NaN may differ in sign or
//! payload, which Rust leaves to the compiler): `+ - * /`, `sqrt`, negation, `abs`, the
//! comparisons, `select` and the bit operations are exact (IEEE single precision, bitwise
//! selects); `exp`, `exp_m1` and `tanh` are ports of `wide`'s code, operation for operation,
//! and `erf` is the runtime's own, both written once over [`Lane`]; the other types run
//! everything else (`ln`, `powf_simd`, `min`, `max`, `mul_add`, ...) through `wide`'s code on
//! their bits. So every pass that runs through [`dispatch`] gives the same bits on every CPU:
//! the build alone decides (a build with FMA rounds `wide`'s transcendentals differently). Sums
//! across lanes keep one order on every lane type ([`EightSums`]).

/// Implements an operator trait and its assigning twin for a register type, one intrinsic
/// each (for the x86 lane types).
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
macro_rules! binary {
    ($ty:ident: $($op:ident $method:ident $assign:ident $assign_method:ident $intrinsic:ident),*) => {$(
        impl $op for $ty {
            type Output = $ty;
            #[inline(always)]
            fn $method(self, rhs: $ty) -> $ty {
                // SAFETY: see the module docs.
                $ty(unsafe { $intrinsic(self.0, rhs.0) })
            }
        }
        impl $assign for $ty {
            #[inline(always)]
            fn $assign_method(&mut self, rhs: $ty) {
                *self = $op::$method(*self, rhs);
            }
        }
    )*};
}

/// Comparison methods of a [`Lane`] implementation over its `cmp::<PREDICATE>`, each with the
/// predicate whose NaN rule matches `wide`'s (`ne` is unordered: true where either is NaN; the
/// others are ordered: false there).
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
macro_rules! compare {
    () => {
        compare!(
            simd_gt _CMP_GT_OQ, simd_lt _CMP_LT_OQ, simd_ge _CMP_GE_OQ,
            simd_le _CMP_LE_OQ, simd_eq _CMP_EQ_OQ, simd_ne _CMP_NEQ_UQ
        );
    };
    ($($method:ident $predicate:ident),*) => {$(
        #[inline(always)]
        fn $method(self, other: Self) -> Self {
            self.cmp::<$predicate>(other)
        }
    )*};
}

/// [`Lane`]'s `exp` through the given port of `wide`'s code in `exp` (`exp::exp`, or
/// `exp::exp_of_one` for one `f32`), `exp_m1` and `tanh` through the ports in `exp`, and `erf`
/// through the runtime's own in `erf` (for every lane type but `f32x8`, which runs `wide`'s
/// exponentials).
macro_rules! exponentials {
    ($exp:path) => {
        #[inline(always)]
        fn erf(self) -> Self {
            erf::erf(self)
        }
        #[inline(always)]
        fn exp(self) -> Self {
            $exp(self)
        }
        #[inline(always)]
        fn exp_m1(self) -> Self {
            exp::exp_m1(self)
        }
        #[inline(always)]
        fn tanh(self) -> Self {
            exp::tanh(self)
        }
    };
}

/// [`Lane`]'s `mul_add` and `mul_neg_add` for a register type: one rounding through the given
/// intrinsics where the build enables FMA (as `wide`'s), two otherwise.
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
macro_rules! multiply_add {
    ($ty:ident, $fmadd:ident, $fnmadd:ident) => {
        #[inline(always)]
        fn mul_add(self, a: Self, b: Self) -> Self {
            if cfg!(target_feature = "fma") {
                // SAFETY: see the module docs (the CPU has FMA where the build enables it).
                return $ty(unsafe { $fmadd(self.0, a.0, b.0) });
            }
            self * a + b
        }
        #[inline(always)]
        fn mul_neg_add(self, a: Self, b: Self) -> Self {
            if cfg!(target_feature = "fma") {
                // SAFETY: as in `mul_add`.
                return $ty(unsafe { $fnmadd(self.0, a.0, b.0) });
            }
            b - self * a
        }
    };
}

#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
mod avx2;
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
mod avx512;
mod capability;
mod erf;
mod exp;
mod one;
mod slices;
mod sums;
mod wide;

#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
pub(crate) use avx2::Avx2;
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
pub(crate) use avx512::Avx512;
pub use capability::{Capability, CAPABILITY_VAR};
pub(crate) use slices::{add_assign, add_rows, add_to_each_row, copy};
pub use sums::EightSums;

use ::wide::f32x8;
use core::ops::{Add, AddAssign, Div, DivAssign, Mul, MulAssign, Neg, Sub, SubAssign};

/// The most lanes of any [`Lane`] type.
pub const MAX_LANES: usize = 16;

/// `f32` lanes (one, eight or sixteen) and what lane code does with them: loads and stores,
/// padded tails, arithmetic, comparisons, selects, bit operations and the transcendental
/// functions. Comparisons give masks (every bit of a lane set where the comparison holds,
/// clear elsewhere) of the same type, which `select` reads. The methods are named as `wide`'s,
/// so lane code reads the same over [`f32x8`] and over a type parameter bounded by `Lane`.
pub trait Lane:
    Copy
    + Send
    + Sync
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
    + AddAssign
    + SubAssign
    + MulAssign
    + DivAssign
{
    /// `f32` lanes: 1 for one `f32`, 8, or 16 for AVX-512 registers; at most [`MAX_LANES`].
    const LANES: usize;
    /// Zero in every lane.
    const ZERO: Self;
    /// One in every lane.
    const ONE: Self;
    /// `v` in every lane.
    fn splat(v: f32) -> Self;
    /// The first [`LANES`](Lane::LANES) values of `s`.
    ///
    /// # Panics
    /// If `s` is shorter.
    fn load(s: &[f32]) -> Self;
    /// Stores the lanes into the first [`LANES`](Lane::LANES) values of `s`.
    ///
    /// # Panics
    /// If `s` is shorter.
    fn store(self, s: &mut [f32]);
    /// Square root.
    fn sqrt(self) -> Self;
    /// Absolute value (the sign bit cleared).
    fn abs(self) -> Self;
    /// `1` or `-1` with the sign of each lane (`wide`'s `signum`).
    fn signum(self) -> Self;
    /// `e^x`.
    fn exp(self) -> Self;
    /// `e^x - 1`.
    fn exp_m1(self) -> Self;
    /// Natural logarithm.
    fn ln(self) -> Self;
    /// `ln(1 + x)`.
    fn ln_1p(self) -> Self;
    /// Hyperbolic tangent.
    fn tanh(self) -> Self;
    /// Hyperbolic cosine.
    fn cosh(self) -> Self;
    /// Hyperbolic sine.
    fn sinh(self) -> Self;
    /// The error function, the bits of [`math::erf`](crate::math::erf) in each lane.
    fn erf(self) -> Self;
    /// The smaller of each pair (`wide`'s `min`: a NaN operand gives the other one).
    fn min(self, other: Self) -> Self;
    /// The larger of each pair (`wide`'s `max`: a NaN operand gives the other one).
    fn max(self, other: Self) -> Self;
    /// `self` to the power `n`.
    fn powf_simd(self, n: Self) -> Self;
    /// Mask of `self > other`.
    fn simd_gt(self, other: Self) -> Self;
    /// Mask of `self < other`.
    fn simd_lt(self, other: Self) -> Self;
    /// Mask of `self >= other`.
    fn simd_ge(self, other: Self) -> Self;
    /// Mask of `self <= other`.
    fn simd_le(self, other: Self) -> Self;
    /// Mask of `self == other`.
    fn simd_eq(self, other: Self) -> Self;
    /// Mask of `self != other` (true where either is NaN).
    fn simd_ne(self, other: Self) -> Self;
    /// With `self` a mask: the bits of `if_true` where the mask's bits are set, of `if_false`
    /// where they are clear.
    fn select(self, if_true: Self, if_false: Self) -> Self;

    /// Bitwise and.
    fn and(self, other: Self) -> Self;
    /// Bitwise or.
    fn or(self, other: Self) -> Self;
    /// Bitwise exclusive or.
    fn xor(self, other: Self) -> Self;
    /// Bitwise not.
    fn not(self) -> Self;
    /// Whether every lane's sign bit is set (with a mask: whether it holds in every lane).
    fn all(self) -> bool;
    /// Whether some lane's sign bit is set (with a mask: whether it holds in some lane).
    fn any(self) -> bool;
    /// Each lane rounded to a whole number, ties to even (`wide`'s `round_ties_even` as the
    /// build compiles it).
    fn round_ties_even(self) -> Self;
    /// `self * a + b`, fused where the build enables FMA (as `wide`'s `mul_add`, so the same
    /// bits on every lane type of one build).
    fn mul_add(self, a: Self, b: Self) -> Self;
    /// `b - self * a`, fused where the build enables FMA (as `wide`'s `mul_neg_add`).
    fn mul_neg_add(self, a: Self, b: Self) -> Self;
    /// Mask of the lanes that are NaN.
    fn is_nan(self) -> Self;
    /// Mask of the lanes that are neither infinite nor NaN.
    fn is_finite(self) -> Self;
    /// Mask of the lanes whose sign bit is set.
    fn is_sign_negative(self) -> Self;
    /// Each lane's bits shifted left by 23 (`wide`'s `cast::<_, i32x8>(a) << 23`).
    fn shl23(self) -> Self;
    /// `1 << shift` in each lane's bits, `shift` being a whole number in `[0, 23)` (other lanes
    /// give any value).
    fn one_shl(shift: Self) -> Self;
    /// The bits `bits` in every lane.
    fn from_bits(bits: u32) -> Self;

    /// The first `min(s.len(), LANES)` values of `s`, zero in the other lanes.
    #[inline(always)]
    fn load_padded(s: &[f32]) -> Self {
        load_padded_by_copy(s)
    }

    /// Stores the first `min(s.len(), LANES)` lanes into `s`.
    #[inline(always)]
    fn store_partial(self, s: &mut [f32]) {
        store_partial_by_copy(self, s);
    }
}

/// [`Lane::load_padded`] through a copy into an array of whole lanes, whatever the lane type
/// (the AVX-512 type loads its tails with a mask instead): what the GEMM writes its tiles back
/// with, since mask registers in its microkernel made the AVX-512 products about 10% slower
/// (`bench_train mlp`, 32x784 by 784x128 on Zen 5).
#[inline(always)]
pub(crate) fn load_padded_by_copy<L: Lane>(s: &[f32]) -> L {
    if s.len() >= L::LANES {
        return L::load(s);
    }
    // A guarded loop of constant length, not `copy_from_slice`: a copy of unknown length
    // becomes a call to `memmove`, which costs more than the lane itself.
    let mut a = [0.0; MAX_LANES];
    for (j, d) in a.iter_mut().enumerate().take(L::LANES) {
        if j < s.len() {
            *d = s[j];
        }
    }
    L::load(&a)
}

/// [`Lane::store_partial`] through a copy out of an array of whole lanes, as
/// [`load_padded_by_copy`] loads.
#[inline(always)]
pub(crate) fn store_partial_by_copy<L: Lane>(v: L, s: &mut [f32]) {
    if s.len() >= L::LANES {
        return v.store(s);
    }
    let mut a = [0.0; MAX_LANES];
    v.store(&mut a);
    // A guarded loop of constant length, as in `load_padded_by_copy`.
    for (j, &x) in a.iter().enumerate().take(L::LANES) {
        if j < s.len() {
            s[j] = x;
        }
    }
}

/// The GEMM's multiply-add: `self * b + c` as the instructions of the lanes' [`Capability`]
/// compute it, rounded once on AVX2+FMA and AVX-512F, and as `wide`'s `mul_add` on [`f32x8`]
/// (once where the build enables FMA or NEON, twice otherwise). Element-wise code uses
/// [`Lane::mul_add`], which rounds the same way on every lane type of a build.
pub(crate) trait MulAdd: Lane {
    /// `self * b + c`, rounded as the capability's instructions round it.
    fn mul_add_native(self, b: Self, c: Self) -> Self;
}

impl MulAdd for f32x8 {
    #[inline(always)]
    fn mul_add_native(self, b: Self, c: Self) -> Self {
        f32x8::mul_add(self, b, c)
    }
}

/// `(start, len)` of the lanes of `L` that cover `0..n`, the last one possibly partial.
#[inline(always)]
pub fn pieces<L: Lane>(n: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..n)
        .step_by(L::LANES)
        .map(move |i| (i, L::LANES.min(n - i)))
}

/// Element-wise work that runs on any [`Lane`] type; [`dispatch`] picks the type.
///
/// Implementations mark `run` and everything it calls down to the lane operations
/// `#[inline(always)]`: the dispatch compiles it inside a `#[target_feature]` entry point, and
/// only what is inlined there runs on the wider instructions.
pub trait OnLanes {
    /// What the work returns.
    type Output;
    /// Does the work on lanes of type `L`.
    fn run<L: Lane>(self) -> Self::Output;
}

/// The lanes of [`Capability::Portable`]: `wide`'s [`f32x8`] where the target has SIMD
/// registers, one `f32` elsewhere (a microcontroller, where `f32x8` would be eight scalar
/// values).
#[cfg(any(
    target_feature = "sse2",
    target_feature = "simd128",
    all(target_arch = "aarch64", target_feature = "neon")
))]
pub(crate) type Portable = f32x8;
/// The lanes of [`Capability::Portable`]: `wide`'s [`f32x8`] where the target has SIMD
/// registers, one `f32` elsewhere (a microcontroller, where `f32x8` would be eight scalar
/// values).
#[cfg(not(any(
    target_feature = "sse2",
    target_feature = "simd128",
    all(target_arch = "aarch64", target_feature = "neon")
)))]
pub(crate) type Portable = f32;

/// Runs `work` on the lanes of [`Capability::active`].
#[inline]
pub fn dispatch<W: OnLanes>(work: W) -> W::Output {
    run_available(Capability::active(), work)
}

/// Values below which [`dispatch_for`] runs work inline on the portable lanes: a dispatch is a
/// call into code compiled for other instructions, which costs more than a pass over a few
/// lanes.
const INLINE_BELOW: usize = 256;

/// Runs `work`, a pass over `len` values, on the lanes of [`Capability::active`], or inline on
/// those of [`Capability::Portable`] when it is shorter than a dispatch is worth: the same
/// bits either way.
#[inline(always)]
pub fn dispatch_for<W: OnLanes>(len: usize, work: W) -> W::Output {
    if len < INLINE_BELOW {
        work.run::<Portable>()
    } else {
        dispatch(work)
    }
}

/// Runs `work` on the lanes of `capability` if it is [available](Capability::available), else
/// on those of [`Capability::Portable`]. Tests compare the capabilities with each other and
/// with `work.run::<f32>()`, the one-lane reference.
#[inline]
pub fn run_on<W: OnLanes>(capability: Capability, work: W) -> W::Output {
    if capability.available() {
        run_available(capability, work)
    } else {
        work.run::<Portable>()
    }
}

/// Runs `work` on the lanes of `capability`, which is [available](Capability::available).
#[inline(always)]
fn run_available<W: OnLanes>(capability: Capability, work: W) -> W::Output {
    match capability {
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        // SAFETY: available: the CPU has AVX2 and FMA.
        Capability::Avx2Fma => unsafe { avx2::run(work) },
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        // SAFETY: available: the CPU has AVX-512F.
        Capability::Avx512 => unsafe { avx512::run(work) },
        _ => work.run::<Portable>(),
    }
}

/// The lanes a test runs work on: the one-lane reference, or the lanes of a capability.
#[cfg(test)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tested {
    /// One `f32`, the reference.
    One,
    /// The lanes of an available capability.
    Of(Capability),
}

#[cfg(test)]
impl Tested {
    /// The reference first, then the lanes of every capability this build and CPU can run.
    pub(crate) fn every() -> impl Iterator<Item = Tested> {
        let available = Capability::ALL.into_iter().filter(|c| c.available());
        core::iter::once(Tested::One).chain(available.map(Tested::Of))
    }

    /// Runs `work` on these lanes.
    pub(crate) fn run<W: OnLanes>(self, work: W) -> W::Output {
        match self {
            Tested::One => work.run::<f32>(),
            Tested::Of(capability) => run_on(capability, work),
        }
    }
}

/// `1` for positive, `-1` for negative, `0` for zero (PyTorch's and NumPy's `sign`, unlike
/// `signum`, which gives `1` for `+0.0`).
#[inline(always)]
pub fn sign<L: Lane>(x: L) -> L {
    let pos = x.simd_gt(L::ZERO).select(L::ONE, L::ZERO);
    let neg = x.simd_lt(L::ZERO).select(L::ONE, L::ZERO);
    pos - neg
}

/// The logistic function `1 / (1 + e^-x)`.
#[inline(always)]
pub fn sigmoid<L: Lane>(x: L) -> L {
    L::ONE / (L::ONE + (-x).exp())
}

/// `ln(1 + e^x)`, computed as `max(x, 0) + ln_1p(e^-|x|)`: no overflow for large `x`, no
/// lost digits for very negative `x`.
#[inline(always)]
pub fn softplus<L: Lane>(x: L) -> L {
    x.max(L::ZERO) + (-x.abs()).exp().ln_1p()
}

/// The error function of each value (`wide` has none): the same bits as the scalar
/// [`math::erf`](crate::math::erf) gives each, within 1.3 ulp of the exact value.
#[inline(always)]
pub fn erf<L: Lane>(x: L) -> L {
    x.erf()
}

/// The largest value of `s` that is not NaN, `-inf` if there is none: the value of a fold with
/// [`math::max`](crate::math::max) from `-inf`, up to the sign of a zero. Whole lanes of `s`
/// go through `max`, then the lanes and the tail through `math::max`.
#[inline(always)]
pub(crate) fn max_of<L: Lane>(s: &[f32]) -> f32 {
    let full = s.len() / L::LANES * L::LANES;
    let mut most = L::splat(f32::NEG_INFINITY);
    for i in (0..full).step_by(L::LANES) {
        most = most.max(L::load(&s[i..]));
    }
    let mut lanes = [f32::NEG_INFINITY; MAX_LANES];
    most.store(&mut lanes);
    let mut width = L::LANES;
    while width > 1 {
        width /= 2;
        for i in 0..width {
            lanes[i] = crate::math::max(lanes[i], lanes[i + width]);
        }
    }
    s[full..]
        .iter()
        .fold(lanes[0], |m, &v| crate::math::max(m, v))
}

/// `x` limited to `[lo, hi]`; a NaN `x` stays NaN.
#[inline(always)]
pub fn clamp<L: Lane>(x: L, lo: L, hi: L) -> L {
    let x = x.simd_lt(lo).select(lo, x);
    x.simd_gt(hi).select(hi, x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math;
    extern crate std;

    /// Every capability this build and CPU can run.
    fn available() -> impl Iterator<Item = Capability> {
        Capability::ALL.into_iter().filter(|c| c.available())
    }

    /// Every [`Lane`] operation of lanes `a` and `b`, in a fixed order.
    struct EveryOperation<'a> {
        a: &'a [f32],
        b: &'a [f32],
    }

    /// Operations [`EveryOperation`] runs.
    const OPERATIONS: usize = 45;

    impl OnLanes for EveryOperation<'_> {
        /// The bits of every operation's result on every value, operation by operation.
        type Output = std::vec::Vec<u32>;
        #[inline(always)]
        fn run<L: Lane>(self) -> std::vec::Vec<u32> {
            let mut out = std::vec![std::vec::Vec::new(); OPERATIONS];
            let pairs = self
                .a
                .chunks_exact(L::LANES)
                .zip(self.b.chunks_exact(L::LANES));
            for (a, b) in pairs {
                let x = L::load(a);
                let y = L::load(b);
                let mask = x.simd_lt(y);
                let mut acc = x;
                acc += y;
                acc -= L::splat(0.25);
                acc *= y;
                acc /= x;
                let results = [
                    x + y,
                    x - y,
                    x * y,
                    x / y,
                    -x,
                    acc,
                    x.sqrt(),
                    x.abs(),
                    x.signum(),
                    x.exp(),
                    x.exp_m1(),
                    x.ln(),
                    x.ln_1p(),
                    x.tanh(),
                    x.cosh(),
                    x.sinh(),
                    x.erf(),
                    x.min(y),
                    x.max(y),
                    x.powf_simd(y),
                    x.simd_gt(y),
                    mask,
                    x.simd_ge(y),
                    x.simd_le(y),
                    x.simd_eq(y),
                    x.simd_ne(y),
                    mask.select(x, y),
                    sign(x),
                    sigmoid(x),
                    softplus(x),
                    clamp(x, L::splat(-0.5), y),
                    L::ZERO + L::ONE,
                    x.is_nan(),
                    x.is_finite(),
                    x.is_sign_negative(),
                    x.and(y),
                    x.or(y),
                    x.xor(y),
                    x.not(),
                    x.shl23(),
                    L::one_shl(L::splat(7.0)),
                    L::from_bits(0x7F80_0001),
                    x.round_ties_even(),
                    x.mul_add(y, L::splat(0.5)),
                    x.mul_neg_add(y, L::ONE),
                ];
                for (o, r) in out.iter_mut().zip(results) {
                    let mut lanes = [0.0; MAX_LANES];
                    r.store(&mut lanes);
                    o.extend(lanes[..L::LANES].iter().map(|v| v.to_bits()));
                }
            }
            out.concat()
        }
    }

    /// Signed zeros, infinities and NaNs of both signs.
    const SIGNED_EDGES: [f32; 6] = [
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
    ];

    /// Values that exercise every branch: first whole registers of values that take the early
    /// returns of `exp`, `exp_m1` and `tanh` (every lane underflowing, or saturating), then
    /// signed zeros, infinities, NaNs of both signs, subnormals and the edges of `exp` and
    /// `tanh`, bit patterns from a hash, values across the whole range of `exp` (its subnormal
    /// results included) and values near zero.
    fn awkward_values(n: usize, salt: u32) -> std::vec::Vec<f32> {
        let more = [
            f32::MIN_POSITIVE,
            -1e-40,
            1.0,
            -1.0,
            88.7,
            -103.9,
            9.0,
            -9.0,
            0.5,
            3.0e38,
        ];
        let special: std::vec::Vec<f32> = SIGNED_EDGES.into_iter().chain(more).collect();
        let early = [-104.5, -18.0, 9.5, -9.5];
        (0..n)
            .map(|i| {
                let h = (i as u32 ^ salt).wrapping_mul(0x9E37_79B9).rotate_left(13) ^ salt;
                let u = h as f32 / u32::MAX as f32 - 0.5;
                if let Some(&base) = early.get(i / MAX_LANES) {
                    let away = if base < 0.0 { -0.25 } else { 0.25 };
                    return base + (i % MAX_LANES) as f32 * away;
                }
                match i % 6 {
                    0 => special[(h as usize) % special.len()],
                    1 => f32::from_bits(h),
                    2 => u * 230.0,
                    3 => u * 1e-3,
                    _ => u * 40.0,
                }
            })
            .collect()
    }

    /// Every pair of edge values, whole registers of them: signed zeros, infinities and NaNs
    /// (which operand `min` and `max` give), subnormals, halves and the edges of whole numbers
    /// (`round_ties_even`), and the edges of `exp`.
    fn edge_pairs() -> (std::vec::Vec<f32>, std::vec::Vec<f32>) {
        let more = [
            1e-40,
            -1e-40,
            f32::MIN_POSITIVE,
            0.3,
            -0.3,
            0.5,
            -0.5,
            0.5_f32.next_down(),
            1.5,
            2.5,
            -2.5,
            4_194_304.5,
            8_388_607.5,
            -8_388_607.5,
            8_388_608.0,
            3e9,
            -3e9,
            88.5,
            88.8,
            -103.7,
            -104.0,
            1.0,
        ];
        let edges: std::vec::Vec<f32> = SIGNED_EDGES.into_iter().chain(more).collect();
        let pairs = edges
            .iter()
            .flat_map(|&a| edges.iter().map(move |&b| (a, b)));
        let n = (edges.len() * edges.len()).next_multiple_of(MAX_LANES);
        pairs.cycle().take(n).unzip()
    }

    /// Operations of [`EveryOperation`] that give masks or bits, which must match exactly.
    const EXACT: [core::ops::RangeInclusive<usize>; 2] = [20..=25, 32..=41];

    /// `got` and `want` are the same value: the same bits, or both NaN where the operation
    /// gives values (Rust leaves a NaN's sign and payload to the compiler, which may order an
    /// operation's operands differently in each build of the same code).
    fn same(op: usize, got: u32, want: u32) -> bool {
        let nan = |b: u32| f32::from_bits(b).is_nan();
        got == want || (!EXACT.iter().any(|r| r.contains(&op)) && nan(got) && nan(want))
    }

    /// The lanes of every capability this build and CPU can run, and `wide`'s `f32x8` (whichever
    /// capability runs on it), give the bits of the one-lane `f32` for every operation.
    #[test]
    fn every_lane_type_gives_the_bits_of_one_lane() {
        let (mut a, mut b) = edge_pairs();
        a.extend(awkward_values(MAX_LANES * 256, 1));
        b.extend(awkward_values(MAX_LANES * 256, 7));
        let n = a.len();
        let want = EveryOperation { a: &a, b: &b }.run::<f32>();
        assert_eq!(want.len(), OPERATIONS * n);
        let mut compared = 0;
        let wide = |work: EveryOperation| work.run::<f32x8>();
        let runs = available()
            .map(|c| {
                (
                    std::format!("{c:?}"),
                    run_on(c, EveryOperation { a: &a, b: &b }),
                )
            })
            .chain([("f32x8".into(), wide(EveryOperation { a: &a, b: &b }))]);
        for (lanes, got) in runs {
            assert_eq!(got.len(), want.len());
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                let (op, at) = (i / n, i % n);
                assert!(
                    same(op, *g, *w),
                    "{lanes:?}: operation {op} of a = {:e}, b = {:e}: {g:#x}, not {w:#x}",
                    a[at],
                    b[at]
                );
            }
            compared += 1;
        }
        if Capability::active() != Capability::Portable {
            assert!(
                compared > 2,
                "a register lane type was compared on a SIMD CPU"
            );
        }
    }

    /// The one-lane rounding gives IEEE's ties-to-even (what `wide` computes where it has no
    /// SSE2, the microcontrollers' case, which the test above cannot compare on x86), or with
    /// an unsigned zero the same but `+0.0` for every zero.
    #[test]
    fn one_lane_rounding_is_ties_to_even() {
        let (edges, _) = edge_pairs();
        for x in edges.into_iter().chain(awkward_values(4096, 5)) {
            let want = x.round_ties_even();
            let got = one::round_ties_even(x, false);
            assert!(
                got.to_bits() == want.to_bits() || got.is_nan() && want.is_nan(),
                "{x:e}: {got:e}, not {want:e}"
            );
            let unsigned = if want == 0.0 { 0.0 } else { want };
            let got = one::round_ties_even(x, true);
            assert!(got.to_bits() == unsigned.to_bits() || got.is_nan() && want.is_nan());
        }
    }

    /// Every tail length loads as its values and zeros, and stores only its values.
    struct PaddedTails;

    impl OnLanes for PaddedTails {
        type Output = ();
        fn run<L: Lane>(self) {
            let src: std::vec::Vec<f32> = (0..=L::LANES).map(|i| i as f32 + 0.5).collect();
            for n in 0..=L::LANES {
                let mut lanes = [f32::NAN; MAX_LANES];
                L::load_padded(&src[..n]).store(&mut lanes);
                for (i, &v) in lanes[..L::LANES].iter().enumerate() {
                    let want = if i < n { src[i] } else { 0.0 };
                    assert_eq!(v.to_bits(), want.to_bits(), "load of {n}, lane {i}");
                }
                let mut dst = [-1.0; MAX_LANES + 1];
                L::splat(7.0).store_partial(&mut dst[..n]);
                for (i, &v) in dst.iter().enumerate() {
                    let want = if i < n { 7.0 } else { -1.0 };
                    assert_eq!(v, want, "store of {n}, element {i}");
                }
            }
        }
    }

    #[test]
    fn padded_loads_and_partial_stores_touch_only_the_slice() {
        PaddedTails.run::<f32>();
        for capability in available() {
            run_on(capability, PaddedTails);
        }
    }

    /// [`max_of`] of every slice of `values` starting at `from`, up to `len` long.
    struct Maxima<'a> {
        values: &'a [f32],
        from: usize,
        len: usize,
    }

    impl OnLanes for Maxima<'_> {
        type Output = std::vec::Vec<f32>;
        fn run<L: Lane>(self) -> std::vec::Vec<f32> {
            let s = &self.values[self.from..];
            (0..=self.len).map(|n| max_of::<L>(&s[..n])).collect()
        }
    }

    #[test]
    fn max_of_is_the_fold_of_math_max_on_every_lane_type() {
        let mut values = awkward_values(400, 3);
        values[200..260].fill(f32::NAN);
        values[230] = -5.0;
        for from in [0, 1, 5, 190, 200, 231] {
            let len = 100.min(values.len() - from);
            let s = &values[from..];
            let want: std::vec::Vec<f32> = (0..=len)
                .map(|n| {
                    s[..n]
                        .iter()
                        .fold(f32::NEG_INFINITY, |m, &v| math::max(m, v))
                })
                .collect();
            let maxima = || Maxima {
                values: &values,
                from,
                len,
            };
            let runs = available()
                .map(|c| (std::format!("{c:?}"), run_on(c, maxima())))
                .chain([("f32".into(), maxima().run::<f32>())]);
            for (lanes, got) in runs {
                for (n, (g, w)) in got.iter().zip(&want).enumerate() {
                    assert!(g == w, "{lanes:?}: max of {n} from {from}: {g} for {w}");
                }
            }
        }
    }

    /// `dispatch` runs on the lanes of `Capability::active`.
    #[test]
    fn dispatch_runs_on_the_active_lanes() {
        struct Which;
        impl OnLanes for Which {
            type Output = &'static str;
            fn run<L: Lane>(self) -> &'static str {
                core::any::type_name::<L>()
            }
        }
        let name = dispatch(Which);
        match Capability::active() {
            Capability::Portable => assert!(name.ends_with("f32x8") || name == "f32", "{name}"),
            Capability::Avx2Fma => assert!(name.ends_with("Avx2"), "{name}"),
            Capability::Avx512 => assert!(name.ends_with("Avx512"), "{name}"),
        }
    }

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
