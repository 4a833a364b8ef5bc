//! Activation functions: zero-sized types used as a type parameter of [`Dense`](super::Dense)
//! and [`Conv2d`](super::Conv2d), and by graph models for element-wise operations.
//!
//! Element-wise activations implement [`Elementwise`] (a lane function and its derivative) and
//! get [`Activation`] from it, so that a layer applies its bias and its activation in one pass
//! over its output; [`Softmax`] works on whole rows. Sub-gradients at kinks are PyTorch's:
//! `ReLU'(0) = 0`, `LeakyReLU'(0) = slope`.
//!
//! [`Sigmoid`], [`Tanh`] and [`Swish`] are written with `activation!`, as a user's activation
//! is (their derivatives read `y` where they can, so that sigmoid and tanh do not save `z`);
//! the others are written by hand, because the macro would not give the same layer:
//! - [`Identity`]: Keras names it `linear`, not after the type, and its backward does nothing.
//! - [`Relu`]: the macro's derivative reads `z > 0`, so layers would save `z`; this one reads `y`.
//! - [`LeakyRelu`]: generic over its slope `NUM / DEN`, which the macro's constants cannot be.
//! - [`Elu`]: the macro's derivative reads `z` (`e^z`), so layers would save it; this reads `y`.
//! - [`Gelu`]: the macro's derivative of the `erf` form is some ulps off PyTorch's `Φ(z) + z φ(z)`.
//! - [`Softmax`]: it normalizes whole rows and is not element-wise.
//!
//! ```
//! use fusegraph_runtime::layers::{Activation, Relu, Softmax};
//! let z = [-1.0, 0.5, 2.0];
//! let mut y = [0.0; 3];
//! Relu::forward(&z, &mut y, 3);
//! assert_eq!(y, [0.0, 0.5, 2.0]);
//! Softmax::forward(&z, &mut y, 3);
//! assert!((y.iter().sum::<f32>() - 1.0).abs() < 1e-6);
//! ```

use super::{Backward, Ctx, Forward, Layer, Tensor};
use crate::kernels::parallel::{for_sample_runs, PerSample};
use crate::lane::{self, add_to_each_row, EightSums, Lane, OnLanes};
use core::marker::PhantomData;
use fusegraph_macros::activation;

/// An activation function over rows of `row` values (the features of one sample).
///
/// Element-wise activations ignore `row`; [`Softmax`] normalizes each row.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an activation",
    label = "not an activation",
    note = "the activations are Identity, Relu, LeakyRelu<NUM, DEN>, Elu, Sigmoid, Tanh, Gelu, Swish and Softmax, and those defined with `fusegraph::activation!`"
)]
pub trait Activation {
    /// Name, as Keras spells it (`"relu"`, `"softmax"`...).
    const NAME: &'static str;
    /// Whether [`backward`](Self::backward) needs the pre-activation `z`; otherwise it only
    /// reads the output `y`, and layers do not save `z`.
    const NEEDS_Z: bool;
    /// Writes the name and the options that change the function (`leaky_relu(1/100)`); the
    /// name alone by default.
    fn describe(out: &mut dyn core::fmt::Write) -> core::fmt::Result {
        out.write_str(Self::NAME)
    }
    /// `y = f(z)`; `z` and `y` have the same length, a multiple of `row`.
    fn forward(z: &[f32], y: &mut [f32], row: usize);
    /// `y = f(y + bias)` in place, in one pass, with `bias` (`row` values, or empty for none)
    /// added to every row; when [`NEEDS_Z`](Self::NEEDS_Z), the pre-activation `y + bias` is
    /// also written into `z` (as long as `y`; otherwise `z` is not touched and may be empty).
    fn forward_bias(y: &mut [f32], bias: &[f32], z: &mut [f32], row: usize);
    /// `dy = dy ⊙ f'(z)` in place (for [`Softmax`], the product with the Jacobian of each row),
    /// given what `forward` saw and wrote: `z` (when [`NEEDS_Z`](Self::NEEDS_Z); otherwise it
    /// is not read and may be empty) and `y`.
    fn backward(z: &[f32], y: &[f32], dy: &mut [f32], row: usize);
}

/// [`Activation::forward_bias`] over the rows of `y` (`row` values each): runs of whole rows
/// on the threads of the pool when the pass is large
/// ([`PASS_PARALLEL_MIN`](crate::kernels::parallel::PASS_PARALLEL_MIN)), with the bits of one
/// call over all of them.
pub(crate) fn forward_bias_rows<A: Activation>(
    y: &mut [f32],
    bias: &[f32],
    z: &mut [f32],
    row: usize,
) {
    let rows = y.len().checked_div(row).unwrap_or(0);
    let z_row = if A::NEEDS_Z { row } else { 0 };
    let work = y.len() * if A::NEEDS_Z { 3 } else { 2 };
    let out = (
        PerSample { data: y, per: row },
        PerSample {
            data: z,
            per: z_row,
        },
    );
    for_sample_runs(rows, work, out, &|_, (y, z)| {
        A::forward_bias(y.data, bias, z.data, row);
    });
}

