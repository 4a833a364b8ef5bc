//! Max and average pooling over NHWC images, with valid padding; the mean over the positions
//! of a channels-last sequence.

use super::{buffers, Backward, Ctx, Forward, Layer, Lengths, Tensor};
use crate::kernels::parallel::{for_sample_runs, PerSample};
use crate::lane::{self, Lane, OnLanes, MAX_LANES};
use crate::lane::{add_rows, add_to_each_row, copy};

/// Output length along one dimension of a `pool`-wide window moving by `stride`.
const fn pool_out(input: usize, pool: usize, stride: usize) -> usize {
    assert!(
        pool > 0 && stride > 0,
        "pooling: POOL and STRIDE must be at least 1"
    );
    assert!(
        input >= pool,
        "pooling: the input must be at least as large as the window"
    );
    (input - pool) / stride + 1
}

/// Visits every window of an `H`x`W`x`C` image batch, in output order: `f(o, first)` with
/// the output index `o` and the image index of the window's first value; the window's values
/// are at `first + (kh * W + kw) * C` for `kh, kw < POOL`.
fn for_each_window<
    const H: usize,
    const W: usize,
    const C: usize,
    const POOL: usize,
    const STRIDE: usize,
>(
    batch: usize,
    mut f: impl FnMut(usize, usize),
) {
    let (oh_n, ow_n) = (pool_out(H, POOL, STRIDE), pool_out(W, POOL, STRIDE));
    let mut o = 0;
    for n in 0..batch {
        for oh in 0..oh_n {
            for ow in 0..ow_n {
                let corner = ((n * H + oh * STRIDE) * W + ow * STRIDE) * C;
                for c in 0..C {
                    f(o, corner + c);
                    o += 1;
                }
            }
        }
    }
}

/// Offsets of a window's values from its first one, in row-major order.
fn window<const W: usize, const C: usize, const POOL: usize>() -> impl Iterator<Item = usize> {
    (0..POOL).flat_map(|kh| (0..POOL).map(move |kw| (kh * W + kw) * C))
}

macro_rules! pool_common {
    ($name:ident) => {
        impl<
                const H: usize,
                const W: usize,
                const C: usize,
                const POOL: usize,
                const STRIDE: usize,
            > $name<H, W, C, POOL, STRIDE>
        {
            /// Output height.
            pub const OH: usize = pool_out(H, POOL, STRIDE);
            /// Output width.
            pub const OW: usize = pool_out(W, POOL, STRIDE);

            /// The layer (it holds no data).
            pub const fn new() -> Self {
                $name
            }
        }
    };
}

/// Max pooling of an `H`x`W`x`C` image (NHWC) over `POOL`x`POOL` windows moving by `STRIDE`
/// (default `POOL`), valid padding: the output is [`OH`](Self::OH)x[`OW`](Self::OW)x`C`.
///
/// Forward saves, per output value, the index within the sample of the input it took (as an
/// `f32`, exact below 2^24): the first maximum of the window in row-major order, or its last
/// NaN, as PyTorch picks it. Backward sends each gradient to that input, adding where windows
/// overlap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MaxPool2d<
    const H: usize,
    const W: usize,
    const C: usize,
    const POOL: usize,
    const STRIDE: usize = POOL,
>;

pool_common!(MaxPool2d);

