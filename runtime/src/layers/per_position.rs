//! A layer applied to every position of a sequence: [`PerPosition`].

use super::{buffers, Backward, Ctx, Forward, Layer, Tensor, Torch};
use crate::kernels::gemm::{Product, Scaled};
use core::marker::PhantomData;

/// The most matrix products the layer inside a [`PerPosition`] may declare
/// ([`Layer::PRODUCTS`]; Dense and the convolutions declare three).
const MAX_PER_POSITION_PRODUCTS: usize = 8;

/// `products` with the dimension that grows with the batch multiplied by `positions`, in a
/// table of [`MAX_PER_POSITION_PRODUCTS`] whose unused entries are [`Product::NONE`].
const fn per_position_products(
    products: &[Product],
    positions: usize,
) -> [Product; MAX_PER_POSITION_PRODUCTS] {
    assert!(
        products.len() <= MAX_PER_POSITION_PRODUCTS,
        "PerPosition<L, T>: the layer L declares more than 8 matrix products \
         (MAX_PER_POSITION_PRODUCTS)"
    );
    let mut out = [Product::NONE; MAX_PER_POSITION_PRODUCTS];
    let mut i = 0;
    while i < products.len() {
        let mut p = products[i];
        match p.scaled {
            Scaled::M => p.m *= positions,
            Scaled::K => p.k *= positions,
            Scaled::N => p.n *= positions,
        }
        out[i] = p;
        i += 1;
    }
    out
}

/// The layer `L` applied to each of the `T` positions of a sequence, with the same parameters
/// at every position: `[T, L::IN]` to `[T, L::OUT]` per sample, row-major. Keras'
/// `TimeDistributed(layer)`; in PyTorch, a module that acts on the last axis (`nn.Linear`,
/// `nn.LayerNorm`, `nn.GELU`) applied to `[batch, T, features]`. `PerPosition<Dense<64, 16>, 32>`
/// is a per-position projection, `PerPosition<LayerNorm<64>, 32>` normalizes each position over
/// its features.
///
/// A batch of `batch` sequences is `batch * T` samples of `L` laid end to end, so the layer is
/// `L` run once on `batch * T` samples: one GEMM over every position for a Dense layer, the
/// same bits as `L` on those rows. Its parameters are `L`'s ([`TENSORS`](Layer::TENSORS),
/// [`TORCH`](Layer::TORCH) and the gradients summed over every position of every sample), as
/// are its state tensors; it saves `T * L::SAVED` values per sample and needs `L`'s scratch and
/// GEMM workspace for `batch * T` samples ([`SCRATCH_PER_SAMPLE`](Layer::SCRATCH_PER_SAMPLE)
/// and the batch-sized dimension of each of [`PRODUCTS`](Layer::PRODUCTS) multiplied by `T`;
/// `L` may declare up to eight products).
///
/// `L`'s state, if it has any, is `L`'s own and sees `batch * T` samples: a
/// `PerPosition<BatchNorm<C>, T>` normalizes each channel over the batch and the positions, as
/// `BatchNorm<C, T>` does (PyTorch's `nn.BatchNorm1d` on `[batch, C, T]`). A random layer draws
/// for the positions in order, as for samples: `PerPosition<Dropout<N, R>, T>` masks as
/// `Dropout<{ T * N }, R>` does.
pub struct PerPosition<L, const T: usize>(PhantomData<fn() -> L>);

impl<L: Layer, const T: usize> PerPosition<L, T> {
    /// The layer (it holds no data: parameters live in the model's flat buffer).
    pub const fn new() -> Self {
        PerPosition(PhantomData)
    }

    /// `L`'s products for `batch * T` samples, as products per sequence.
    const PRODUCT_TABLE: [Product; MAX_PER_POSITION_PRODUCTS] =
        per_position_products(L::PRODUCTS, T);
}

impl<L: Layer, const T: usize> Default for PerPosition<L, T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<L, const T: usize> Clone for PerPosition<L, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<L, const T: usize> Copy for PerPosition<L, T> {}

