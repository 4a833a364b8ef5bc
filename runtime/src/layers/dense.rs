//! The fully connected layer, `y = f(x·W + b)`: [`Dense`], whose sizes are constants, over
//! [`dense_forward`] and [`dense_backward`], which take them at run time ([`DenseDims`]).

use super::activation::{backward_rows, forward_bias_rows};
use super::{
    buffers, Activation, Backward, Ctx, Forward, Grad, Identity, Init, Layer, Tensor, Torch,
};
use crate::kernels::gemm::{
    gemm, pool_threads, products_workspace_len, MatMut, MatRef, Product, Scaled,
};
use crate::lane::add_rows;
use core::marker::PhantomData;

/// The sizes of a fully connected layer, for [`dense_forward`] and [`dense_backward`]: a
/// model whose shapes are known only at run time builds it; [`Dense`] passes its constants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DenseDims {
    /// Input values per sample.
    pub inputs: usize,
    /// Output values per sample.
    pub outputs: usize,
    /// Whether the parameters hold a bias after the weight.
    pub bias: bool,
}

impl DenseDims {
    /// Parameters: the weight, `[inputs, outputs]` row-major, then the bias, `[outputs]`,
    /// when [`bias`](Self::bias).
    #[inline]
    pub const fn params(&self) -> usize {
        self.inputs * self.outputs + if self.bias { self.outputs } else { 0 }
    }

    /// The values of each tensor: the weight's, then the bias's (0 without a bias).
    #[inline]
    pub const fn tensor_lens(&self) -> [usize; 2] {
        [
            self.inputs * self.outputs,
            if self.bias { self.outputs } else { 0 },
        ]
    }

    /// Values per sample that [`dense_forward`] saves for [`dense_backward`] with activation
    /// `A`: the pre-activation when `A` needs it, else nothing.
    #[inline]
    pub const fn saved<A: Activation>(&self) -> usize {
        if A::NEEDS_Z {
            self.outputs
        } else {
            0
        }
    }
}

/// The products of [`dense_forward`] and [`dense_backward`]: `x·W`, `xᵀ·dy` and `dy·Wᵀ`.
pub const fn dense_products(dims: DenseDims) -> [Product; 3] {
    let DenseDims {
        inputs, outputs, ..
    } = dims;
    [
        Product {
            m: 1,
            k: inputs,
            n: outputs,
            scaled: Scaled::M,
        },
        Product {
            m: inputs,
            k: 1,
            n: outputs,
            scaled: Scaled::K,
        },
        Product {
            m: 1,
            k: outputs,
            n: inputs,
            scaled: Scaled::M,
        },
    ]
}

/// GEMM workspace one [`dense_forward`] or [`dense_backward`] call needs for `batch` samples.
#[inline]
pub fn dense_gemm_len(dims: DenseDims, batch: usize) -> usize {
    products_workspace_len(&dense_products(dims), batch, pool_threads())
}

/// `y = A(x·W + b)` for `io.batch` samples of `dims.inputs` values: one GEMM, then one pass
/// over `y` that adds the bias, writes the pre-activation into `io.saved` if `A` needs it
/// ([`DenseDims::saved`] values per sample) and applies `A`. `io.state` is not read (the layer
/// has none).
///
/// `io.params` is the weight, `[inputs, outputs]` row-major, followed by the bias when
/// `dims.bias`. Always inlined, so that [`Dense`], which passes constants, compiles as if its
/// sizes were written into the body.
///
/// # Panics
/// If a buffer's length does not follow from `dims` and `batch`, or `ctx.gemm` is shorter than
/// [`dense_gemm_len`].
#[inline(always)]
pub fn dense_forward<A: Activation>(ctx: &mut Ctx<'_>, dims: DenseDims, io: Forward<'_>) {
    let Forward {
        params,
        x,
        y,
        saved,
        batch,
        ..
    } = io;
    let DenseDims {
        inputs, outputs, ..
    } = dims;
    let name = "dense_forward";
    buffers::expect(name, "params", params.len(), dims.params());
    buffers::expect(name, "x", x.len(), batch * inputs);
    buffers::expect(name, "y", y.len(), batch * outputs);
    buffers::expect(name, "saved", saved.len(), batch * dims.saved::<A>());
    let (w, b) = params.split_at(inputs * outputs);
    gemm(
        1.0,
        MatRef::row_major(x, batch, inputs),
        MatRef::row_major(w, inputs, outputs),
        0.0,
        MatMut::row_major(y, batch, outputs),
        ctx.gemm,
    );
    forward_bias_rows::<A>(y, b, saved, outputs);
}