impl<const H: usize, const W: usize, const C: usize, const POOL: usize, const STRIDE: usize> Layer
    for MaxPool2d<H, W, C, POOL, STRIDE>
{
    fn describe(out: &mut dyn core::fmt::Write) -> core::fmt::Result {
        write!(out, "MaxPool2d<{H}x{W}x{C}, {POOL}x{POOL}/{STRIDE}>")
    }

    const IN: usize = {
        assert!(
            H * W * C <= 1 << 24,
            "MaxPool2d: an f32 holds arg-max indices exactly only below 2^24 values per sample"
        );
        H * W * C
    };
    const OUT: usize = Self::OH * Self::OW * C;
    const PARAMS: usize = 0;
    const STATE: usize = 0;
    const SAVED: usize = Self::OUT;
    const TENSORS: &'static [Tensor] = &[];
    const FREEZABLE: bool = true;

    fn forward(_ctx: &mut Ctx<'_>, io: Forward<'_>) {
        buffers::forward::<Self>(&io);
        let Forward {
            x, y, saved, batch, ..
        } = io;
        let per = |data| PerSample {
            data,
            per: Self::OUT,
        };
        let work = batch * (Self::IN + 2 * Self::OUT);
        for_sample_runs(batch, work, (per(y), per(saved)), &|n, (y, saved)| {
            let x = &x[n.start * Self::IN..n.end * Self::IN];
            max_pool::<H, W, C, POOL, STRIDE>(x, y.data, saved.data, n.len());
        });
    }

    fn backward(_ctx: &mut Ctx<'_>, io: Backward<'_>) {
        buffers::backward::<Self>(&io);
        let Backward {
            saved,
            dy,
            dx,
            batch,
            ..
        } = io;
        let Some(dx) = dx.accumulator() else {
            return;
        };
        let out = PerSample {
            data: dx,
            per: Self::IN,
        };
        let work = batch * (Self::IN + 2 * Self::OUT);
        for_sample_runs(batch, work, out, &|n, dx| {
            let range = n.start * Self::OUT..n.end * Self::OUT;
            for (o, (&d, &arg)) in dy[range.clone()].iter().zip(&saved[range]).enumerate() {
                dx.data[o / Self::OUT * Self::IN + arg as usize] += d;
            }
        });
    }
}

/// Max pooling of `batch` images `x` into `y`, the arg-max of each output (its index within
/// the image, as an `f32`) into `saved`: eight channels at a time, each window's values
/// compared in row-major order, so that the first maximum wins, or the last NaN.
fn max_pool<
    const H: usize,
    const W: usize,
    const C: usize,
    const POOL: usize,
    const STRIDE: usize,
>(
    x: &[f32],
    y: &mut [f32],
    saved: &mut [f32],
    batch: usize,
) {
    lane::dispatch(MaxPool::<H, W, C, POOL, STRIDE> { x, y, saved, batch });
}

/// [`max_pool`]'s work, on any lane type: the maxima and their indices are exact, so every
/// lane type gives the same bits.
struct MaxPool<
    'a,
    const H: usize,
    const W: usize,
    const C: usize,
    const POOL: usize,
    const STRIDE: usize,
> {
    x: &'a [f32],
    y: &'a mut [f32],
    saved: &'a mut [f32],
    batch: usize,
}

impl<const H: usize, const W: usize, const C: usize, const POOL: usize, const STRIDE: usize> OnLanes
    for MaxPool<'_, H, W, C, POOL, STRIDE>
{
    type Output = ();
    #[inline(always)]
    fn run<L: Lane>(self) {
        const INDICES: [f32; MAX_LANES] = {
            let mut a = [0.0; MAX_LANES];
            let mut i = 0;
            while i < MAX_LANES {
                a[i] = i as f32;
                i += 1;
            }
            a
        };
        let Self { x, y, saved, batch } = self;
        let (oh_n, ow_n) = (pool_out(H, POOL, STRIDE), pool_out(W, POOL, STRIDE));
        let index = L::load(&INDICES);
        let mut o = 0;
        for image in x.chunks_exact(H * W * C).take(batch) {
            for oh in 0..oh_n {
                for ow in 0..ow_n {
                    let corner = ((oh * STRIDE) * W + ow * STRIDE) * C;
                    for (c0, len) in lane::pieces::<L>(C) {
                        let (mut best, mut arg) = (L::splat(f32::NEG_INFINITY), L::ZERO);
                        for off in window::<W, C, POOL>() {
                            let at = corner + off + c0;
                            let v = L::load_padded(&image[at..at + len]);
                            // Greater, or NaN (which compares false with everything).
                            let nan = v.simd_ne(v);
                            let take = nan.select(nan, v.simd_gt(best));
                            best = take.select(v, best);
                            arg = take.select(index + L::splat(at as f32), arg);
                        }
                        best.store_partial(&mut y[o + c0..o + c0 + len]);
                        arg.store_partial(&mut saved[o + c0..o + c0 + len]);
                    }
                    o += C;
                }
            }
        }
    }
}