impl<L: Layer, const T: usize> core::fmt::Debug for PerPosition<L, T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        <Self as Layer>::describe(f)
    }
}

impl<L: Layer, const T: usize> Layer for PerPosition<L, T> {
    fn describe(out: &mut dyn core::fmt::Write) -> core::fmt::Result {
        out.write_str("PerPosition<")?;
        L::describe(out)?;
        write!(out, ", {T}>")
    }

    const IN: usize = {
        assert!(
            T > 0,
            "PerPosition<L, T>: the sequence length T must be at least 1"
        );
        T * L::IN
    };
    const OUT: usize = T * L::OUT;
    const PARAMS: usize = L::PARAMS;
    const STATE: usize = L::STATE;
    const SAVED: usize = T * L::SAVED;
    const TENSORS: &'static [Tensor] = L::TENSORS;
    const TORCH: &'static [Torch] = L::TORCH;
    const STATE_TENSORS: &'static [Tensor] = L::STATE_TENSORS;
    const BATCH_COUNTER: bool = L::BATCH_COUNTER;
    /// The mask goes to `L`'s backward as it is.
    const FREEZABLE: bool = L::FREEZABLE;
    const SCRATCH_PER_SAMPLE: usize = T * L::SCRATCH_PER_SAMPLE;
    const PRODUCTS: &'static [Product] = Self::PRODUCT_TABLE.split_at(L::PRODUCTS.len()).0;

    fn init_state(state: &mut [f32]) {
        L::init_state(state);
    }

    fn finish_init(params: &mut [f32]) {
        L::finish_init(params);
    }

    fn forward(ctx: &mut Ctx<'_>, io: Forward<'_>) {
        buffers::forward::<Self>(&io);
        let first = ctx.first_sample;
        ctx.first_sample = first * T;
        L::forward(
            ctx,
            Forward {
                batch: io.batch * T,
                ..io
            },
        );
        ctx.first_sample = first;
    }