/// The backward pass of [`dense_forward`]: given `io.dy` (d loss / d y, overwritten with
/// d loss / d pre-activation), writes d loss / d params into `io.dparams` (overwriting it;
/// laid out as `io.params`, without the tensors `io.frozen` names) and d loss / d x into
/// `io.dx`. `io.x`, `io.y` and `io.saved` are what [`dense_forward`] saw and wrote.
///
/// The bias gradient sums the rows of the pre-activation gradient in order; the weight and
/// input gradients are one GEMM each; a frozen tensor's sum or GEMM is not computed. Always
/// inlined, as [`dense_forward`].
///
/// # Panics
/// As [`dense_forward`], also for `dy`, `dparams` and `dx`.
#[inline(always)]
pub fn dense_backward<A: Activation>(ctx: &mut Ctx<'_>, dims: DenseDims, io: Backward<'_>) {
    let batch = io.batch;
    let DenseDims {
        inputs, outputs, ..
    } = dims;
    let name = "dense_backward";
    buffers::expect(name, "params", io.params.len(), dims.params());
    let trainable = io.frozen.trainable_values(&dims.tensor_lens());
    buffers::expect(name, "dparams", io.dparams.len(), trainable);
    buffers::expect(name, "x", io.x.len(), batch * inputs);
    buffers::expect(name, "y", io.y.len(), batch * outputs);
    buffers::expect(name, "dy", io.dy.len(), batch * outputs);
    buffers::expect(name, "saved", io.saved.len(), batch * dims.saved::<A>());
    if let Grad::Set(d) | Grad::Add(d) = &io.dx {
        buffers::expect(name, "dx", d.len(), batch * inputs);
    }
    backward_rows::<A>(io.saved, io.y, io.dy, outputs);
    let dz = &*io.dy;
    let [dw, db] = io.frozen.split(io.dparams, dims.tensor_lens());
    if let Some(db) = db {
        db.fill(0.0);
        add_rows(db, dz);
    }
    if let Some(dw) = dw {
        gemm(
            1.0,
            MatRef::row_major(io.x, batch, inputs).t(),
            MatRef::row_major(dz, batch, outputs),
            0.0,
            MatMut::row_major(dw, inputs, outputs),
            ctx.gemm,
        );
    }
    let Some((dx, add)) = io.dx.destination() else {
        return;
    };
    let beta = if add { 1.0 } else { 0.0 };
    gemm(
        1.0,
        MatRef::row_major(dz, batch, outputs),
        MatRef::row_major(&io.params[..inputs * outputs], inputs, outputs).t(),
        beta,
        MatMut::row_major(dx, batch, inputs),
        ctx.gemm,
    );
}

