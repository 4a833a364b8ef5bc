//! Two-dimensional convolution over NHWC images, by im2col and GEMM: [`Conv2d`], whose sizes
//! are constants, over [`conv_forward`] and [`conv_backward`], which take them at run time
//! ([`ConvDims`]).

use super::activation::{backward_rows, forward_bias_rows};
use super::{
    buffers, Activation, Backward, Ctx, Forward, Grad, Identity, Init, Layer, Tensor, Torch,
};
use crate::kernels::gemm::{
    gemm, pool_threads, products_workspace_len, MatMut, MatRef, Product, Scaled,
};
use crate::kernels::parallel::{for_sample_runs, PerSample};
use crate::lane::{add_rows, copy};
use crate::LANES;
use core::marker::PhantomData;
use core::ops::Range;

/// How a convolution pads its input: [`Valid`] or [`Same`].
pub trait Padding {
    /// `true` for [`Same`].
    const SAME: bool;
    /// Keras' name: `same` or `valid`.
    const NAME: &'static str = if Self::SAME { "same" } else { "valid" };
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
#[inline(always)]
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
#[inline(always)]
const fn pad_before(input: usize, k: usize, stride: usize, same: bool) -> usize {
    let need = (out_len(input, k, stride, same) - 1) * stride + k;
    if same && need > input {
        (need - input) / 2
    } else {
        0
    }
}

/// The sizes of a convolution, for [`conv_forward`] and [`conv_backward`]: a model whose
/// shapes are known only at run time builds it; [`Conv2d`] passes its constants.
///
/// The output sizes follow Keras: see [`Valid`] and [`Same`]. The methods that derive them
/// panic on a stride or kernel of 0, and on a kernel larger than the input with `Valid`
/// padding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvDims {
    /// Input height.
    pub h: usize,
    /// Input width.
    pub w: usize,
    /// Input channels.
    pub c: usize,
    /// Filters: output channels.
    pub f: usize,
    /// Kernel height.
    pub kh: usize,
    /// Kernel width.
    pub kw: usize,
    /// Step between receptive fields, along both dimensions.
    pub stride: usize,
    /// [`Same`] padding when `true`, [`Valid`] when `false`.
    pub same: bool,
    /// Whether the parameters hold a bias after the weight.
    pub bias: bool,
}

impl ConvDims {
    /// Output height.
    #[inline(always)]
    pub const fn out_h(&self) -> usize {
        out_len(self.h, self.kh, self.stride, self.same)
    }

    /// Output width.
    #[inline(always)]
    pub const fn out_w(&self) -> usize {
        out_len(self.w, self.kw, self.stride, self.same)
    }

    /// Rows of zero padding above the image.
    #[inline(always)]
    pub const fn pad_top(&self) -> usize {
        pad_before(self.h, self.kh, self.stride, self.same)
    }

    /// Columns of zero padding left of the image.
    #[inline(always)]
    pub const fn pad_left(&self) -> usize {
        pad_before(self.w, self.kw, self.stride, self.same)
    }

    /// Values in one receptive field, `kh * kw * c`: the length of a patch.
    #[inline(always)]
    pub const fn patch(&self) -> usize {
        self.kh * self.kw * self.c
    }

    /// Input values per sample, `h * w * c`.
    #[inline(always)]
    pub const fn inputs(&self) -> usize {
        self.h * self.w * self.c
    }

    /// Output values per sample, `out_h * out_w * f`.
    #[inline(always)]
    pub const fn outputs(&self) -> usize {
        self.out_h() * self.out_w() * self.f
    }

    /// Parameters: the weight, `[kh, kw, c, f]` (HWIO), then the bias, `[f]`, when
    /// [`bias`](Self::bias).
    #[inline(always)]
    pub const fn params(&self) -> usize {
        self.patch() * self.f + if self.bias { self.f } else { 0 }
    }

    /// The values of each tensor: the weight's, then the bias's (0 without a bias).
    #[inline(always)]
    pub const fn tensor_lens(&self) -> [usize; 2] {
        [self.patch() * self.f, if self.bias { self.f } else { 0 }]
    }

    /// Values per sample that [`conv_forward`] saves for [`conv_backward`] with activation
    /// `A`: the pre-activation when `A` needs it, else nothing.
    #[inline(always)]
    pub const fn saved<A: Activation>(&self) -> usize {
        if A::NEEDS_Z {
            self.outputs()
        } else {
            0
        }
    }

    /// Whether the image is its own patch matrix (1x1 kernel, stride 1).
    #[inline(always)]
    const fn direct(&self) -> bool {
        self.kh == 1 && self.kw == 1 && self.stride == 1
    }