    fn backward(ctx: &mut Ctx<'_>, io: Backward<'_>) {
        buffers::backward::<Self>(&io);
        L::backward(
            ctx,
            Backward {
                batch: io.batch * T,
                ..io
            },
        );
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::layers::activation::reference::Ref64;
    use crate::layers::gradcheck::{assert_same_bits, bits, forward_backward, Check};
    use crate::layers::{BatchNorm, Dense, Dropout, Gelu, Identity, LayerNorm, Mode, Tanh};
    use crate::rng::{Rng, Seed};
    use std::vec;
    use std::vec::Vec;

    /// `A(x W + b)` for every row of `I` values, in `f64`.
    fn dense<const I: usize, const O: usize, A: Ref64>(p: &[f64], x: &[f64]) -> Vec<f64> {
        let (w, b) = p.split_at(I * O);
        let z: Vec<f64> = x
            .chunks_exact(I)
            .flat_map(|row| {
                (0..O).map(move |o| b[o] + (0..I).map(|i| row[i] * w[i * O + o]).sum::<f64>())
            })
            .collect();
        A::f64(&z, O)
    }

    /// Layer normalization of every row of `N` values, in `f64`.
    fn layer_norm<const N: usize>(p: &[f64], x: &[f64]) -> Vec<f64> {
        let (gamma, beta) = p.split_at(N);
        x.chunks_exact(N)
            .flat_map(|row| {
                let mean = row.iter().sum::<f64>() / N as f64;
                let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / N as f64;
                let rstd = 1.0 / (var + 1e-5).sqrt();
                (0..N).map(move |i| (row[i] - mean) * rstd * gamma[i] + beta[i])
            })
            .collect()
    }

    #[test]
    fn matches_reference_and_finite_differences() {
        Check::new(2)
            .run::<PerPosition<Dense<3, 4, Tanh>, 5>>(&|p, x, _| dense::<3, 4, Tanh>(p, x));
        Check::new(3)
            .run::<PerPosition<Dense<9, 2, Identity>, 4>>(&|p, x, _| dense::<9, 2, Identity>(p, x));
        Check::new(2)
            .run::<PerPosition<Dense<4, 16, Gelu>, 3>>(&|p, x, _| dense::<4, 16, Gelu>(p, x));
        Check::new(2).run::<PerPosition<LayerNorm<6>, 4>>(&|p, x, _| layer_norm::<6>(p, x));
        Check::new(3).run::<PerPosition<LayerNorm<11>, 2>>(&|p, x, _| layer_norm::<11>(p, x));
    }

    #[test]
    fn constants_are_the_inner_layers_over_the_positions() {
        type D = Dense<8, 3>;
        type P = PerPosition<D, 5>;
        assert_eq!((P::IN, P::OUT, P::PARAMS), (40, 15, D::PARAMS));
        assert_eq!(P::TENSORS, D::TENSORS);
        assert_eq!(P::TORCH, D::TORCH);
        assert_eq!(P::PRODUCTS.len(), D::PRODUCTS.len());
        for (p, d) in P::PRODUCTS.iter().zip(D::PRODUCTS) {
            assert_eq!(p.dims(7), d.dims(35));
        }
        assert_eq!(P::gemm_len(7), D::gemm_len(35));
        type N = PerPosition<LayerNorm<6>, 4>;
        assert_eq!((N::SAVED, N::STATE), (8, 0));
        type B = PerPosition<BatchNorm<3>, 4>;
        assert_eq!((B::STATE, B::BATCH_COUNTER), (6, true));
        assert_eq!(B::STATE_TENSORS, BatchNorm::<3>::STATE_TENSORS);
    }

    /// `PerPosition<Inner, T>` gives the bits of `Whole`, a layer that treats the positions as
    /// one sample, in `mode`.
    fn same_bits<Inner: Layer, Whole: Layer, const T: usize>(mode: Mode) {
        let batch = 3;
        let mut rng = Rng::new(Seed(11));
        let mut uniform =
            |n: usize| -> Vec<f32> { (0..n).map(|_| rng.uniform(-1.0, 1.0)).collect() };
        let (params, x) = (uniform(Whole::PARAMS), uniform(Whole::IN * batch));
        let dy = uniform(Whole::OUT * batch);
        let mut state = vec![0.0; Whole::STATE];
        Whole::init_state(&mut state);
        let per =
            forward_backward::<PerPosition<Inner, T>>(mode, 0, &params, &state, &x, &dy, batch);
        let whole = forward_backward::<Whole>(mode, 0, &params, &state, &x, &dy, batch);
        assert_same_bits(&per, &whole);
    }

    #[test]
    fn batch_statistics_and_masks_cover_the_positions() {
        same_bits::<BatchNorm<3>, BatchNorm<3, 5>, 5>(Mode::Train);
        same_bits::<BatchNorm<3>, BatchNorm<3, 5>, 5>(Mode::Eval);
    }

    /// Dropout per position keys each position's mask by its global place (sample times
    /// positions plus position): a batch cut in two gives the masks of the whole one.
    #[test]
    fn masks_follow_the_global_positions() {
        type P = PerPosition<Dropout<4, 300>, 6>;
        let x = vec![1.0; 24 * 3];
        let (dy, state) = (vec![1.0; 24 * 3], []);
        let whole = forward_backward::<P>(Mode::Train, 0, &[], &state, &x, &dy, 3);
        let head = forward_backward::<P>(Mode::Train, 0, &[], &state, &x[..24], &dy[..24], 1);
        let tail = forward_backward::<P>(Mode::Train, 1, &[], &state, &x[24..], &dy[24..], 2);
        let cut: Vec<f32> = head.y.iter().chain(&tail.y).copied().collect();
        assert_eq!(bits(&cut), bits(&whole.y));
        assert!(whole.y.contains(&0.0) && whole.y.iter().any(|&v| v > 1.0));
    }
}
