//! One-dimensional convolution over channels-last sequences: [`Conv1d`], the height-1 case
//! of the two-dimensional machinery ([`ConvDims`], [`conv_forward`], [`conv_backward`]).

use super::conv::{conv_backward, conv_forward, conv_products, conv_scratch_len};
use super::{
    buffers, Activation, Backward, ConvDims, Ctx, Forward, Identity, Init, Layer, Padding, Tensor,
    Torch, Valid,
};
use crate::kernels::gemm::Product;
use core::marker::PhantomData;

/// A convolution of a sequence of `T` positions with `C_IN` channels (channels last, `[T, C_IN]`
/// per sample, `T * C_IN` values) by `C_OUT` filters `K` positions long, moving by `S`, with
/// [`Valid`] or [`Same`](super::Same) padding `P`, followed by the activation `A`; the output is
/// `[OUT_T, C_OUT]`, channels last ([`OUT_T`](Self::OUT_T)).
///
/// `y[t, f] = A(bias[f] + Σ_{j < K, c < C_IN} xpad[t * S + j, c] * weight[j, c, f])`: a
/// cross-correlation (no kernel flip), as Keras' `Conv1D` and PyTorch's `nn.Conv1d` compute it.
///
/// Lengths and padding are Keras': [`Valid`] pads nothing, `OUT_T = (T - K) / S + 1`;
/// [`Same`](super::Same) gives `OUT_T = ceil(T / S)` with `max((OUT_T - 1) * S + K - T, 0)` zeros
/// of padding, the smaller half before the sequence ([`PAD_BEFORE`](Self::PAD_BEFORE)). With
/// stride 1 and an odd kernel that is `(K - 1) / 2` zeros on each side, PyTorch's
/// `padding=(K - 1) // 2` (and `padding='same'`). With an odd kernel and a stride above 1 the
/// output has the length of PyTorch's with `padding=(K - 1) // 2`, but Keras pads fewer zeros
/// before the sequence unless `(T - 1) % S == 0`: for `T = 10, K = 5, S = 2` Keras pads one zero
/// before and two after, PyTorch two on each side. A kernel longer than the sequence with [`Valid`]
/// padding, or a kernel or stride of 0, does not compile.
///
/// Parameters, in order: `weight`, `[K, C_IN, C_OUT]` (Keras' `Conv1D` kernel layout),
/// initialized with [`Init::GlorotUniform`] over fans `(K * C_IN, K * C_OUT)`; `bias`,
/// `[C_OUT]`, [`Init::Zeros`]. PyTorch's `nn.Conv1d.weight` is `[C_OUT, C_IN, K]`, the weight
/// with its axes reversed ([`TORCH`](Layer::TORCH)), so that checkpoints load into
/// `nn.Conv1d(C_IN, C_OUT, K, stride=S)`, which takes `[batch, C_IN, T]`: PyTorch code
/// transposes the sequence to channels first around it.
///
/// The layer is [`Conv2d`](super::Conv2d)`<1, T, C_IN, C_OUT, 1, K, S, P, A>` with its weight
/// named in one dimension: the same [`ConvDims`] ([`DIMS`](Self::DIMS), height 1), the same
/// im2col and GEMM, the same bits.
pub struct Conv1d<
    const T: usize,
    const C_IN: usize,
    const C_OUT: usize,
    const K: usize,
    const S: usize = 1,
    // Bounded by the implementations, as `Dense`'s activation is.
    P = Valid,
    A = Identity,
>(PhantomData<fn() -> (P, A)>);

impl<
        const T: usize,
        const C_IN: usize,
        const C_OUT: usize,
        const K: usize,
        const S: usize,
        P: Padding,
        A: Activation,
    > Conv1d<T, C_IN, C_OUT, K, S, P, A>
{
    /// The sizes, for [`conv_forward`] and [`conv_backward`]: an image of height 1 and width
    /// `T`, a kernel of height 1 and width `K`.
    pub const DIMS: ConvDims = {
        assert!(
            K > 0,
            "Conv1d<T, C_IN, C_OUT, K, S>: the kernel length K must be at least 1"
        );
        assert!(
            S > 0,
            "Conv1d<T, C_IN, C_OUT, K, S>: the stride S must be at least 1"
        );
        assert!(
            P::SAME || K <= T,
            "Conv1d<T, C_IN, C_OUT, K, S, Valid>: the kernel length K is more than the sequence \
             length T; write K <= T, or pad with Same"
        );
        ConvDims {
            h: 1,
            w: T,
            c: C_IN,
            f: C_OUT,
            kh: 1,
            kw: K,
            stride: S,
            same: P::SAME,
            bias: true,
        }
    };
    /// Output positions.
    pub const OUT_T: usize = Self::DIMS.out_w();
    /// Zeros of padding before the sequence.
    pub const PAD_BEFORE: usize = Self::DIMS.pad_left();

    /// The layer (it holds no data: parameters live in the model's flat buffer).
    pub const fn new() -> Self {
        Conv1d(PhantomData)
    }
}