    /// Rows of the patch matrix for `batch` samples: one per output position.
    #[inline(always)]
    const fn positions(&self, batch: usize) -> usize {
        batch * self.out_h() * self.out_w()
    }
}

/// Scratch one [`conv_forward`] or [`conv_backward`] call needs for `batch` samples: the patch
/// matrix, `batch * out_h * out_w` rows of [`patch`](ConvDims::patch) values (none for a 1x1
/// kernel with stride 1).
#[inline]
pub const fn conv_scratch_len(dims: ConvDims, batch: usize) -> usize {
    if dims.direct() {
        0
    } else {
        dims.positions(batch) * dims.patch()
    }
}

/// The products of [`conv_forward`] and [`conv_backward`] over the patch matrix `P`
/// (positions x patch): `P·W`, `Pᵀ·dy` and `dy·Wᵀ`.
pub const fn conv_products(dims: ConvDims) -> [Product; 3] {
    let (r, k, f) = (dims.positions(1), dims.patch(), dims.f);
    [
        Product {
            m: r,
            k,
            n: f,
            scaled: Scaled::M,
        },
        Product {
            m: k,
            k: r,
            n: f,
            scaled: Scaled::K,
        },
        Product {
            m: r,
            k: f,
            n: k,
            scaled: Scaled::M,
        },
    ]
}

/// GEMM workspace one [`conv_forward`] or [`conv_backward`] call needs for `batch` samples.
#[inline]
pub fn conv_gemm_len(dims: ConvDims, batch: usize) -> usize {
    products_workspace_len(&conv_products(dims), batch, pool_threads())
}

/// Runs `$run` for every row of every receptive field of `$batch` images, in order: `$k` is
/// the offset of the row's values in the patch matrix, `$i` the offset in the images of the
/// `$len` values (whole pixels of `c` channels, along the image's row) that lie inside the
/// image; `$pad` runs with `$k` and `$len` for the parts of the row in the padding. A macro
/// rather than a function taking closures: the slices the bodies touch stay the caller's own
/// arguments, so that the compiler keeps knowing they do not overlap.
macro_rules! for_each_field_row {
    (
        $dims:expr,
        $batch:expr,
        |$k:ident, $i:ident, $len:ident| $run:expr,
        |$kp:ident, $lenp:ident| $pad:expr
    ) => {{
        let ConvDims {
            h,
            w,
            c,
            kh,
            kw,
            stride,
            ..
        } = $dims;
        let (oh_n, ow_n) = ($dims.out_h(), $dims.out_w());
        let (top, left) = ($dims.pad_top(), $dims.pad_left());
        let mut row = 0;
        for n in 0..$batch {
            let image = n * h * w * c;
            for oh in 0..oh_n {
                for ow in 0..ow_n {
                    // The kernel columns `dw0..dw1` fall inside the image.
                    let first = ow * stride;
                    let dw0 = left.saturating_sub(first).min(kw);
                    let dw1 = (w + left).saturating_sub(first).clamp(dw0, kw);
                    for dh in 0..kh {
                        let ih = (oh * stride + dh).checked_sub(top).filter(|&v| v < h);
                        match ih {
                            Some(ih) if dw1 > dw0 => {
                                if dw0 > 0 {
                                    let ($kp, $lenp) = (row, dw0 * c);
                                    $pad;
                                }
                                let $k = row + dw0 * c;
                                let $i = image + (ih * w + first + dw0 - left) * c;
                                let $len = (dw1 - dw0) * c;
                                $run;
                                if dw1 < kw {
                                    let ($kp, $lenp) = (row + dw1 * c, (kw - dw1) * c);
                                    $pad;
                                }
                            }
                            _ => {
                                let ($kp, $lenp) = (row, kw * c);
                                $pad;
                            }
                        }
                        row += kw * c;
                    }
                }
            }
        }
    }};
}

/// The patch matrix of `batch` images `x` into `cols`.
#[inline(always)]
fn im2col_images(dims: ConvDims, x: &[f32], cols: &mut [f32], batch: usize) {
    for_each_field_row!(
        dims,
        batch,
        |k, i, len| copy(&mut cols[k..k + len], &x[i..i + len]),
        |k, len| cols[k..k + len].fill(0.0)
    );
}

/// Adds each patch value of `dcols` (of `batch` images) to the image value it was copied
/// from, in order.
#[inline(always)]
fn col2im_images(dims: ConvDims, dcols: &[f32], dx: &mut [f32], batch: usize) {
    for_each_field_row!(
        dims,
        batch,
        |k, i, len| add_to(&mut dx[i..i + len], &dcols[k..k + len]),
        |k, len| {
            let _ = (k, len);
        }
    );
}