/// Average pooling of an `H`x`W`x`C` image (NHWC) over `POOL`x`POOL` windows moving by
/// `STRIDE` (default `POOL`), valid padding: the output is [`OH`](Self::OH)x[`OW`](Self::OW)x`C`,
/// each value the window's sum (in row-major order) divided by `POOL * POOL`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AvgPool2d<
    const H: usize,
    const W: usize,
    const C: usize,
    const POOL: usize,
    const STRIDE: usize = POOL,
>;

pool_common!(AvgPool2d);

impl<const H: usize, const W: usize, const C: usize, const POOL: usize, const STRIDE: usize> Layer
    for AvgPool2d<H, W, C, POOL, STRIDE>
{
    fn describe(out: &mut dyn core::fmt::Write) -> core::fmt::Result {
        write!(out, "AvgPool2d<{H}x{W}x{C}, {POOL}x{POOL}/{STRIDE}>")
    }

    const IN: usize = H * W * C;
    const OUT: usize = Self::OH * Self::OW * C;
    const PARAMS: usize = 0;
    const STATE: usize = 0;
    const SAVED: usize = 0;
    const TENSORS: &'static [Tensor] = &[];
    const FREEZABLE: bool = true;

    fn forward(_ctx: &mut Ctx<'_>, io: Forward<'_>) {
        buffers::forward::<Self>(&io);
        let Forward { x, y, batch, .. } = io;
        let area = (POOL * POOL) as f32;
        let out = PerSample {
            data: y,
            per: Self::OUT,
        };
        let work = batch * (Self::IN + Self::OUT);
        for_sample_runs(batch, work, out, &|n, y| {
            let x = &x[n.start * Self::IN..n.end * Self::IN];
            for_each_window::<H, W, C, POOL, STRIDE>(n.len(), |o, first| {
                let sum: f32 = window::<W, C, POOL>().map(|off| x[first + off]).sum();
                y.data[o] = sum / area;
            });
        });
    }

    fn backward(_ctx: &mut Ctx<'_>, io: Backward<'_>) {
        buffers::backward::<Self>(&io);
        let Backward { dy, dx, batch, .. } = io;
        let Some(dx) = dx.accumulator() else {
            return;
        };
        let area = (POOL * POOL) as f32;
        let out = PerSample {
            data: dx,
            per: Self::IN,
        };
        let work = batch * (Self::IN + Self::OUT);
        for_sample_runs(batch, work, out, &|n, dx| {
            let dy = &dy[n.start * Self::OUT..n.end * Self::OUT];
            for_each_window::<H, W, C, POOL, STRIDE>(n.len(), |o, first| {
                let g = dy[o] / area;
                for off in window::<W, C, POOL>() {
                    dx.data[first + off] += g;
                }
            });
        });
    }
}

/// The mean over the real positions of channels-last sequences, `[time, channels]` to
/// `[channels]` per sample, for `io.batch` samples: each output is the sum of its channel over
/// the sample's first `lengths.of(b, time)` positions in order, in `f32`, divided by their
/// number (all `time` of them with [`Lengths::FULL`]; the padding after them is not read).
/// The layer has no parameters, state or saved values. [`MeanOverTime`] passes its constants
/// and its call's lengths; a model whose shapes are known only at run time passes its own.
///
/// # Panics
/// If `time` is 0, a buffer's length does not follow from the sizes and `io.batch`, or a
/// sample's length is 0.
pub fn mean_over_time_forward(time: usize, channels: usize, lengths: Lengths<'_>, io: Forward<'_>) {
    let Forward { x, y, batch, .. } = io;
    let name = "mean_over_time_forward";
    assert!(time > 0, "{name}: a sequence of no positions has no mean");
    buffers::expect(name, "x", x.len(), batch * time * channels);
    buffers::expect(name, "y", y.len(), batch * channels);
    let samples = x
        .chunks_exact(time * channels)
        .zip(y.chunks_exact_mut(channels));
    for (b, (x, y)) in samples.enumerate() {
        let real = real_steps(name, lengths, b, time);
        y.fill(0.0);
        add_rows(y, &x[..real * channels]);
        let scale = real as f32;
        for v in y.iter_mut() {
            *v /= scale;
        }
    }
}