/// A fully connected layer from `IN` to `OUT` values per sample: `y = A(x·W + b)`.
///
/// Parameters, in order: `weight`, `[IN, OUT]` row-major (Keras' kernel layout; PyTorch stores
/// its transpose), initialized with [`Init::GlorotUniform`] over fans `(IN, OUT)`; and, when
/// `BIAS`, `bias`, `[OUT]`, initialized with [`Init::Zeros`]. Forward is one GEMM and one
/// pass over `y` that adds the bias, keeps the pre-activation if `A` needs it
/// ([`SAVED`](Layer::SAVED) is then `OUT`, else 0) and applies `A`: [`dense_forward`] and
/// [`dense_backward`] with [`DIMS`](Self::DIMS).
///
/// ```
/// use fusegraph_runtime::layers::{Ctx, Dense, Forward, Layer, Mode, Relu};
/// use fusegraph_runtime::rng::{Rng, Seed};
///
/// type Fc = Dense<2, 3, Relu>;
/// // weight [2, 3], then bias [3].
/// let params = [1.0, 0.0, -1.0, 0.5, 1.0, 1.0, 0.0, 0.0, 0.5];
/// let x = [1.0, 2.0, -1.0, 0.0]; // two samples
/// let mut y = [0.0; 6];
/// let mut gemm = vec![0.0; Fc::gemm_len(2)];
/// let mut rng = Rng::new(Seed(0));
/// let mut ctx = Ctx { gemm: &mut gemm, scratch: &mut [], rng: &mut rng, first_sample: 0, mode: Mode::Eval, lengths: fusegraph_runtime::layers::Lengths::FULL };
/// let io = Forward { params: &params, state: &mut [], x: &x, y: &mut y, saved: &mut [], batch: 2 };
/// Fc::forward(&mut ctx, io);
/// assert_eq!(y, [2.0, 2.0, 1.5, 0.0, 0.0, 1.5]);
/// ```
pub struct Dense<
    const IN: usize,
    const OUT: usize,
    // Bounded by the implementations, not here: a bound on the struct is checked wherever the
    // type is named, and a model field whose activation is not one would get that error twice.
    A = Identity,
    const BIAS: bool = true,
>(PhantomData<fn() -> A>);

impl<const IN: usize, const OUT: usize, A: Activation, const BIAS: bool> Dense<IN, OUT, A, BIAS> {
    /// The sizes, for [`dense_forward`] and [`dense_backward`].
    pub const DIMS: DenseDims = DenseDims {
        inputs: IN,
        outputs: OUT,
        bias: BIAS,
    };

    /// The layer (it holds no data: parameters live in the model's flat buffer).
    pub const fn new() -> Self {
        Dense(PhantomData)
    }
}

impl<const IN: usize, const OUT: usize, A: Activation, const BIAS: bool> Default
    for Dense<IN, OUT, A, BIAS>
{
    fn default() -> Self {
        Self::new()
    }
}

impl<const IN: usize, const OUT: usize, A: Activation, const BIAS: bool> Clone
    for Dense<IN, OUT, A, BIAS>
{
    fn clone(&self) -> Self {
        *self
    }
}

impl<const IN: usize, const OUT: usize, A: Activation, const BIAS: bool> Copy
    for Dense<IN, OUT, A, BIAS>
{
}

impl<const IN: usize, const OUT: usize, A: Activation, const BIAS: bool> core::fmt::Debug
    for Dense<IN, OUT, A, BIAS>
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        <Self as Layer>::describe(f)
    }
}