/// Values of the patch matrix per image.
#[inline(always)]
const fn patches_per_image(dims: ConvDims) -> usize {
    dims.positions(1) * dims.patch()
}

/// The patch matrix of `x` into `cols`: runs of whole images on the threads of the pool when
/// it is large ([`PASS_PARALLEL_MIN`](crate::kernels::parallel::PASS_PARALLEL_MIN)).
#[inline(always)]
fn im2col(dims: ConvDims, x: &[f32], cols: &mut [f32], batch: usize) {
    let per = patches_per_image(dims);
    let out = PerSample { data: cols, per };
    for_sample_runs(batch, batch * per, out, &|images: Range<usize>, cols| {
        let x = &x[images.start * dims.inputs()..images.end * dims.inputs()];
        im2col_images(dims, x, cols.data, images.len());
    });
}

/// Adds each patch value of `dcols` to the image value it was copied from, each image's in
/// order: runs of whole images on the threads of the pool when it is large.
#[inline(always)]
fn col2im(dims: ConvDims, dcols: &[f32], dx: &mut [f32], batch: usize) {
    let per = patches_per_image(dims);
    let out = PerSample {
        data: dx,
        per: dims.inputs(),
    };
    for_sample_runs(batch, batch * per, out, &|images: Range<usize>, dx| {
        let dcols = &dcols[images.start * per..images.end * per];
        col2im_images(dims, dcols, dx.data, images.len());
    });
}

/// `d[j] += s[j]`. From a lane's worth of values on, a lane at a time through a local copy of
/// `s`, so that the compiler sees the loads apart from the stores and vectorizes (`c` is a
/// constant there).
#[inline(always)]
fn add_to(d: &mut [f32], s: &[f32]) {
    if d.len() < LANES {
        for (d, &s) in d.iter_mut().zip(s) {
            *d += s;
        }
        return;
    }
    for (d, s) in d.chunks_mut(LANES).zip(s.chunks(LANES)) {
        let mut t = [0.0f32; LANES];
        t[..s.len()].copy_from_slice(s);
        for (d, &t) in d.iter_mut().zip(&t) {
            *d += t;
        }
    }
}

/// `y = A(conv(x, W) + b)` for `io.batch` NHWC images of `dims.h`x`dims.w`x`dims.c`, writing
/// `batch` images of `out_h`x`out_w`x`f`: each receptive field is copied into a row of a patch
/// matrix in `ctx.scratch` (im2col, [`conv_scratch_len`]), multiplied by the weight seen as a
/// `(kh * kw * c)`x`f` matrix in one GEMM; then one pass adds the bias, writes the
/// pre-activation into `io.saved` if `A` needs it ([`ConvDims::saved`] values per sample)
/// and applies `A`. A 1x1 kernel with stride 1 uses the image itself as its patch matrix.
/// `io.state` is not read (the layer has none).
///
/// `io.params` is the weight, `[kh, kw, c, f]` (HWIO), followed by the bias when `dims.bias`.
/// Always inlined, so that [`Conv2d`], which passes constants, compiles as if its sizes were
/// written into the body (the copies of `c` values become moves).
///
/// # Panics
/// If a buffer's length does not follow from `dims` and `batch`, or `ctx.scratch` or
/// `ctx.gemm` is shorter than [`conv_scratch_len`] or [`conv_gemm_len`].
#[inline(always)]
pub fn conv_forward<A: Activation>(ctx: &mut Ctx<'_>, dims: ConvDims, io: Forward<'_>) {
    let Forward {
        params,
        x,
        y,
        saved,
        batch,
        ..
    } = io;
    let name = "conv_forward";
    buffers::expect(name, "params", params.len(), dims.params());
    buffers::expect(name, "x", x.len(), batch * dims.inputs());
    buffers::expect(name, "y", y.len(), batch * dims.outputs());
    buffers::expect(name, "saved", saved.len(), batch * dims.saved::<A>());
    let (r, k, f) = (dims.positions(batch), dims.patch(), dims.f);
    let (w, b) = params.split_at(k * f);
    let cols: &[f32] = if dims.direct() {
        x
    } else {
        let cols = &mut ctx.scratch[..r * k];
        im2col(dims, x, cols, batch);
        cols
    };
    gemm(
        1.0,
        MatRef::row_major(cols, r, k),
        MatRef::row_major(w, k, f),
        0.0,
        MatMut::row_major(y, r, f),
        ctx.gemm,
    );
    forward_bias_rows::<A>(y, b, saved, f);
}