/// The real positions of sample `b` of a sequence of `time` (at least 1).
fn real_steps(name: &str, lengths: Lengths<'_>, b: usize, time: usize) -> usize {
    let real = lengths.of(b, time);
    assert!(real > 0, "{name}: sample {b} has no real position");
    real
}

/// The backward pass of [`mean_over_time_forward`]: `io.dy` (d loss / d y) divided by the
/// sample's real positions (in place) goes to each of them in `io.dx`; its padded positions
/// get 0.
///
/// # Panics
/// As [`mean_over_time_forward`], for `dy` and `dx`.
pub fn mean_over_time_backward(
    time: usize,
    channels: usize,
    lengths: Lengths<'_>,
    io: Backward<'_>,
) {
    let Backward { dy, dx, batch, .. } = io;
    let name = "mean_over_time_backward";
    assert!(time > 0, "{name}: a sequence of no positions has no mean");
    buffers::expect(name, "dy", dy.len(), batch * channels);
    let Some((dx, add)) = dx.destination() else {
        return;
    };
    buffers::expect(name, "dx", dx.len(), batch * time * channels);
    let samples = dx
        .chunks_exact_mut(time * channels)
        .zip(dy.chunks_exact_mut(channels));
    for (b, (dx, dy)) in samples.enumerate() {
        let real = real_steps(name, lengths, b, time);
        let scale = real as f32;
        for v in dy.iter_mut() {
            *v /= scale;
        }
        let (real, padded) = dx.split_at_mut(real * channels);
        if add {
            add_to_each_row(real, dy);
        } else {
            for position in real.chunks_exact_mut(channels) {
                copy(position, dy);
            }
            padded.fill(0.0);
        }
    }
}

/// The mean over the `T` positions of a channels-last sequence, `[T, C]` to `[C]` per sample:
/// `y[c] = Σ_t x[t, c] / T`, summed in position order. Keras' `GlobalAveragePooling1D`,
/// PyTorch's `x.mean(dim=1)` on `[batch, T, C]` (or `AdaptiveAvgPool1d(1)` on channels-first
/// data), the mean over the positions of a bag of embeddings. Backward gives each position
/// `dy / T`. No parameters; `T` must be at least 1.
///
/// With lengths ([`Ctx::lengths`]) the mean is over each sample's real positions,
/// `Σ_{t < len} x[t, c] / len` (PyTorch's `EmbeddingBag(mode='mean')` over the valid tokens):
/// the padding is not read, and its gradient is 0.
///
/// Forward and backward are [`mean_over_time_forward`] and [`mean_over_time_backward`] with
/// `T` and `C`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MeanOverTime<const T: usize, const C: usize>;

impl<const T: usize, const C: usize> MeanOverTime<T, C> {
    /// The layer (it holds no data).
    pub const fn new() -> Self {
        MeanOverTime
    }
}

impl<const T: usize, const C: usize> Layer for MeanOverTime<T, C> {
    fn describe(out: &mut dyn core::fmt::Write) -> core::fmt::Result {
        write!(out, "MeanOverTime<{T} steps, {C}>")
    }