/// [`Activation::backward`] over the rows of `dy` (`row` values each), split as
/// [`forward_bias_rows`] splits its pass.
pub(crate) fn backward_rows<A: Activation>(z: &[f32], y: &[f32], dy: &mut [f32], row: usize) {
    let rows = dy.len().checked_div(row).unwrap_or(0);
    let z_row = if A::NEEDS_Z { row } else { 0 };
    let work = dy.len() * if A::NEEDS_Z { 4 } else { 3 };
    let out = PerSample { data: dy, per: row };
    for_sample_runs(rows, work, out, &|r, dy| {
        let z = &z[(r.start * z_row).min(z.len())..(r.end * z_row).min(z.len())];
        A::backward(z, &y[r.start * row..r.end * row], dy.data, row);
    });
}

/// An element-wise activation, written as a lane function: implementing it gives
/// [`Activation`] (with the bias fused into the same pass).
///
/// A slice's tail is padded into a full lane, so every value goes through the same lane code.
///
/// A type that is not an [`Activation`] fails to be one here, through the blanket
/// implementation: rustc prints this trait's message where the activation is a type
/// parameter (`Dense<4, 16, Mse>`), and [`Activation`]'s where it is required directly.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an activation",
    label = "not an activation",
    note = "the activations are Identity, Relu, LeakyRelu<NUM, DEN>, Elu, Sigmoid, Tanh, Gelu, Swish and Softmax, and those defined with `fusegraph::activation!`"
)]
pub trait Elementwise {
    /// Name, as Keras spells it.
    const NAME: &'static str;
    /// Whether [`lane_grad`](Self::lane_grad) reads its `z` argument.
    const NEEDS_Z: bool;
    /// Writes the name and the options that change the function (`leaky_relu(1/100)`); the
    /// name alone by default.
    fn describe(out: &mut dyn core::fmt::Write) -> core::fmt::Result {
        out.write_str(Self::NAME)
    }
    /// `f(z)` for a lane of values, on the [`Lane`] type that [`lane::dispatch`] picks; written
    /// with [`Lane`]'s operations, it gives the same bits on every one.
    fn lane<L: Lane>(z: L) -> L;
    /// `f'(z)` for a lane of values, given `z` (only when [`NEEDS_Z`](Self::NEEDS_Z);
    /// otherwise `z` holds `y` again) and `y = f(z)`.
    fn lane_grad<L: Lane>(z: L, y: L) -> L;
}

impl<E: Elementwise> Activation for E {
    const NAME: &'static str = E::NAME;
    const NEEDS_Z: bool = E::NEEDS_Z;

    fn describe(out: &mut dyn core::fmt::Write) -> core::fmt::Result {
        E::describe(out)
    }

    fn forward(z: &[f32], y: &mut [f32], _row: usize) {
        assert_eq!(z.len(), y.len(), "{}: z and y lengths differ", E::NAME);
        lane::dispatch(LaneForward::<E> {
            z,
            y,
            e: PhantomData,
        });
    }

    fn forward_bias(y: &mut [f32], bias: &[f32], z: &mut [f32], row: usize) {
        check_bias(y, bias, z, row, E::NEEDS_Z);
        if y.is_empty() {
            return;
        }
        lane::dispatch(LaneForwardBias::<E> {
            y,
            bias,
            z,
            row,
            e: PhantomData,
        });
    }

    fn backward(z: &[f32], y: &[f32], dy: &mut [f32], _row: usize) {
        assert_eq!(y.len(), dy.len(), "{}: y and dy lengths differ", E::NAME);
        let z = if E::NEEDS_Z {
            assert_eq!(z.len(), y.len(), "{}: z and y lengths differ", E::NAME);
            z
        } else {
            y
        };
        lane::dispatch(LaneBackward::<E> {
            z,
            y,
            dy,
            e: PhantomData,
        });
    }
}

/// `y = f(z)` of [`Elementwise`] `E`, on any lane type.
struct LaneForward<'a, E> {
    z: &'a [f32],
    y: &'a mut [f32],
    e: PhantomData<E>,
}

impl<E: Elementwise> OnLanes for LaneForward<'_, E> {
    type Output = ();
    #[inline(always)]
    fn run<L: Lane>(self) {
        for (i, n) in lane::pieces::<L>(self.y.len()) {
            E::lane(L::load_padded(&self.z[i..i + n])).store_partial(&mut self.y[i..i + n]);
        }
    }
}

