//! Two-dimensional convolution over NHWC images, by im2col and GEMM.

use super::lanes::add_rows;
use super::{buffers, Activation, Ctx, Grad, Identity, Init, Layer, Tensor};
use crate::kernels::gemm::{gemm, workspace_len, MatMut, MatRef};
use core::marker::PhantomData;

/// How a convolution pads its input: [`Valid`] or [`Same`].
pub trait Padding {
    /// `true` for [`Same`].
    const SAME: bool;
}

/// No padding: the output is `(in - k) / stride + 1` positions long.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Valid;

impl Padding for Valid {
    const SAME: bool = false;
}

/// TensorFlow's and Keras' `"same"`: the output is `ceil(in / stride)` positions long, with
/// `max((out - 1) * stride + k - in, 0)` zeros of padding, the smaller half before.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Same;

impl Padding for Same {
    const SAME: bool = true;
}

/// Output length along one dimension.
const fn out_len(input: usize, k: usize, stride: usize, same: bool) -> usize {
    assert!(stride > 0, "Conv2d: STRIDE must be at least 1");
    assert!(k > 0, "Conv2d: the kernel must be at least 1x1");
    if same {
        input.div_ceil(stride)
    } else {
        assert!(
            input >= k,
            "Conv2d: with Valid padding the input must be at least as large as the kernel"
        );
        (input - k) / stride + 1
    }
}

/// Zeros of padding before the input along one dimension.
const fn pad_before(input: usize, k: usize, stride: usize, same: bool) -> usize {
    let need = (out_len(input, k, stride, same) - 1) * stride + k;
    if same && need > input {
        (need - input) / 2
    } else {
        0
    }
}

/// A convolution of an `H`x`W` image with `C` channels (NHWC, `H * W * C` values per sample)
/// by `F` filters of `KH`x`KW`, moving by `STRIDE`, with [`Valid`] or [`Same`] padding `P`,
/// followed by the activation `A`; the output is [`OH`](Self::OH)x[`OW`](Self::OW)x`F`, NHWC.
///
/// Parameters, in order: `weight`, `[KH, KW, C, F]` (HWIO, as Keras stores it; PyTorch's
/// OIHW is its permutation), initialized with [`Init::GlorotUniform`] over fans
/// `(KH * KW * C, KH * KW * F)`; `bias`, `[F]`, [`Init::Zeros`].
///
/// Forward copies each receptive field into a row of a patch matrix in
/// [`Ctx::scratch`] (im2col, [`scratch_len`](Layer::scratch_len)), multiplies it by the weight
/// seen as a `(KH * KW * C)`x`F` matrix in one GEMM, then adds the bias and applies `A` in one
/// pass. Backward rebuilds the patches for `dW = patchesᵀ·dz` and scatters `dz·Wᵀ` back onto
/// the image positions in a fixed order. A 1x1 convolution with stride 1 uses the image
/// itself as its patch matrix and needs no scratch.
pub struct Conv2d<
    const H: usize,
    const W: usize,
    const C: usize,
    const F: usize,
    const KH: usize,
    const KW: usize,
    const STRIDE: usize = 1,
    P: Padding = Valid,
    A: Activation = Identity,
>(PhantomData<fn() -> (P, A)>);

