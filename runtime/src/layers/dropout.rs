//! Inverted dropout.

use super::{buffers, Backward, Ctx, Forward, Layer, Mode, Tensor};
use crate::lane::{self, Lane, OnLanes};
use crate::rng::Rng;

/// Inverted dropout of `N` values per sample at a rate of `RATE_PER_MILLE / 1000`.
///
/// In [`Mode::Train`] each value is dropped with that probability and the others are scaled by `1 / (1 - rate)`, so the
/// expected output is the input (Keras and PyTorch); the mask of factors (0 or the scale) is
/// saved for backward. The draws are keyed: the layer takes one key from [`Ctx::rng`], and
/// sample `i` of the call draws its `N` values in order from [`Rng::keyed`] with that key and
/// its global index [`Ctx::first_sample`]` + i`, so a sample's mask is the same whether its
/// batch ran whole or cut into shards on several processes. In [`Mode::Eval`] the layer is the identity and saves nothing; its
/// backward must then run in `Eval` as well, where it is the identity too.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dropout<const N: usize, const RATE_PER_MILLE: u32>;

impl<const N: usize, const RATE_PER_MILLE: u32> Dropout<N, RATE_PER_MILLE> {
    /// The factor of the values kept, `1 / (1 - rate)`, computed as PyTorch does (`1 - p` in
    /// double precision, rounded to `f32`, then the `f32` division).
    pub const SCALE: f32 = {
        assert!(
            RATE_PER_MILLE < 1000,
            "Dropout: the rate must be below 1000 per mille"
        );
        1.0 / ((1.0 - RATE_PER_MILLE as f64 / 1000.0) as f32)
    };

    /// A value is dropped when its 32 random bits fall below this threshold:
    /// `floor(rate * 2^32)`.
    const THRESHOLD: u64 = ((RATE_PER_MILLE as u64) << 32) / 1000;

    /// The layer (it holds no data).
    pub const fn new() -> Self {
        Dropout
    }
}

impl<const N: usize, const RATE_PER_MILLE: u32> Layer for Dropout<N, RATE_PER_MILLE> {
    fn describe(out: &mut dyn core::fmt::Write) -> core::fmt::Result {
        write!(out, "Dropout<{N}, rate: {RATE_PER_MILLE}/1000>")
    }

    const IN: usize = N;
    const OUT: usize = N;
    const PARAMS: usize = 0;
    const STATE: usize = 0;
    const SAVED: usize = N;
    const TENSORS: &'static [Tensor] = &[];
    const FREEZABLE: bool = true;

    fn forward(ctx: &mut Ctx<'_>, io: Forward<'_>) {
        buffers::forward::<Self>(&io);
        let Forward { x, y, saved, .. } = io;
        if ctx.mode == Mode::Eval {
            y.copy_from_slice(x);
            return;
        }
        let key = ctx.rng.next_u64();
        for (i, mask) in saved.chunks_exact_mut(N).enumerate() {
            let mut rng = Rng::keyed(key, (ctx.first_sample + i) as u64);
            for m in mask {
                let drop = u64::from(rng.next_u32()) < Self::THRESHOLD;
                *m = if drop { 0.0 } else { Self::SCALE };
            }
        }
        lane::dispatch_for(
            y.len(),
            Scale {
                from: x,
                by: Some(&*saved),
                to: y,
                add: false,
            },
        );
    }

    fn backward(ctx: &mut Ctx<'_>, io: Backward<'_>) {
        buffers::backward::<Self>(&io);
        let Backward { saved, dy, dx, .. } = io;
        let Some((dx, add)) = dx.destination() else {
            return;
        };
        let by = (ctx.mode == Mode::Train).then_some(saved);
        lane::dispatch_for(
            dx.len(),
            Scale {
                from: dy,
                by,
                to: dx,
                add,
            },
        );
    }
}

/// `to = from * by` (`from` alone without `by`), or `to += ...` with `add`, on any lane type:
/// the masked values of dropout's forward and backward.
struct Scale<'a> {
    from: &'a [f32],
    by: Option<&'a [f32]>,
    to: &'a mut [f32],
    add: bool,
}