/// `y = f(y + bias)` of [`Elementwise`] `E` over rows of `row` values, saving `z = y + bias`
/// when `E` needs it, on any lane type.
struct LaneForwardBias<'a, E> {
    y: &'a mut [f32],
    bias: &'a [f32],
    z: &'a mut [f32],
    row: usize,
    e: PhantomData<E>,
}

impl<E: Elementwise> OnLanes for LaneForwardBias<'_, E> {
    type Output = ();
    #[inline(always)]
    fn run<L: Lane>(self) {
        let (bias, row) = (self.bias, self.row);
        for (r, yr) in self.y.chunks_exact_mut(row).enumerate() {
            for (i, n) in lane::pieces::<L>(row) {
                let mut v = L::load_padded(&yr[i..i + n]);
                if !bias.is_empty() {
                    v += L::load_padded(&bias[i..i + n]);
                }
                if E::NEEDS_Z {
                    v.store_partial(&mut self.z[r * row + i..r * row + i + n]);
                }
                E::lane(v).store_partial(&mut yr[i..i + n]);
            }
        }
    }
}

/// `dy = dy ⊙ f'(z)` of [`Elementwise`] `E`, on any lane type.
struct LaneBackward<'a, E> {
    z: &'a [f32],
    y: &'a [f32],
    dy: &'a mut [f32],
    e: PhantomData<E>,
}

impl<E: Elementwise> OnLanes for LaneBackward<'_, E> {
    type Output = ();
    #[inline(always)]
    fn run<L: Lane>(self) {
        for (i, n) in lane::pieces::<L>(self.dy.len()) {
            let g = E::lane_grad(
                L::load_padded(&self.z[i..i + n]),
                L::load_padded(&self.y[i..i + n]),
            );
            (L::load_padded(&self.dy[i..i + n]) * g).store_partial(&mut self.dy[i..i + n]);
        }
    }
}

fn check_bias(y: &[f32], bias: &[f32], z: &[f32], row: usize, needs_z: bool) {
    assert!(
        bias.is_empty() || bias.len() == row,
        "bias has {} values for rows of {row}",
        bias.len()
    );
    assert!(
        row == 0 && y.is_empty() || row > 0 && y.len().is_multiple_of(row),
        "{} values are not rows of {row}",
        y.len()
    );
    assert!(
        !needs_z || z.len() == y.len(),
        "z holds {} values for {}",
        z.len(),
        y.len()
    );
}

/// `y += bias` on every row (nothing for an empty `bias`).
fn add_bias(y: &mut [f32], bias: &[f32]) {
    if !bias.is_empty() {
        add_to_each_row(y, bias);
    }
}

/// `f(z) = z`: a layer without activation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Identity;

impl Activation for Identity {
    const NAME: &'static str = "linear";
    const NEEDS_Z: bool = false;

    fn forward(z: &[f32], y: &mut [f32], _row: usize) {
        y.copy_from_slice(z);
    }

    fn forward_bias(y: &mut [f32], bias: &[f32], z: &mut [f32], row: usize) {
        check_bias(y, bias, z, row, false);
        add_bias(y, bias);
    }

    fn backward(_z: &[f32], y: &[f32], dy: &mut [f32], _row: usize) {
        assert_eq!(y.len(), dy.len(), "linear: y and dy lengths differ");
    }
}

/// `max(z, 0)`, with `ReLU'(0) = 0` (PyTorch's choice). NaN stays NaN.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Relu;

impl Elementwise for Relu {
    const NAME: &'static str = "relu";
    const NEEDS_Z: bool = false;
    #[inline(always)]
    fn lane<L: Lane>(z: L) -> L {
        z.simd_lt(L::ZERO).select(L::ZERO, z)
    }
    #[inline(always)]
    fn lane_grad<L: Lane>(_z: L, y: L) -> L {
        y.simd_gt(L::ZERO).select(L::ONE, L::ZERO)
    }
}

/// `z` for `z > 0`, `NUM / DEN * z` otherwise, with `LeakyReLU'(0) = slope` (PyTorch's
/// choice).
///
/// The default slope 0.01 is PyTorch's `LeakyReLU`; Keras 3's `LeakyReLU` defaults to 0.3,
/// which is `LeakyRelu<3, 10>`. A negative slope makes the layers save `z`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LeakyRelu<const NUM: i32 = 1, const DEN: u32 = 100>;

impl<const NUM: i32, const DEN: u32> LeakyRelu<NUM, DEN> {
    /// The slope for negative inputs, `NUM / DEN`.
    pub const SLOPE: f32 = {
        assert!(DEN > 0, "LeakyRelu: the slope's denominator must not be 0");
        NUM as f32 / DEN as f32
    };
}