    const IN: usize = {
        assert!(
            T > 0,
            "MeanOverTime: a sequence of no positions has no mean (T >= 1)"
        );
        T * C
    };
    const OUT: usize = C;
    const PARAMS: usize = 0;
    const STATE: usize = 0;
    const SAVED: usize = 0;
    const TENSORS: &'static [Tensor] = &[];
    const FREEZABLE: bool = true;
    const STEPS: usize = T;

    fn forward(ctx: &mut Ctx<'_>, io: Forward<'_>) {
        buffers::forward::<Self>(&io);
        mean_over_time_forward(T, C, ctx.lengths, io);
    }

    fn backward(ctx: &mut Ctx<'_>, io: Backward<'_>) {
        buffers::backward::<Self>(&io);
        mean_over_time_backward(T, C, ctx.lengths, io);
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::layers::gradcheck::{
        assert_same_bits, bits, forward_backward_padded, Check, Passes,
    };
    use crate::layers::{Grad, Mode};
    use crate::rng::{Rng, Seed};
    use std::vec;
    use std::vec::Vec;

    /// `f` over each window of the reference, written with plain loops.
    fn reference<const H: usize, const W: usize, const C: usize, const P: usize, const S: usize>(
        x: &[f64],
        batch: usize,
        f: fn(&[f64]) -> f64,
    ) -> Vec<f64> {
        let (oh_n, ow_n) = ((H - P) / S + 1, (W - P) / S + 1);
        let mut y = Vec::new();
        for n in 0..batch {
            for oh in 0..oh_n {
                for ow in 0..ow_n {
                    for c in 0..C {
                        let mut win = Vec::new();
                        for kh in 0..P {
                            for kw in 0..P {
                                win.push(x[((n * H + oh * S + kh) * W + ow * S + kw) * C + c]);
                            }
                        }
                        y.push(f(&win));
                    }
                }
            }
        }
        y
    }

    fn max(w: &[f64]) -> f64 {
        w.iter().fold(f64::NEG_INFINITY, |a, &b| a.max(b))
    }

    fn mean(w: &[f64]) -> f64 {
        w.iter().sum::<f64>() / w.len() as f64
    }

    fn check<const H: usize, const W: usize, const C: usize, const P: usize, const S: usize>(
        batch: usize,
    ) {
        Check::new(batch)
            .run::<MaxPool2d<H, W, C, P, S>>(&|_, x, b| reference::<H, W, C, P, S>(x, b, max));
        Check::new(batch)
            .run::<AvgPool2d<H, W, C, P, S>>(&|_, x, b| reference::<H, W, C, P, S>(x, b, mean));
    }

    #[test]
    fn matches_reference_and_finite_differences() {
        check::<4, 4, 2, 2, 2>(2);
        check::<5, 5, 3, 3, 2>(2); // overlapping windows
        check::<5, 4, 1, 2, 2>(3); // a row and no column left over
        check::<3, 3, 2, 2, 1>(1);
    }

    /// The mean over positions in `f64`.
    fn mean_over_time<const T: usize, const C: usize>(x: &[f64], batch: usize) -> Vec<f64> {
        mean_over_steps::<T, C>(x, batch, &[T as u32; 64][..batch])
    }

    /// The mean of each sample's first `lengths[n]` steps, in `f64`.
    fn mean_over_steps<const T: usize, const C: usize>(
        x: &[f64],
        batch: usize,
        lengths: &[u32],
    ) -> Vec<f64> {
        (0..batch * C)
            .map(|o| {
                let (n, c) = (o / C, o % C);
                let len = lengths[n] as usize;
                (0..len).map(|t| x[(n * T + t) * C + c]).sum::<f64>() / len as f64
            })
            .collect()
    }

    #[test]
    fn mean_over_valid_steps_matches_reference_and_finite_differences() {
        fn check<const T: usize, const C: usize>(lengths: &[u32]) {
            let check = Check {
                lengths: Some(lengths.to_vec()),
                ..Check::new(lengths.len())
            };
            let reference = |_: &[f64], x: &[f64], b| mean_over_steps::<T, C>(x, b, lengths);
            check.run::<MeanOverTime<T, C>>(&reference);
        }
        check::<8, 4>(&[8, 3, 1, 5]);
        check::<7, 11>(&[2, 7]);
        check::<1, 3>(&[1, 1]);
    }

    /// A sample's real steps give the bits of a mean over that many steps (the padding
    /// removed), its padded steps a gradient of 0 (set, or nothing added); what the padding
    /// holds changes nothing; one thread or two give the same bits.
    #[test]
    fn the_padding_of_a_mean_is_not_read() {
        const T: usize = 6;
        const C: usize = 3;
        let lengths = [6, 2, 1, 4];
        let mut rng = Rng::new(Seed(5));
        let x: Vec<f32> = (0..4 * T * C).map(|_| rng.uniform(-1.0, 1.0)).collect();
        let dy: Vec<f32> = (0..4 * C).map(|_| rng.uniform(-1.0, 1.0)).collect();
        let padded = |x: &[f32]| {
            let x = (x, Lengths::new(&lengths));
            forward_backward_padded::<MeanOverTime<T, C>>(Mode::Train, 0, &[], &[], x, &dy, 4)
        };
        let got = padded(&x);
        for (b, &len) in lengths.iter().enumerate() {
            let len = len as usize;
            let sample = &x[b * T * C..][..len * C];
            let (y, dy) = (&got.y[b * C..][..C], &dy[b * C..][..C]);
            let short = one_sample_passes(sample, dy, len);
            assert_eq!(bits(&short.y), bits(y), "sample {b}");
            let dx = &got.dx[b * T * C..][..T * C];
            assert_eq!(bits(&short.dx), bits(&dx[..len * C]), "sample {b}");
            assert!(dx[len * C..].iter().all(|&g| g == 0.0), "sample {b}");
        }
        let mut other = x.clone();
        for (i, v) in other.iter_mut().enumerate() {
            if i / C % T >= lengths[i / (T * C)] as usize {
                *v = f32::NAN;
            }
        }
        assert_same_bits(&padded(&other), &got);
        let pool = |n| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .build()
                .unwrap()
        };
        assert_same_bits(
            &pool(2).install(|| padded(&x)),
            &pool(1).install(|| padded(&x)),
        );
    }