impl<
        const T: usize,
        const C_IN: usize,
        const C_OUT: usize,
        const K: usize,
        const S: usize,
        P: Padding,
        A: Activation,
    > Default for Conv1d<T, C_IN, C_OUT, K, S, P, A>
{
    fn default() -> Self {
        Self::new()
    }
}

impl<
        const T: usize,
        const C_IN: usize,
        const C_OUT: usize,
        const K: usize,
        const S: usize,
        P: Padding,
        A: Activation,
    > Clone for Conv1d<T, C_IN, C_OUT, K, S, P, A>
{
    fn clone(&self) -> Self {
        *self
    }
}

impl<
        const T: usize,
        const C_IN: usize,
        const C_OUT: usize,
        const K: usize,
        const S: usize,
        P: Padding,
        A: Activation,
    > Copy for Conv1d<T, C_IN, C_OUT, K, S, P, A>
{
}

impl<
        const T: usize,
        const C_IN: usize,
        const C_OUT: usize,
        const K: usize,
        const S: usize,
        P: Padding,
        A: Activation,
    > core::fmt::Debug for Conv1d<T, C_IN, C_OUT, K, S, P, A>
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        <Self as Layer>::describe(f)
    }
}

impl<
        const T: usize,
        const C_IN: usize,
        const C_OUT: usize,
        const K: usize,
        const S: usize,
        P: Padding,
        A: Activation,
    > Layer for Conv1d<T, C_IN, C_OUT, K, S, P, A>
{
    fn describe(out: &mut dyn core::fmt::Write) -> core::fmt::Result {
        write!(
            out,
            "Conv1d<{T}x{C_IN} -> {}x{C_OUT}, {K}/{S}, {}, ",
            Self::OUT_T,
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
            shape: &[K, C_IN, C_OUT],
            fans: (K * C_IN, K * C_OUT),
            init: Init::GlorotUniform,
        },
        // The weight's fans, so that `TorchDefault` bounds the bias as PyTorch does.
        Tensor {
            name: "bias",
            shape: &[C_OUT],
            fans: (K * C_IN, K * C_OUT),
            init: Init::Zeros,
        },
    ];
    /// PyTorch's `Conv1d` stores the weight as `[C_OUT, C_IN, K]`.
    const TORCH: &'static [Torch] = &[
        Torch {
            name: "weight",
            axes: &[2, 1, 0],
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
    use crate::layers::gradcheck::{assert_same_bits, forward_backward, Check};
    use crate::layers::{Conv2d, Elu, Gelu, Mode, Relu, Same, Sigmoid, Softmax, Tanh};
    use crate::rng::{Rng, Seed};
    use std::vec::Vec;

    /// Keras' rule, written out again for one dimension: (output length, zeros before).
    fn geometry(t: usize, k: usize, s: usize, same: bool) -> (usize, usize) {
        if same {
            let out = t.div_ceil(s);
            (out, ((out - 1) * s + k).saturating_sub(t) / 2)
        } else {
            ((t - k) / s + 1, 0)
        }
    }

    /// `y[n, o, f] = A(b[f] + Σ_{j, c} x[n, o * S + j - pad, c] * w[j, c, f])` in `f64`.
    fn reference<
        const T: usize,
        const C_IN: usize,
        const C_OUT: usize,
        const K: usize,
        const S: usize,
        P: Padding,
        A: Ref64,
    >(
        p: &[f64],
        x: &[f64],
        batch: usize,
    ) -> Vec<f64> {
        let (out, pad) = geometry(T, K, S, P::SAME);
        let (w, b) = p.split_at(K * C_IN * C_OUT);
        let mut z = Vec::new();
        for n in 0..batch {
            for o in 0..out {
                for f in 0..C_OUT {
                    let mut sum = b[f];
                    for j in 0..K {
                        let Some(t) = (o * S + j).checked_sub(pad).filter(|&t| t < T) else {
                            continue;
                        };
                        for c in 0..C_IN {
                            sum += x[(n * T + t) * C_IN + c] * w[(j * C_IN + c) * C_OUT + f];
                        }
                    }
                    z.push(sum);
                }
            }
        }
        A::f64(&z, C_OUT)
    }

    fn check<
        const T: usize,
        const C_IN: usize,
        const C_OUT: usize,
        const K: usize,
        const S: usize,
        P: Padding,
        A: Ref64,
    >(
        batch: usize,
    ) {
        let (out, pad) = geometry(T, K, S, P::SAME);
        assert_eq!(Conv1d::<T, C_IN, C_OUT, K, S, P, A>::OUT_T, out);
        assert_eq!(Conv1d::<T, C_IN, C_OUT, K, S, P, A>::PAD_BEFORE, pad);
        Check::new(batch)
            .run::<Conv1d<T, C_IN, C_OUT, K, S, P, A>>(&reference::<T, C_IN, C_OUT, K, S, P, A>);
    }

    #[test]
    fn matches_reference_and_finite_differences() {
        check::<10, 3, 5, 3, 1, Same, Relu>(3);
        check::<8, 5, 4, 3, 1, Valid, Identity>(2);
        check::<9, 2, 3, 3, 2, Same, Tanh>(2);
        check::<10, 2, 3, 3, 2, Valid, Gelu>(2);
        check::<10, 3, 2, 5, 1, Same, Sigmoid>(2);
        check::<11, 2, 4, 5, 1, Valid, Elu>(2);
        // (T - 1) % S != 0: Keras pads less before than after.
        check::<10, 2, 3, 5, 2, Same, Identity>(2);
        check::<9, 3, 2, 5, 2, Same, Softmax>(2);
        check::<12, 4, 3, 5, 2, Valid, Tanh>(3);
        // A kernel as long as the sequence, and one longer with Same padding.
        check::<5, 2, 2, 5, 1, Valid, Identity>(2);
        check::<3, 2, 2, 5, 1, Same, Relu>(2);
        // Kernel 1, stride 1: the sequence is its own patch matrix.
        check::<6, 3, 4, 1, 1, Valid, Identity>(2);
    }

    /// Conv1d against Conv2d of height 1 with the same parameters: the same bits forward and
    /// backward.
    fn same_bits_as_conv2d<
        const T: usize,
        const C_IN: usize,
        const C_OUT: usize,
        const K: usize,
        const S: usize,
        P: Padding,
        A: Activation,
    >() {
        let batch = 3;
        let mut rng = Rng::new(Seed(T as u64 * 31 + K as u64));
        let mut uniform =
            |n: usize| -> Vec<f32> { (0..n).map(|_| rng.uniform(-1.0, 1.0)).collect() };
        let params = uniform(Conv1d::<T, C_IN, C_OUT, K, S, P, A>::PARAMS);
        let x = uniform(Conv1d::<T, C_IN, C_OUT, K, S, P, A>::IN * batch);
        let dy = uniform(Conv1d::<T, C_IN, C_OUT, K, S, P, A>::OUT * batch);
        let train = Mode::Train;
        let one = forward_backward::<Conv1d<T, C_IN, C_OUT, K, S, P, A>>(
            train,
            0,
            &params,
            &[],
            &x,
            &dy,
            batch,
        );
        let two = forward_backward::<Conv2d<1, T, C_IN, C_OUT, 1, K, S, P, A>>(
            train,
            0,
            &params,
            &[],
            &x,
            &dy,
            batch,
        );
        assert_same_bits(&one, &two);
        assert!(
            one.dx.iter().any(|&v| v != 0.0),
            "a gradient reaches the input"
        );
    }

    #[test]
    fn gives_the_bits_of_conv2d_with_height_one() {
        same_bits_as_conv2d::<10, 3, 5, 3, 1, Same, Relu>();
        same_bits_as_conv2d::<8, 5, 4, 3, 1, Valid, Tanh>();
        same_bits_as_conv2d::<10, 2, 3, 5, 2, Same, Gelu>();
        same_bits_as_conv2d::<11, 4, 9, 5, 2, Valid, Identity>();
    }

    #[test]
    fn shapes_follow_keras_and_weights_name_as_pytorch() {
        type Seq = Conv1d<10, 3, 5, 3, 1, Same, Relu>;
        assert_eq!((Seq::OUT_T, Seq::PAD_BEFORE), (10, 1));
        assert_eq!((Seq::IN, Seq::OUT, Seq::PARAMS), (30, 50, 3 * 3 * 5 + 5));
        assert_eq!(Seq::TENSORS[0].shape, &[3, 3, 5]);
        assert_eq!(Seq::TENSORS[0].fans, (9, 15));
        assert_eq!(Seq::TENSORS[1].shape, &[5]);
        assert_eq!(
            Seq::TORCH[0],
            Torch {
                name: "weight",
                axes: &[2, 1, 0]
            }
        );
        assert_eq!(Seq::scratch_len(2), 2 * 10 * 9);
        // Keras pads one zero before and two after; PyTorch's padding=2 would pad two before.
        type Strided = Conv1d<10, 2, 3, 5, 2, Same>;
        assert_eq!((Strided::OUT_T, Strided::PAD_BEFORE), (5, 1));
        type Odd = Conv1d<9, 2, 3, 5, 2, Same>;
        assert_eq!((Odd::OUT_T, Odd::PAD_BEFORE), (5, 2));
        type V = Conv1d<12, 4, 3, 5, 2>;
        assert_eq!((V::OUT_T, V::PAD_BEFORE, V::OUT), (4, 0, 12));
        assert_eq!(
            std::format!("{:?}", Seq::new()),
            "Conv1d<10x3 -> 10x5, 3/1, same, relu>"
        );
    }
}