impl<const NUM: i32, const DEN: u32> Elementwise for LeakyRelu<NUM, DEN> {
    const NAME: &'static str = "leaky_relu";
    fn describe(out: &mut dyn core::fmt::Write) -> core::fmt::Result {
        write!(out, "leaky_relu({NUM}/{DEN})")
    }
    // With a slope >= 0, `y > 0` exactly when `z > 0`, so `y` tells which side `z` was on.
    const NEEDS_Z: bool = NUM < 0;
    #[inline(always)]
    fn lane<L: Lane>(z: L) -> L {
        z.simd_gt(L::ZERO).select(z, z * L::splat(Self::SLOPE))
    }
    #[inline(always)]
    fn lane_grad<L: Lane>(z: L, _y: L) -> L {
        z.simd_gt(L::ZERO).select(L::ONE, L::splat(Self::SLOPE))
    }
}

/// `z` for `z > 0`, `e^z - 1` otherwise (alpha 1, the Keras and PyTorch default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Elu;

impl Elementwise for Elu {
    const NAME: &'static str = "elu";
    const NEEDS_Z: bool = false;
    #[inline(always)]
    fn lane<L: Lane>(z: L) -> L {
        z.simd_gt(L::ZERO).select(z, z.exp_m1())
    }
    #[inline(always)]
    fn lane_grad<L: Lane>(_z: L, y: L) -> L {
        // y > 0 exactly when z > 0; below, f'(z) = e^z = y + 1.
        y.simd_gt(L::ZERO).select(L::ONE, y + L::ONE)
    }
}

activation! {
    /// The logistic function `1 / (1 + e^-z)`.
    pub Sigmoid(z) = sigmoid(z);
    /// The hyperbolic tangent.
    pub Tanh(z) = tanh(z);
    /// `z * sigmoid(z)` (Keras' `swish` / `silu`, PyTorch's `SiLU`).
    pub Swish(z) = z * sigmoid(z);
}

/// GELU in its exact form, `z/2 * (1 + erf(z/√2))`: the Keras (`approximate=False`) and
/// PyTorch (`approximate='none'`) default, computed as they compute it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Gelu;

impl Gelu {
    /// `erf(z/√2)`, as the expression `erf(z * 0.70710677)` of `activation!` computes it.
    #[inline(always)]
    fn erf_scaled<L: Lane>(z: L) -> L {
        lane::erf(z * L::splat(core::f32::consts::FRAC_1_SQRT_2))
    }
}

impl Elementwise for Gelu {
    const NAME: &'static str = "gelu";
    const NEEDS_Z: bool = true;
    #[inline(always)]
    fn lane<L: Lane>(z: L) -> L {
        L::splat(0.5) * z * (L::ONE + Self::erf_scaled(z))
    }
    /// `Φ(z) + z φ(z)`, as PyTorch's `GeluBackward`, with `Φ(z) = y / z` read off the output
    /// (`y = z Φ(z)`) instead of a second error function: within 2 ulp of `(1 + erf(z/√2))/2`.
    /// Where `|z| < 2^-100` (and `z/2` may round), `Φ(z)` is `1/2`, as it rounds there.
    #[inline(always)]
    fn lane_grad<L: Lane>(z: L, y: L) -> L {
        const INV_SQRT_2PI: f32 = 0.398_942_3;
        const TINY: f32 = 7.888_609e-31;
        let cdf = z.abs().simd_lt(L::splat(TINY)).select(L::splat(0.5), y / z);
        let pdf = (L::splat(-0.5) * z * z).exp() * L::splat(INV_SQRT_2PI);
        cdf + z * pdf
    }
}

/// Softmax over each row (the features of one sample): `e^(z_i - max z) / Σ_j e^(z_j - max z)`.
///
/// Its backward is the product with the Jacobian, `dz_i = y_i (dy_i - Σ_j dy_j y_j)`. To train a
/// classifier, prefer an [`Identity`] output with
/// [`SoftmaxCrossEntropy`](crate::loss::SoftmaxCrossEntropy), which is stable for any logits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Softmax;

impl Softmax {
    /// The softmax of every `row` values of `y`, in place and in one dispatch, on the lanes
    /// that [`lane::dispatch`] picks; the sums in `f32x8` lane order ([`EightSums`]), so that
    /// every lane type gives the same bits. With `causal = Some(keys)`, row `i` is the
    /// softmax of its first `min(i + 1, keys)` values, and 0 after them (a causal attention's
    /// weights over `keys` real keys, the rest padding).
    pub(crate) fn rows(y: &mut [f32], row: usize, causal: Option<usize>) {
        if !y.is_empty() {
            lane::dispatch(SoftmaxRows { y, row, causal });
        }
    }

    /// The gradient through the softmax of one row `y`: `dy` becomes `y * (dy - Σ y dy)`, on
    /// the lanes that [`lane::dispatch`] picks, the sum in `f32x8` lane order.
    pub(crate) fn row_backward(y: &[f32], dy: &mut [f32]) {
        assert_eq!(y.len(), dy.len(), "softmax: y and dy lengths differ");
        if !y.is_empty() {
            lane::dispatch_for(y.len(), SoftmaxRowBackward { y, dy });
        }
    }
}