    /// Forward and backward of the mean over `time` steps of one sample `x`, with the output
    /// gradient `dy` (its channels).
    fn one_sample_passes(x: &[f32], dy: &[f32], time: usize) -> Passes {
        let (batch, channels) = (1, dy.len());
        let mut y = vec![0.0; dy.len()];
        let io = Forward {
            params: &[],
            state: &mut [],
            x,
            y: &mut y,
            saved: &mut [],
            batch,
        };
        mean_over_time_forward(time, channels, Lengths::FULL, io);
        let (mut dy, mut dx) = (dy.to_vec(), vec![f32::NAN; x.len()]);
        let io = Backward {
            params: &[],
            x,
            y: &y,
            saved: &[],
            dy: &mut dy,
            dx: Grad::Set(&mut dx),
            frozen: crate::layers::Frozen::NONE,
            dparams: &mut [],
            batch,
        };
        mean_over_time_backward(time, channels, Lengths::FULL, io);
        Passes {
            y,
            state: vec![],
            dx,
            dparams: vec![],
        }
    }

    #[test]
    fn mean_over_time_matches_reference_and_finite_differences() {
        fn check<const T: usize, const C: usize>(batch: usize) {
            Check::new(batch).run::<MeanOverTime<T, C>>(&|_, x, b| mean_over_time::<T, C>(x, b));
        }
        check::<8, 4>(4);
        check::<7, 11>(2); // channels beyond one lane
        check::<1, 3>(3);
        check::<5, 1>(2);
    }