impl OnLanes for Scale<'_> {
    type Output = ();
    #[inline(always)]
    fn run<L: Lane>(self) {
        for (i, n) in lane::pieces::<L>(self.to.len()) {
            let mut v = L::load_padded(&self.from[i..i + n]);
            if let Some(by) = self.by {
                v *= L::load_padded(&by[i..i + n]);
            }
            if self.add {
                v += L::load_padded(&self.to[i..i + n]);
            }
            v.store_partial(&mut self.to[i..i + n]);
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::layers::gradcheck::bits;
    use crate::layers::Grad;
    use crate::rng::{Rng, Seed};
    use std::vec;

    fn run<const N: usize, const R: u32>(
        mode: Mode,
        x: &[f32],
        batch: usize,
        seed: u64,
        first: usize,
    ) -> (std::vec::Vec<f32>, std::vec::Vec<f32>, std::vec::Vec<f32>) {
        let mut rng = Rng::new(Seed(seed));
        let mut ctx = Ctx {
            gemm: &mut [],
            scratch: &mut [],
            rng: &mut rng,
            first_sample: first,
            mode,
            lengths: crate::layers::Lengths::FULL,
        };
        let mut y = vec![f32::NAN; x.len()];
        let mut saved = vec![f32::NAN; x.len()];
        let io = Forward {
            params: &[],
            state: &mut [],
            x,
            y: &mut y,
            saved: &mut saved,
            batch,
        };
        Dropout::<N, R>::forward(&mut ctx, io);
        let mut dy: std::vec::Vec<f32> = (0..x.len()).map(|i| i as f32 * 0.5 - 3.0).collect();
        let mut dx = vec![1.0; x.len()];
        let dy0 = dy.clone();
        let io = Backward {
            params: &[],
            x,
            y: &y,
            saved: &saved,
            dy: &mut dy,
            dx: Grad::Add(&mut dx),
            frozen: crate::layers::Frozen::NONE,
            dparams: &mut [],
            batch,
        };
        Dropout::<N, R>::backward(&mut ctx, io);
        for i in 0..x.len() {
            let factor = if mode == Mode::Eval { 1.0 } else { saved[i] };
            assert_eq!(dx[i], 1.0 + dy0[i] * factor);
        }
        (y, saved, dx)
    }

    #[test]
    fn mask_statistics() {
        const N: usize = 1000;
        let batch = 20;
        let x = vec![1.0f32; N * batch];
        let (y, saved, _) = run::<N, 300>(Mode::Train, &x, batch, 3, 0);
        let scale = Dropout::<N, 300>::SCALE;
        assert_eq!(scale, 1.0 / 0.7f32);
        let kept = saved.iter().filter(|&&m| m == scale).count();
        let dropped = saved.iter().filter(|&&m| m == 0.0).count();
        assert_eq!(
            kept + dropped,
            N * batch,
            "the mask holds only 0 and the scale"
        );
        let frac = dropped as f64 / (N * batch) as f64;
        // Binomial standard deviation: sqrt(0.3 * 0.7 / 20000) ~ 0.0032.
        assert!((frac - 0.3).abs() < 0.015, "{frac}");
        assert_eq!(bits(&y), bits(&saved));
        let mean = y.iter().map(|&v| f64::from(v)).sum::<f64>() / y.len() as f64;
        assert!((mean - 1.0).abs() < 0.03, "{mean}");
        // The same seed repeats the mask, another one does not.
        assert_eq!(
            bits(&run::<N, 300>(Mode::Train, &x, batch, 3, 0).1),
            bits(&saved)
        );
        assert_ne!(
            bits(&run::<N, 300>(Mode::Train, &x, batch, 4, 0).1),
            bits(&saved)
        );
    }

    /// The masks of `batch` samples of `N` values whose first has global index `first`.
    fn masks<const N: usize>(batch: usize, first: usize) -> std::vec::Vec<f32> {
        run::<N, 500>(Mode::Train, &vec![1.0; N * batch], batch, 11, first).1
    }

    #[test]
    fn a_sample_mask_does_not_depend_on_how_the_batch_is_cut() {
        let whole = masks::<16>(6, 0);
        let mut shards = masks::<16>(2, 0);
        shards.extend(masks::<16>(3, 2));
        shards.extend(masks::<16>(1, 5));
        assert_eq!(bits(&shards), bits(&whole));
        // Samples differ from each other: each has a stream of its own.
        assert_ne!(bits(&whole[..16]), bits(&whole[16..32]));
        assert_ne!(bits(&masks::<16>(1, 7)), bits(&masks::<16>(1, 8)));
    }

    #[test]
    fn eval_is_the_identity_and_rate_zero_keeps_all() {
        let x: std::vec::Vec<f32> = (0..30).map(|i| i as f32 - 7.5).collect();
        let (y, saved, _) = run::<10, 500>(Mode::Eval, &x, 3, 1, 0);
        assert_eq!(bits(&y), bits(&x));
        assert!(saved.iter().all(|v| v.is_nan()), "Eval saves nothing");
        let (y, _, _) = run::<10, 0>(Mode::Train, &x, 3, 1, 0);
        assert_eq!(bits(&y), bits(&x));
        let (_, saved, _) = run::<10, 999>(Mode::Train, &x, 3, 1, 0);
        assert!(saved.iter().filter(|&&m| m == 0.0).count() >= 25);
        assert_eq!(Dropout::<3, 500>::new(), Dropout::<3, 500>);
    }
}