/// [`Softmax::row_backward`], on any lane type.
struct SoftmaxRowBackward<'a> {
    y: &'a [f32],
    dy: &'a mut [f32],
}

impl OnLanes for SoftmaxRowBackward<'_> {
    type Output = ();
    #[inline(always)]
    fn run<L: Lane>(self) {
        let (y, dy) = (self.y, self.dy);
        let mut dot = EightSums::new();
        dot.add_products(y, dy);
        let dot = L::splat(dot.total());
        for (i, n) in lane::pieces::<L>(y.len()) {
            let d = L::load_padded(&y[i..i + n]) * (L::load_padded(&dy[i..i + n]) - dot);
            d.store_partial(&mut dy[i..i + n]);
        }
    }
}

/// `y = f(y)` on lanes of type `L`.
#[inline(always)]
fn map_lanes<L: Lane>(y: &mut [f32], f: impl Fn(L) -> L) {
    for (i, n) in lane::pieces::<L>(y.len()) {
        f(L::load_padded(&y[i..i + n])).store_partial(&mut y[i..i + n]);
    }
}

/// [`Softmax::rows`], on any lane type.
struct SoftmaxRows<'a> {
    y: &'a mut [f32],
    row: usize,
    causal: Option<usize>,
}

impl OnLanes for SoftmaxRows<'_> {
    type Output = ();
    #[inline(always)]
    fn run<L: Lane>(self) {
        for (i, row) in self.y.chunks_exact_mut(self.row).enumerate() {
            let seen = match self.causal {
                Some(keys) => (i + 1).min(keys),
                None => row.len(),
            };
            let (seen, masked) = row.split_at_mut(seen);
            softmax_row::<L>(seen);
            masked.fill(0.0);
        }
    }
}

/// The softmax of one row on lanes of type `L`: `e^(y - max)` and the division on `L`, the sum
/// in `f32x8` order.
#[inline(always)]
fn softmax_row<L: Lane>(y: &mut [f32]) {
    let m = L::splat(lane::max_of::<L>(y));
    map_lanes(y, |v: L| (v - m).exp());
    let mut sum = EightSums::new();
    sum.add_slice(y);
    let by = L::splat(sum.total());
    map_lanes(y, |v: L| v / by);
}

impl Activation for Softmax {
    const NAME: &'static str = "softmax";
    const NEEDS_Z: bool = false;

    fn forward(z: &[f32], y: &mut [f32], row: usize) {
        check_bias(y, &[], z, row, true);
        y.copy_from_slice(z);
        Self::rows(y, row, None);
    }

    fn forward_bias(y: &mut [f32], bias: &[f32], z: &mut [f32], row: usize) {
        check_bias(y, bias, z, row, false);
        add_bias(y, bias);
        Self::rows(y, row, None);
    }

    fn backward(_z: &[f32], y: &[f32], dy: &mut [f32], row: usize) {
        check_bias(dy, &[], y, row, true);
        if dy.is_empty() {
            return;
        }
        for (yr, dr) in y.chunks_exact(row).zip(dy.chunks_exact_mut(row)) {
            Self::row_backward(yr, dr);
        }
    }
}

/// Scalar `f64` references of the activations, for the layers' tests.
#[cfg(test)]
pub(crate) mod reference {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    /// `f(z)` in `f64`, row by row.
    pub(crate) trait Ref64: Activation {
        fn f64(z: &[f64], row: usize) -> Vec<f64>;
    }

    fn map(z: &[f64], f: impl Fn(f64) -> f64) -> Vec<f64> {
        z.iter().map(|&v| f(v)).collect()
    }

    fn sigmoid(v: f64) -> f64 {
        1.0 / (1.0 + (-v).exp())
    }