impl<const IN: usize, const OUT: usize, A: Activation, const BIAS: bool> Layer
    for Dense<IN, OUT, A, BIAS>
{
    fn describe(out: &mut dyn core::fmt::Write) -> core::fmt::Result {
        write!(out, "Dense<{IN}, {OUT}, ")?;
        A::describe(out)?;
        write!(out, ", bias: {BIAS}>")
    }

    const IN: usize = IN;
    const OUT: usize = OUT;
    const PARAMS: usize = Self::DIMS.params();
    const STATE: usize = 0;
    const SAVED: usize = Self::DIMS.saved::<A>();
    const TENSORS: &'static [Tensor] = if BIAS {
        &[
            Tensor {
                name: "weight",
                shape: &[IN, OUT],
                fans: (IN, OUT),
                init: Init::GlorotUniform,
            },
            // The weight's fans, so that `TorchDefault` bounds the bias as PyTorch does.
            Tensor {
                name: "bias",
                shape: &[OUT],
                fans: (IN, OUT),
                init: Init::Zeros,
            },
        ]
    } else {
        &[Tensor {
            name: "weight",
            shape: &[IN, OUT],
            fans: (IN, OUT),
            init: Init::GlorotUniform,
        }]
    };
    /// PyTorch's `Linear` stores the weight as `[out, in]`.
    const TORCH: &'static [Torch] = if BIAS {
        &[
            Torch {
                name: "weight",
                axes: &[1, 0],
            },
            Torch {
                name: "bias",
                axes: &[],
            },
        ]
    } else {
        &[Torch {
            name: "weight",
            axes: &[1, 0],
        }]
    };

    const PRODUCTS: &'static [Product] = &dense_products(Self::DIMS);
    const FREEZABLE: bool = true;

    fn forward(ctx: &mut Ctx<'_>, io: Forward<'_>) {
        buffers::forward::<Self>(&io);
        dense_forward::<A>(ctx, Self::DIMS, io);
    }

    fn backward(ctx: &mut Ctx<'_>, io: Backward<'_>) {
        buffers::backward::<Self>(&io);
        dense_backward::<A>(ctx, Self::DIMS, io);
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

    fn reference<const IN: usize, const OUT: usize, A: Ref64, const BIAS: bool>(
        p: &[f64],
        x: &[f64],
        batch: usize,
    ) -> Vec<f64> {
        let mut z = std::vec![0.0; batch * OUT];
        for n in 0..batch {
            for o in 0..OUT {
                let mut s = if BIAS { p[IN * OUT + o] } else { 0.0 };
                for i in 0..IN {
                    s += x[n * IN + i] * p[i * OUT + o];
                }
                z[n * OUT + o] = s;
            }
        }
        A::f64(&z, OUT)
    }

    fn check<const IN: usize, const OUT: usize, A: Ref64, const BIAS: bool>(batch: usize) {
        Check::new(batch).run::<Dense<IN, OUT, A, BIAS>>(&reference::<IN, OUT, A, BIAS>);
    }

    #[test]
    fn matches_reference_and_finite_differences() {
        check::<3, 2, Identity, true>(1);
        check::<5, 11, Relu, true>(4);
        check::<7, 9, Tanh, false>(3);
        check::<4, 10, Gelu, true>(2);
        check::<6, 5, Softmax, true>(3);
        check::<17, 3, Identity, false>(9);
    }

    #[test]
    fn constants_follow_the_shapes() {
        type D = Dense<4, 3, Gelu>;
        assert_eq!(D::PARAMS, 15);
        assert_eq!(D::SAVED, 3);
        assert_eq!(D::TENSORS.len(), 2);
        assert_eq!(D::TENSORS[0].shape, &[4, 3]);
        assert_eq!(D::TENSORS[1].len(), 3);
        type E = Dense<4, 3, Relu, false>;
        assert_eq!(E::PARAMS, 12);
        assert_eq!(E::SAVED, 0);
        assert_eq!(E::TENSORS.len(), 1);
        assert_eq!(
            std::format!("{:?}", E::new()),
            "Dense<4, 3, relu, bias: false>"
        );
    }

    /// A mask naming a tensor past the layer's (a bias the layer does not have) is the
    /// caller's bug, refused before any work.
    #[test]
    #[should_panic(expected = "frozen mask 0b10 for a layer of 1 tensors")]
    fn a_mask_past_the_tensors_is_refused() {
        type D = Dense<2, 1, Identity, false>;
        let mut rng = crate::rng::Rng::new(crate::rng::Seed(0));
        let mut ctx = Ctx {
            gemm: &mut std::vec![0.0; D::gemm_len(1)],
            scratch: &mut [],
            rng: &mut rng,
            first_sample: 0,
            mode: crate::layers::Mode::Train,
            lengths: crate::layers::Lengths::FULL,
        };
        let io = Backward {
            params: &[1.0, 2.0],
            x: &[1.0, 1.0],
            y: &[3.0],
            saved: &[],
            dy: &mut [1.0],
            dx: Grad::Skip,
            frozen: crate::layers::Frozen(0b10),
            dparams: &mut [0.0; 2],
            batch: 1,
        };
        D::backward(&mut ctx, io);
    }

    #[test]
    fn batch_of_zero_does_nothing() {
        Check::new(0).run::<Dense<3, 2>>(&reference::<3, 2, Identity, true>);
    }
}