impl<
        const H: usize,
        const W: usize,
        const C: usize,
        const F: usize,
        const KH: usize,
        const KW: usize,
        const STRIDE: usize,
        P: Padding,
        A: Activation,
    > Conv2d<H, W, C, F, KH, KW, STRIDE, P, A>
{
    /// Output height.
    pub const OH: usize = out_len(H, KH, STRIDE, P::SAME);
    /// Output width.
    pub const OW: usize = out_len(W, KW, STRIDE, P::SAME);
    /// Rows of zero padding above the image.
    pub const PAD_TOP: usize = pad_before(H, KH, STRIDE, P::SAME);
    /// Columns of zero padding left of the image.
    pub const PAD_LEFT: usize = pad_before(W, KW, STRIDE, P::SAME);
    /// Values in one receptive field, `KH * KW * C`: the length of a patch.
    pub const PATCH: usize = KH * KW * C;
    /// Whether the image is its own patch matrix (1x1 kernel, stride 1).
    const DIRECT: bool = KH == 1 && KW == 1 && STRIDE == 1;

    /// The layer (it holds no data: parameters live in the model's flat buffer).
    pub const fn new() -> Self {
        Conv2d(PhantomData)
    }

    /// Rows of the patch matrix for `batch` samples: one per output position.
    const fn positions(batch: usize) -> usize {
        batch * Self::OH * Self::OW
    }

    /// Visits every receptive field, in order: `f(k, Some(i))` for the `C` values starting
    /// at `k` in the patch matrix that come from the `C` values starting at `i` in the images,
    /// `f(k, None)` for those that fall in the padding.
    fn for_each_field(batch: usize, mut f: impl FnMut(usize, Option<usize>)) {
        let mut k = 0;
        for n in 0..batch {
            let image = n * H * W * C;
            for oh in 0..Self::OH {
                for ow in 0..Self::OW {
                    for kh in 0..KH {
                        let ih = (oh * STRIDE + kh)
                            .checked_sub(Self::PAD_TOP)
                            .filter(|&v| v < H);
                        for kw in 0..KW {
                            let iw = (ow * STRIDE + kw)
                                .checked_sub(Self::PAD_LEFT)
                                .filter(|&v| v < W);
                            let i = ih.zip(iw).map(|(ih, iw)| image + (ih * W + iw) * C);
                            f(k, i);
                            k += C;
                        }
                    }
                }
            }
        }
    }

    /// The patch matrix of `x` into `cols`.
    fn im2col(x: &[f32], cols: &mut [f32], batch: usize) {
        Self::for_each_field(batch, |k, i| match i {
            Some(i) => cols[k..k + C].copy_from_slice(&x[i..i + C]),
            None => cols[k..k + C].fill(0.0),
        });
    }

    /// Adds each patch value of `dcols` to the image value it was copied from, in order.
    fn col2im(dcols: &[f32], dx: &mut [f32], batch: usize) {
        Self::for_each_field(batch, |k, i| {
            if let Some(i) = i {
                for (d, &s) in dx[i..i + C].iter_mut().zip(&dcols[k..k + C]) {
                    *d += s;
                }
            }
        });
    }
}

impl<
        const H: usize,
        const W: usize,
        const C: usize,
        const F: usize,
        const KH: usize,
        const KW: usize,
        const STRIDE: usize,
        P: Padding,
        A: Activation,
    > Default for Conv2d<H, W, C, F, KH, KW, STRIDE, P, A>
{
    fn default() -> Self {
        Self::new()
    }
}

impl<
        const H: usize,
        const W: usize,
        const C: usize,
        const F: usize,
        const KH: usize,
        const KW: usize,
        const STRIDE: usize,
        P: Padding,
        A: Activation,
    > Clone for Conv2d<H, W, C, F, KH, KW, STRIDE, P, A>
{
    fn clone(&self) -> Self {
        *self
    }
}

impl<
        const H: usize,
        const W: usize,
        const C: usize,
        const F: usize,
        const KH: usize,
        const KW: usize,
        const STRIDE: usize,
        P: Padding,
        A: Activation,
    > Copy for Conv2d<H, W, C, F, KH, KW, STRIDE, P, A>
{
}

impl<
        const H: usize,
        const W: usize,
        const C: usize,
        const F: usize,
        const KH: usize,
        const KW: usize,
        const STRIDE: usize,
        P: Padding,
        A: Activation,
    > core::fmt::Debug for Conv2d<H, W, C, F, KH, KW, STRIDE, P, A>
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let padding = if P::SAME { "same" } else { "valid" };
        write!(
            f,
            "Conv2d<{H}x{W}x{C} -> {}x{}x{F}, {KH}x{KW}/{STRIDE}, {padding}, {}>",
            Self::OH,
            Self::OW,
            A::NAME
        )
    }
}