    impl Ref64 for Identity {
        fn f64(z: &[f64], _: usize) -> Vec<f64> {
            z.to_vec()
        }
    }
    impl Ref64 for Relu {
        fn f64(z: &[f64], _: usize) -> Vec<f64> {
            map(z, |v| v.max(0.0))
        }
    }
    impl<const NUM: i32, const DEN: u32> Ref64 for LeakyRelu<NUM, DEN> {
        fn f64(z: &[f64], _: usize) -> Vec<f64> {
            let slope = f64::from(NUM) / f64::from(DEN);
            map(z, |v| if v > 0.0 { v } else { slope * v })
        }
    }
    impl Ref64 for Elu {
        fn f64(z: &[f64], _: usize) -> Vec<f64> {
            map(z, |v| if v > 0.0 { v } else { v.exp_m1() })
        }
    }
    impl Ref64 for Sigmoid {
        fn f64(z: &[f64], _: usize) -> Vec<f64> {
            map(z, sigmoid)
        }
    }
    impl Ref64 for Tanh {
        fn f64(z: &[f64], _: usize) -> Vec<f64> {
            map(z, f64::tanh)
        }
    }
    impl Ref64 for Gelu {
        fn f64(z: &[f64], _: usize) -> Vec<f64> {
            map(z, |v| {
                0.5 * v * (1.0 + libm::erf(v / core::f64::consts::SQRT_2))
            })
        }
    }
    impl Ref64 for Swish {
        fn f64(z: &[f64], _: usize) -> Vec<f64> {
            map(z, |v| v * sigmoid(v))
        }
    }
    impl Ref64 for Softmax {
        fn f64(z: &[f64], row: usize) -> Vec<f64> {
            z.chunks(row)
                .flat_map(|r| {
                    let m = r.iter().fold(f64::NEG_INFINITY, |a, &b| a.max(b));
                    let s: f64 = r.iter().map(|v| (v - m).exp()).sum();
                    r.iter().map(move |v| (v - m).exp() / s)
                })
                .collect()
        }
    }
}

/// An activation as a layer of its own, without parameters: `Act<Swish, 16>` applies `Swish`
/// to 16 features. Its backward pass reads the layer's input as `z`, so it saves nothing.
///
/// ```
/// use fusegraph_runtime::layers::{Act, Layer, Relu};
/// assert_eq!((<Act<Relu, 16> as Layer>::IN, <Act<Relu, 16> as Layer>::PARAMS), (16, 0));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Act<A, const N: usize>(PhantomData<A>);

impl<A: Activation, const N: usize> Layer for Act<A, N> {
    fn describe(out: &mut dyn core::fmt::Write) -> core::fmt::Result {
        out.write_str("Act<")?;
        A::describe(out)?;
        write!(out, ", {N}>")
    }

    const IN: usize = N;
    const OUT: usize = N;
    const PARAMS: usize = 0;
    const STATE: usize = 0;
    const SAVED: usize = 0;
    const TENSORS: &'static [Tensor] = &[];
    const FREEZABLE: bool = true;

    fn forward(_: &mut Ctx<'_>, io: Forward<'_>) {
        let Forward { x, y, .. } = io;
        A::forward(x, y, N);
    }