/// The backward pass of [`conv_forward`]: given `io.dy` (d loss / d y, overwritten with
/// d loss / d pre-activation), writes d loss / d params into `io.dparams` (overwriting it;
/// laid out as `io.params`, without the tensors `io.frozen` names) and d loss / d x into
/// `io.dx`. `io.x`, `io.y` and `io.saved` are what [`conv_forward`] saw and wrote.
///
/// The bias gradient sums the rows of the pre-activation gradient in order; the patches are
/// rebuilt for `dW = patchesᵀ·dz`, and `dz·Wᵀ` is scattered back onto the image positions in
/// a fixed order. A frozen weight needs neither the patches nor their GEMM, a frozen bias no
/// sum. Always inlined, as [`conv_forward`].
///
/// # Panics
/// As [`conv_forward`], also for `dy`, `dparams` and `dx`.
#[inline(always)]
pub fn conv_backward<A: Activation>(ctx: &mut Ctx<'_>, dims: ConvDims, io: Backward<'_>) {
    let (x, batch) = (io.x, io.batch);
    let name = "conv_backward";
    buffers::expect(name, "params", io.params.len(), dims.params());
    let trainable = io.frozen.trainable_values(&dims.tensor_lens());
    buffers::expect(name, "dparams", io.dparams.len(), trainable);
    buffers::expect(name, "x", x.len(), batch * dims.inputs());
    buffers::expect(name, "y", io.y.len(), batch * dims.outputs());
    buffers::expect(name, "dy", io.dy.len(), batch * dims.outputs());
    buffers::expect(name, "saved", io.saved.len(), batch * dims.saved::<A>());
    if let Grad::Set(d) | Grad::Add(d) = &io.dx {
        buffers::expect(name, "dx", d.len(), batch * dims.inputs());
    }
    let (r, k, f) = (dims.positions(batch), dims.patch(), dims.f);
    backward_rows::<A>(io.saved, io.y, io.dy, f);
    let dz = &*io.dy;
    let [dw, db] = io.frozen.split(io.dparams, dims.tensor_lens());
    if let Some(db) = db {
        db.fill(0.0);
        add_rows(db, dz);
    }
    let w = &io.params[..k * f];
    let scratch = &mut ctx.scratch[..conv_scratch_len(dims, batch)];
    let direct = dims.direct();
    if let Some(dw) = dw {
        let cols: &[f32] = if direct {
            x
        } else {
            im2col(dims, x, scratch, batch);
            scratch
        };
        gemm(
            1.0,
            MatRef::row_major(cols, r, k).t(),
            MatRef::row_major(dz, r, f),
            0.0,
            MatMut::row_major(dw, k, f),
            ctx.gemm,
        );
    }
    let dz_wt = |beta: f32, out: &mut [f32], ws: &mut [f32]| {
        gemm(
            1.0,
            MatRef::row_major(dz, r, f),
            MatRef::row_major(w, k, f).t(),
            beta,
            MatMut::row_major(out, r, k),
            ws,
        );
    };
    match io.dx {
        Grad::Skip => {}
        Grad::Set(dx) if direct => dz_wt(0.0, dx, ctx.gemm),
        Grad::Add(dx) if direct => dz_wt(1.0, dx, ctx.gemm),
        Grad::Set(dx) => {
            dz_wt(0.0, scratch, ctx.gemm);
            dx.fill(0.0);
            col2im(dims, scratch, dx, batch);
        }
        Grad::Add(dx) => {
            dz_wt(0.0, scratch, ctx.gemm);
            col2im(dims, scratch, dx, batch);
        }
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
/// Forward and backward are [`conv_forward`] and [`conv_backward`] with
/// [`DIMS`](Self::DIMS): im2col into [`Ctx::scratch`] ([`scratch_len`](Layer::scratch_len)),
/// one GEMM by the weight seen as a `(KH * KW * C)`x`F` matrix, and one pass for the bias and
/// `A`; backward rebuilds the patches for `dW = patchesᵀ·dz` and scatters `dz·Wᵀ` back onto
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
    // Bounded by the implementations, as `Dense`'s activation is.
    P = Valid,
    A = Identity,
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
    /// The sizes, for [`conv_forward`] and [`conv_backward`].
    pub const DIMS: ConvDims = ConvDims {
        h: H,
        w: W,
        c: C,
        f: F,
        kh: KH,
        kw: KW,
        stride: STRIDE,
        same: P::SAME,
        bias: true,
    };
    /// Output height.
    pub const OH: usize = Self::DIMS.out_h();
    /// Output width.
    pub const OW: usize = Self::DIMS.out_w();
    /// Rows of zero padding above the image.
    pub const PAD_TOP: usize = Self::DIMS.pad_top();
    /// Columns of zero padding left of the image.
    pub const PAD_LEFT: usize = Self::DIMS.pad_left();
    /// Values in one receptive field, `KH * KW * C`: the length of a patch.
    pub const PATCH: usize = Self::DIMS.patch();

    /// The layer (it holds no data: parameters live in the model's flat buffer).
    pub const fn new() -> Self {
        Conv2d(PhantomData)
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
        <Self as Layer>::describe(f)
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
    fn describe(out: &mut dyn core::fmt::Write) -> core::fmt::Result {
        write!(
            out,
            "Conv2d<{H}x{W}x{C} -> {}x{}x{F}, {KH}x{KW}/{STRIDE}, {}, ",
            Self::OH,
            Self::OW,
            P::NAME,
        )?;
        A::describe(out)?;
        out.write_str(">")
    }

    const IN: usize = Self::DIMS.inputs();
    const OUT: usize = Self::DIMS.outputs();
    const PARAMS: usize = Self::DIMS.params();
    const STATE: usize = 0;
    const SAVED: usize = Self::DIMS.saved::<A>();
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
    /// PyTorch's `Conv2d` stores the weight as OIHW.
    const TORCH: &'static [Torch] = &[
        Torch {
            name: "weight",
            axes: &[3, 2, 0, 1],
        },
        Torch {
            name: "bias",
            axes: &[],
        },
    ];

    const SCRATCH_PER_SAMPLE: usize = conv_scratch_len(Self::DIMS, 1);
    const PRODUCTS: &'static [Product] = &conv_products(Self::DIMS);
    const FREEZABLE: bool = true;

    fn forward(ctx: &mut Ctx<'_>, io: Forward<'_>) {
        buffers::forward::<Self>(&io);
        conv_forward::<A>(ctx, Self::DIMS, io);
    }

    fn backward(ctx: &mut Ctx<'_>, io: Backward<'_>) {
        buffers::backward::<Self>(&io);
        conv_backward::<A>(ctx, Self::DIMS, io);
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
    fn without_bias_is_the_layer_with_a_zero_bias() {
        use crate::layers::Mode;
        use crate::rng::{Rng, Seed};
        type L = Conv2d<5, 4, 2, 3, 3, 2, 2, Same, Tanh>;
        let dims = ConvDims {
            bias: false,
            ..L::DIMS
        };
        let batch = 2;
        let mut rng = Rng::new(Seed(3));
        let mut uniform =
            |n: usize| -> Vec<f32> { (0..n).map(|_| rng.uniform(-1.0, 1.0)).collect() };
        let mut params = uniform(L::PARAMS);
        params[dims.params()..].fill(0.0);
        let x = uniform(L::IN * batch);
        let dy = uniform(L::OUT * batch);
        let run = |dims: ConvDims, params: &[f32]| {
            let mut gemm = std::vec![0.0; conv_gemm_len(dims, batch)];
            let mut scratch = std::vec![0.0; conv_scratch_len(dims, batch)];
            let mut rng = Rng::new(Seed(0));
            let mut ctx = Ctx {
                gemm: &mut gemm,
                scratch: &mut scratch,
                rng: &mut rng,
                first_sample: 0,
                mode: Mode::Train,
                lengths: crate::layers::Lengths::FULL,
            };
            let mut y = std::vec![0.0; dims.outputs() * batch];
            let mut saved = std::vec![0.0; dims.saved::<Tanh>() * batch];
            let io = Forward {
                params,
                state: &mut [],
                x: &x,
                y: &mut y,
                saved: &mut saved,
                batch,
            };
            conv_forward::<Tanh>(&mut ctx, dims, io);
            let (mut d, mut dx) = (dy.clone(), std::vec![0.0; dims.inputs() * batch]);
            let mut dparams = std::vec![0.0; dims.params()];
            let io = Backward {
                params,
                x: &x,
                y: &y,
                saved: &saved,
                dy: &mut d,
                dx: Grad::Set(&mut dx),
                frozen: crate::layers::Frozen::NONE,
                dparams: &mut dparams,
                batch,
            };
            conv_backward::<Tanh>(&mut ctx, dims, io);
            (y, dx, dparams)
        };
        let (y, dx, dp) = run(L::DIMS, &params);
        let (y0, dx0, dp0) = run(dims, &params[..dims.params()]);
        assert_eq!((y0, dx0), (y, dx));
        assert_eq!(dp0, dp[..dims.params()]);
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