impl<
        const H: usize,
        const W: usize,
        const C: usize,
        const F: usize,
        const KH: usize,
        const KW: usize,
        const STRIDE: usize,
        P: Padding,
        A: Activation,
    > Layer for Conv2d<H, W, C, F, KH, KW, STRIDE, P, A>
{
    const IN: usize = H * W * C;
    const OUT: usize = Self::OH * Self::OW * F;
    const PARAMS: usize = Self::PATCH * F + F;
    const STATE: usize = 0;
    const SAVED: usize = if A::NEEDS_Z { Self::OUT } else { 0 };
    const TENSORS: &'static [Tensor] = &[
        Tensor {
            name: "weight",
            shape: &[KH, KW, C, F],
            fans: (KH * KW * C, KH * KW * F),
            init: Init::GlorotUniform,
        },
        // The weight's fans, so that `TorchDefault` bounds the bias as PyTorch does.
        Tensor {
            name: "bias",
            shape: &[F],
            fans: (KH * KW * C, KH * KW * F),
            init: Init::Zeros,
        },
    ];

    fn scratch_len(batch: usize) -> usize {
        if Self::DIRECT {
            0
        } else {
            Self::positions(batch) * Self::PATCH
        }
    }

    fn gemm_len(batch: usize) -> usize {
        let (r, k) = (Self::positions(batch), Self::PATCH);
        workspace_len(r, k, F)
            .max(workspace_len(k, r, F))
            .max(workspace_len(r, F, k))
    }

    fn init_state(_state: &mut [f32]) {}

    fn forward(
        ctx: &mut Ctx<'_>,
        params: &[f32],
        state: &mut [f32],
        x: &[f32],
        y: &mut [f32],
        saved: &mut [f32],
        batch: usize,
    ) {
        buffers::forward::<Self>(params, state, x, y, saved, batch);
        let (r, k) = (Self::positions(batch), Self::PATCH);
        let (w, b) = params.split_at(k * F);
        let cols: &[f32] = if Self::DIRECT {
            x
        } else {
            let cols = &mut ctx.scratch[..r * k];
            Self::im2col(x, cols, batch);
            cols
        };
        gemm(
            1.0,
            MatRef::row_major(cols, r, k),
            MatRef::row_major(w, k, F),
            0.0,
            MatMut::row_major(y, r, F),
            ctx.gemm,
        );
        A::forward_bias(y, b, saved, F);
    }

    fn backward(
        ctx: &mut Ctx<'_>,
        params: &[f32],
        x: &[f32],
        y: &[f32],
        saved: &[f32],
        dy: &mut [f32],
        dx: Grad<'_>,
        dparams: &mut [f32],
        batch: usize,
    ) {
        buffers::backward::<Self>(params, x, y, saved, dy, &dx, dparams, batch);
        let (r, k) = (Self::positions(batch), Self::PATCH);
        A::backward(saved, y, dy, F);
        let dz = &*dy;
        let (dw, db) = dparams.split_at_mut(k * F);
        db.fill(0.0);
        add_rows(db, dz);
        let w = &params[..k * F];
        let scratch = &mut ctx.scratch[..Self::scratch_len(batch)];
        let cols: &[f32] = if Self::DIRECT {
            x
        } else {
            Self::im2col(x, scratch, batch);
            scratch
        };
        gemm(
            1.0,
            MatRef::row_major(cols, r, k).t(),
            MatRef::row_major(dz, r, F),
            0.0,
            MatMut::row_major(dw, k, F),
            ctx.gemm,
        );
        let dz_wt = |beta: f32, out: &mut [f32], ws: &mut [f32]| {
            gemm(
                1.0,
                MatRef::row_major(dz, r, F),
                MatRef::row_major(w, k, F).t(),
                beta,
                MatMut::row_major(out, r, k),
                ws,
            );
        };
        match dx {
            Grad::Skip => {}
            Grad::Set(dx) if Self::DIRECT => dz_wt(0.0, dx, ctx.gemm),
            Grad::Add(dx) if Self::DIRECT => dz_wt(1.0, dx, ctx.gemm),
            Grad::Set(dx) => {
                dz_wt(0.0, scratch, ctx.gemm);
                dx.fill(0.0);
                Self::col2im(scratch, dx, batch);
            }
            Grad::Add(dx) => {
                dz_wt(0.0, scratch, ctx.gemm);
                Self::col2im(scratch, dx, batch);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::layers::activation::reference::Ref64;
    use crate::layers::gradcheck::Check;
    use crate::layers::{Gelu, Relu, Softmax, Tanh};
    use std::vec::Vec;

    /// The TF/Keras rule, written out again: (output length, padding before).
    fn geometry(input: usize, k: usize, stride: usize, same: bool) -> (usize, usize) {
        if same {
            let out = input.div_ceil(stride);
            let total = ((out - 1) * stride + k).saturating_sub(input);
            (out, total / 2)
        } else {
            ((input - k) / stride + 1, 0)
        }
    }

    fn reference<
        const H: usize,
        const W: usize,
        const C: usize,
        const F: usize,
        const KH: usize,
        const KW: usize,
        const S: usize,
        P: Padding,
        A: Ref64,
    >(
        p: &[f64],
        x: &[f64],
        batch: usize,
    ) -> Vec<f64> {
        let (oh_n, pt) = geometry(H, KH, S, P::SAME);
        let (ow_n, pl) = geometry(W, KW, S, P::SAME);
        let (w, b) = p.split_at(KH * KW * C * F);
        let mut z = Vec::new();
        for n in 0..batch {
            for oh in 0..oh_n {
                for ow in 0..ow_n {
                    for f in 0..F {
                        let mut s = b[f];
                        for kh in 0..KH {
                            for kw in 0..KW {
                                let ih = (oh * S + kh) as isize - pt as isize;
                                let iw = (ow * S + kw) as isize - pl as isize;
                                if ih < 0 || iw < 0 || ih >= H as isize || iw >= W as isize {
                                    continue;
                                }
                                let (ih, iw) = (ih as usize, iw as usize);
                                for c in 0..C {
                                    s += x[((n * H + ih) * W + iw) * C + c]
                                        * w[((kh * KW + kw) * C + c) * F + f];
                                }
                            }
                        }
                        z.push(s);
                    }
                }
            }
        }
        A::f64(&z, F)
    }

    fn check<
        const H: usize,
        const W: usize,
        const C: usize,
        const F: usize,
        const KH: usize,
        const KW: usize,
        const S: usize,
        P: Padding,
        A: Ref64,
    >(
        batch: usize,
    ) {
        let (oh, _) = geometry(H, KH, S, P::SAME);
        let (ow, _) = geometry(W, KW, S, P::SAME);
        assert_eq!(Conv2d::<H, W, C, F, KH, KW, S, P, A>::OH, oh);
        assert_eq!(Conv2d::<H, W, C, F, KH, KW, S, P, A>::OW, ow);
        Check::new(batch)
            .run::<Conv2d<H, W, C, F, KH, KW, S, P, A>>(&reference::<H, W, C, F, KH, KW, S, P, A>);
    }

    #[test]
    fn matches_reference_and_finite_differences() {
        check::<5, 5, 2, 3, 3, 3, 1, Valid, Identity>(2);
        check::<6, 5, 3, 4, 3, 3, 2, Same, Relu>(2);
        check::<5, 4, 2, 2, 2, 3, 2, Same, Gelu>(2);
        check::<7, 7, 1, 2, 3, 3, 2, Valid, Identity>(2);
        check::<3, 3, 2, 2, 3, 3, 1, Same, Softmax>(3);
        // 1x1, stride 1: the image is its own patch matrix.
        check::<4, 3, 3, 5, 1, 1, 1, Valid, Tanh>(3);
        check::<2, 2, 9, 3, 1, 1, 1, Same, Identity>(2);
    }

    #[test]
    fn shapes_follow_keras() {
        type Mnist = Conv2d<28, 28, 1, 32, 3, 3, 2, Same, Relu>;
        assert_eq!(
            (Mnist::OH, Mnist::OW, Mnist::PAD_TOP, Mnist::PAD_LEFT),
            (14, 14, 0, 0)
        );
        assert_eq!(Mnist::OUT, 14 * 14 * 32);
        assert_eq!(Mnist::PARAMS, 3 * 3 * 32 + 32);
        assert_eq!(Mnist::TENSORS[0].shape, &[3, 3, 1, 32]);
        assert_eq!(Mnist::TENSORS[0].fans, (9, 288));
        type Odd = Conv2d<5, 5, 1, 1, 4, 4, 1, Same>;
        // pad_total = 3: one row above, two below (TF puts the extra one after).
        assert_eq!((Odd::OH, Odd::PAD_TOP), (5, 1));
        type V = Conv2d<7, 6, 2, 3, 3, 2, 2>;
        assert_eq!((V::OH, V::OW, V::PAD_TOP), (3, 3, 0));
        assert_eq!(V::scratch_len(2), 2 * 9 * 12);
        assert_eq!(Conv2d::<4, 4, 3, 5, 1, 1>::scratch_len(8), 0);
        assert_eq!(
            std::format!("{:?}", Mnist::new()),
            "Conv2d<28x28x1 -> 14x14x32, 3x3/2, same, relu>"
        );
    }
}