    #[test]
    fn mean_over_time_spreads_dy_over_t() {
        type M = MeanOverTime<4, 2>;
        let mut rng = Rng::new(Seed(0));
        let mut ctx = Ctx {
            gemm: &mut [],
            scratch: &mut [],
            rng: &mut rng,
            first_sample: 0,
            mode: Mode::Train,
            lengths: crate::layers::Lengths::FULL,
        };
        let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 9.0];
        let mut y = [0.0; 2];
        let io = Forward {
            params: &[],
            state: &mut [],
            x: &x,
            y: &mut y,
            saved: &mut [],
            batch: 1,
        };
        M::forward(&mut ctx, io);
        assert_eq!(y, [4.0, 5.25]);
        let mut dx = [1.0; 8];
        let io = Backward {
            params: &[],
            x: &x,
            y: &y,
            saved: &[],
            dy: &mut [2.0, -6.0],
            dx: Grad::Add(&mut dx),
            frozen: crate::layers::Frozen::NONE,
            dparams: &mut [],
            batch: 1,
        };
        M::backward(&mut ctx, io);
        assert_eq!(dx, [1.5, -0.5, 1.5, -0.5, 1.5, -0.5, 1.5, -0.5]);
    }

    #[test]
    fn ties_pick_the_first_and_nan_propagates() {
        type M = MaxPool2d<2, 2, 1, 2>;
        let mut rng = Rng::new(Seed(0));
        let mut ctx = Ctx {
            gemm: &mut [],
            scratch: &mut [],
            rng: &mut rng,
            first_sample: 0,
            mode: Mode::Train,
            lengths: crate::layers::Lengths::FULL,
        };
        let x = [1.0, 3.0, 3.0, 2.0, 5.0, f32::NAN, 7.0, 8.0];
        let (mut y, mut saved) = ([0.0; 2], [0.0; 2]);
        let io = Forward {
            params: &[],
            state: &mut [],
            x: &x,
            y: &mut y,
            saved: &mut saved,
            batch: 2,
        };
        M::forward(&mut ctx, io);
        assert_eq!(y[0], 3.0);
        assert!(y[1].is_nan());
        assert_eq!(saved, [1.0, 1.0]);
        let mut dx = vec![0.0; 8];
        let io = Backward {
            params: &[],
            x: &x,
            y: &y,
            saved: &saved,
            dy: &mut [1.0, 2.0],
            dx: Grad::Set(&mut dx),
            frozen: crate::layers::Frozen::NONE,
            dparams: &mut [],
            batch: 2,
        };
        M::backward(&mut ctx, io);
        assert_eq!(bits(&dx), bits(&[0.0, 1.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0]));
    }

    #[test]
    fn shapes() {
        type M = MaxPool2d<28, 28, 32, 2>;
        assert_eq!(
            (M::OH, M::OW, M::OUT, M::SAVED),
            (14, 14, 14 * 14 * 32, 14 * 14 * 32)
        );
        type A = AvgPool2d<7, 5, 3, 3, 2>;
        assert_eq!((A::OH, A::OW, A::SAVED), (3, 2, 0));
        assert_eq!(A::new(), AvgPool2d::<7, 5, 3, 3, 2>);
    }

    #[test]
    fn max_pool_gives_the_same_bits_on_every_lane_type() {
        // 6x6 images of 20 channels (a lane and a partial one), windows 3 moving by 2, with
        // ties and NaNs.
        let x: Vec<f32> = (0..2 * 6 * 6 * 20)
            .map(|i| match i % 17 {
                3 => f32::NAN,
                k => ((i * 7 + k) % 5) as f32 - 2.0,
            })
            .collect();
        let run = |lanes: lane::Tested| {
            let (mut y, mut saved) = (vec![0.0; 2 * 2 * 2 * 20], vec![0.0; 2 * 2 * 2 * 20]);
            lanes.run(MaxPool::<6, 6, 20, 3, 2> {
                x: &x,
                y: &mut y,
                saved: &mut saved,
                batch: 2,
            });
            (bits(&y), bits(&saved))
        };
        let want = run(lane::Tested::One);
        for lanes in lane::Tested::every() {
            assert!(run(lanes) == want, "{lanes:?}");
        }
    }
}