    fn backward(_: &mut Ctx<'_>, io: Backward<'_>) {
        let Backward { x, y, dy, dx, .. } = io;
        A::backward(x, y, dy, N);
        dx.give(dy);
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::reference::Ref64;
    use super::*;
    use crate::layers::gradcheck::{assert_close, bits, Check};
    use crate::layers::{Ctx, Layer, Tensor};
    use core::marker::PhantomData;
    use std::vec;
    use std::vec::Vec;
    use wide::f32x8;

    /// An activation with a bias, as a layer, so the shared gradient check can run it.
    struct BiasAct<A, const N: usize>(PhantomData<A>);

    impl<A: Activation, const N: usize> Layer for BiasAct<A, N> {
        fn describe(out: &mut dyn core::fmt::Write) -> core::fmt::Result {
            out.write_str("BiasAct")
        }

        const IN: usize = N;
        const OUT: usize = N;
        const PARAMS: usize = N;
        const STATE: usize = 0;
        const SAVED: usize = if A::NEEDS_Z { N } else { 0 };
        const TENSORS: &'static [Tensor] = &[];
        fn init_state(_: &mut [f32]) {}
        fn forward(_: &mut Ctx<'_>, io: Forward<'_>) {
            let Forward {
                params,
                x,
                y,
                saved,
                ..
            } = io;
            y.copy_from_slice(x);
            A::forward_bias(y, params, saved, N);
        }
        fn backward(_: &mut Ctx<'_>, io: Backward<'_>) {
            let Backward {
                y,
                saved,
                dy,
                dx,
                dparams,
                ..
            } = io;
            A::backward(saved, y, dy, N);
            dparams.fill(0.0);
            crate::lane::add_rows(dparams, dy);
            dx.give(dy);
        }
    }

    fn check<A: Ref64>() {
        const N: usize = 11;
        for batch in [1, 3] {
            let mut rng = crate::rng::Rng::new(crate::rng::Seed(5));
            let x: Vec<f32> = (0..batch * N).map(|_| rng.uniform(-3.0, 3.0)).collect();
            let mut c = Check::new(batch);
            c.x = Some(x.clone());
            let reference = |p: &[f64], x: &[f64], batch: usize| {
                let z: Vec<f64> = (0..batch * N).map(|i| x[i] + p[i % N]).collect();
                A::f64(&z, N)
            };
            let out = c.run::<BiasAct<A, N>>(&reference);
            // Without bias, `forward` and `forward_bias` agree bit for bit.
            let mut y1 = vec![0.0; x.len()];
            A::forward(&x, &mut y1, N);
            let mut y2 = x.clone();
            let mut z = vec![0.0; if A::NEEDS_Z { x.len() } else { 0 }];
            A::forward_bias(&mut y2, &[], &mut z, N);
            assert_eq!(bits(&y1), bits(&y2), "{}", A::NAME);
            if A::NEEDS_Z {
                assert_eq!(bits(&z), bits(&x));
                assert_eq!(out.saved.len(), x.len());
            }
        }
    }

    #[test]
    fn forward_and_backward_match_references() {
        check::<Identity>();
        check::<Relu>();
        check::<LeakyRelu>();
        check::<LeakyRelu<3, 10>>();
        check::<LeakyRelu<-1, 2>>();
        check::<Elu>();
        check::<Sigmoid>();
        check::<Tanh>();
        check::<Gelu>();
        check::<Swish>();
        check::<Softmax>();
    }

    fn grad_at<A: Activation>(z: f32) -> f32 {
        let zs = [z];
        let mut y = [0.0];
        A::forward(&zs, &mut y, 1);
        let mut dy = [1.0];
        A::backward(&zs, &y, &mut dy, 1);
        dy[0]
    }

    #[test]
    fn kinks_follow_pytorch() {
        assert_eq!(grad_at::<Relu>(0.0), 0.0);
        assert_eq!(grad_at::<Relu>(-0.0), 0.0);
        assert_eq!(grad_at::<Relu>(1e-30), 1.0);
        assert_eq!(grad_at::<LeakyRelu>(0.0), 0.01);
        assert_eq!(grad_at::<LeakyRelu<3, 10>>(0.0), 0.3);
        assert_eq!(grad_at::<LeakyRelu<-1, 2>>(0.0), -0.5);
        assert_eq!(grad_at::<LeakyRelu<-1, 2>>(-2.0), -0.5);
        assert_eq!(grad_at::<LeakyRelu<0, 1>>(-2.0), 0.0);
        assert_eq!(grad_at::<Elu>(0.0), 1.0);
        assert_eq!(LeakyRelu::<3, 10>::SLOPE, 0.3);
    }

    #[test]
    fn gelu_derivative_from_its_output_is_within_ulps_of_the_exact_one() {
        let exact = |z: f64| {
            let cdf = 0.5 * (1.0 + libm::erf(z / core::f64::consts::SQRT_2));
            cdf + z * (-0.5 * z * z).exp() / (2.0 * core::f64::consts::PI).sqrt()
        };
        let tiny = [
            0.0, -0.0, 1e-30, -1e-30, 1e-40, -1e-40, 7.9e-31, 1e-20, -1e-7,
        ];
        let sweep = (0..4801).map(|i| (i as f32 - 2400.0) * 0.005);
        for z in tiny.into_iter().chain(sweep) {
            let (got, want) = (f64::from(grad_at::<Gelu>(z)), exact(f64::from(z)));
            assert!(
                (got - want).abs() <= 2e-7 + 3e-7 * want.abs(),
                "gelu'({z:e}) = {got}, exactly {want}"
            );
        }
        assert_eq!(grad_at::<Gelu>(0.0), 0.5);
        assert!(grad_at::<Gelu>(f32::NAN).is_nan());
    }

    #[test]
    fn extreme_inputs_stay_finite() {
        let z = [
            -100.0, -80.0, -20.0, -1e-7, 0.0, 1e-7, 20.0, 80.0, 100.0, 1e30, -1e30,
        ];
        let z64: Vec<f64> = z.iter().map(|&v| f64::from(v)).collect();
        fn run<A: Ref64>(z: &[f32], z64: &[f64]) {
            let mut y = vec![0.0; z.len()];
            A::forward(z, &mut y, z.len());
            assert!(y.iter().all(|v| v.is_finite()), "{}: {y:?}", A::NAME);
            assert_close(A::NAME, &y, &A::f64(z64, z.len()), 1e-5, 1e-30);
            let mut dy = vec![1.0; z.len()];
            A::backward(z, &y, &mut dy, z.len());
            assert!(dy.iter().all(|v| v.is_finite()), "{}: {dy:?}", A::NAME);
        }
        run::<Relu>(&z, &z64);
        run::<LeakyRelu>(&z, &z64);
        run::<Sigmoid>(&z, &z64);
        run::<Tanh>(&z, &z64);
        run::<Softmax>(&z, &z64);
        // Gelu, Swish and Elu underflow below -80 or overflow e^z at 1e30 in their derivative
        // only through selected-away lanes; their values stay finite on a milder range.
        let z = &z[1..8];
        let z64 = &z64[1..8];
        run::<Elu>(z, z64);
        run::<Gelu>(z, z64);
        run::<Swish>(z, z64);
        let mut y = [0.0f32; 2];
        Relu::forward(&[f32::NAN, -1.0], &mut y, 2);
        assert!(y[0].is_nan());
    }

    /// Forward with a bias (saving `z`) and backward of `E` on `lanes`, over rows of 37
    /// awkward values: what each writes.
    fn on_lanes<E: Elementwise>(lanes: lane::Tested) -> [Vec<f32>; 3] {
        let special = [
            0.0,
            -0.0,
            1e-30,
            -1e-30,
            88.0,
            -104.0,
            1e20,
            -1e20,
            f32::INFINITY,
        ];
        let row = 37;
        let values = |salt: usize| -> Vec<f32> {
            (0..3 * row)
                .map(|i| match (i + salt) % 13 {
                    k @ 0..=8 => special[k],
                    k => ((i * 7 + salt) % 23) as f32 * 0.37 - 4.0 + k as f32 * 1e-3,
                })
                .collect()
        };
        let (mut y, bias) = (values(0), values(5)[..row].to_vec());
        let mut z = vec![0.0; y.len()];
        lanes.run(LaneForwardBias::<E> {
            y: &mut y,
            bias: &bias,
            z: &mut z,
            row,
            e: PhantomData,
        });
        let mut dy = values(3);
        let z_read = if E::NEEDS_Z { &z[..] } else { &y[..] };
        lanes.run(LaneBackward::<E> {
            z: z_read,
            y: &y,
            dy: &mut dy,
            e: PhantomData,
        });
        [y, z, dy]
    }

    #[test]
    fn every_lane_type_gives_the_same_bits_for_every_activation() {
        fn check<E: Elementwise>() {
            let same = |a: &[f32], b: &[f32]| {
                a.iter()
                    .zip(b)
                    .all(|(x, y)| x.to_bits() == y.to_bits() || x.is_nan() && y.is_nan())
            };
            let want = on_lanes::<E>(lane::Tested::One);
            for lanes in lane::Tested::every() {
                let got = on_lanes::<E>(lanes);
                for (g, w) in got.iter().zip(&want) {
                    assert!(same(g, w), "{} on {lanes:?}", E::NAME);
                }
            }
        }
        check::<Relu>();
        check::<LeakyRelu>();
        check::<LeakyRelu<-1, 2>>();
        check::<Elu>();
        check::<Sigmoid>();
        check::<Tanh>();
        check::<Swish>();
        check::<Gelu>();
    }

    /// Softmax of one row in one `f32x8` pass, as it was computed before its exponentials ran
    /// on the dispatched lanes.
    fn softmax_in_f32x8(y: &mut [f32]) {
        let max = y
            .iter()
            .fold(f32::NEG_INFINITY, |m, &v| crate::math::max(m, v));
        let (m, mut sum) = (f32x8::splat(max), f32x8::ZERO);
        for chunk in y.chunks_mut(8) {
            let mut v = [f32::NEG_INFINITY; 8];
            v[..chunk.len()].copy_from_slice(chunk);
            let e = (f32x8::from(v) - m).exp();
            sum += e;
            chunk.copy_from_slice(&e.as_array()[..chunk.len()]);
        }
        let sum = f32x8::splat(sum.reduce_add());
        for v in y.iter_mut() {
            *v = (f32x8::splat(*v) / sum).as_array()[0];
        }
    }

    #[test]
    fn causal_softmax_rows_give_the_bits_of_each_prefix_on_every_lane_type() {
        let seq = 37;
        let scores: Vec<f32> = (0..seq * seq)
            .map(|i| ((i * 53 % 31) as f32 - 15.0) * 0.61)
            .collect();
        // Every key real, and the keys from 20 on padding.
        for keys in [seq, 20] {
            let mut want = scores.clone();
            for (i, row) in want.chunks_exact_mut(seq).enumerate() {
                let (seen, masked) = row.split_at_mut((i + 1).min(keys));
                softmax_in_f32x8(seen);
                masked.fill(0.0);
            }
            for lanes in lane::Tested::every() {
                let mut got = scores.clone();
                let rows = SoftmaxRows {
                    y: &mut got,
                    row: seq,
                    causal: Some(keys),
                };
                lanes.run(rows);
                assert_eq!(bits(&got), bits(&want), "{lanes:?}, {keys} keys");
            }
        }
    }

    #[test]
    fn softmax_rows_give_the_bits_of_one_f32x8_pass() {
        for len in [1, 7, 8, 15, 16, 17, 33, 64, 100] {
            let row: Vec<f32> = (0..len)
                .map(|i| ((i * 37 % 29) as f32 - 14.0) * 0.77 + if i == 3 { -1e30 } else { 0.0 })
                .collect();
            let (mut got, mut want) = (row.clone(), row);
            Softmax::rows(&mut got, len, None);
            softmax_in_f32x8(&mut want);
            assert_eq!(
                bits(&got),
                bits(&want),
                "row of {len} on {:?}",
                lane::Capability::active()
            );
        }
    }
}
