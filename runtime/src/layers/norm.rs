//! Normalization layers: [`LayerNorm`] over the features of a sample, [`BatchNorm`] over the
//! batch for each channel. Statistics are computed in [`Wide`] (`f64`, or compensated `f32`
//! with the feature `f32-accumulators`: see [`accumulate`](crate::accumulate)), summing in a
//! fixed order (sample after sample), so they do not depend on threads or on how a pass is
//! split.

use super::{buffers, Backward, Ctx, Forward, Init, Layer, Mode, Tensor, Torch};
use crate::accumulate::{narrow, widen, Accumulator, Wide};
use crate::lane::add_assign;
use crate::math;

/// PyTorch's default epsilon, for both layers (Keras uses 1e-3).
const EPS: Wide = 1e-5;

/// Channels whose sums one pass over the data accumulates (on the stack).
const BLOCK: usize = 64;

/// `gamma` (ones) and `beta` (zeros), `n` values each.
macro_rules! affine_tensors {
    ($n:expr) => {
        &[
            Tensor {
                name: "gamma",
                shape: &[$n],
                fans: ($n, $n),
                init: Init::Ones,
            },
            Tensor {
                name: "beta",
                shape: &[$n],
                fans: ($n, $n),
                init: Init::Zeros,
            },
        ]
    };
}

/// PyTorch's names for `gamma` and `beta`: `weight` and `bias`.
const TORCH_AFFINE: &[Torch] = &[
    Torch {
        name: "weight",
        axes: &[],
    },
    Torch {
        name: "bias",
        axes: &[],
    },
];

/// Layer normalization over the `N` features of each sample:
/// `y = (x - mean) / sqrt(var + 1e-5) * gamma + beta`, with the biased variance.
///
/// Parameters, in order: `gamma` ([`Init::Ones`]) and `beta` ([`Init::Zeros`]), `N` values
/// each. Epsilon is PyTorch's `LayerNorm` default, 1e-5; Keras' `LayerNormalization` uses
/// 1e-3, which shifts results visibly for features of small variance. Forward saves the mean
/// and `1 / sqrt(var + eps)` of each sample ([`SAVED`](Layer::SAVED) = 2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LayerNorm<const N: usize>;

impl<const N: usize> LayerNorm<N> {
    /// The layer (it holds no data: parameters live in the model's flat buffer).
    pub const fn new() -> Self {
        LayerNorm
    }
}

impl<const N: usize> Layer for LayerNorm<N> {
    fn describe(out: &mut dyn core::fmt::Write) -> core::fmt::Result {
        write!(out, "LayerNorm<{N}>")
    }

    const IN: usize = N;
    const OUT: usize = N;
    const PARAMS: usize = 2 * N;
    const STATE: usize = 0;
    const SAVED: usize = 2;
    const TENSORS: &'static [Tensor] = affine_tensors!(N);
    const TORCH: &'static [Torch] = TORCH_AFFINE;
    const FREEZABLE: bool = true;

    fn forward(_ctx: &mut Ctx<'_>, io: Forward<'_>) {
        buffers::forward::<Self>(&io);
        layer_norm_forward(N, io);
    }

    fn backward(_ctx: &mut Ctx<'_>, io: Backward<'_>) {
        buffers::backward::<Self>(&io);
        layer_norm_backward(N, io);
    }
}

/// Rows of a [`LayerNorm`] pass whose sums run side by side: each row's sums take its values
/// in order, as they would alone (the same bits), but the chains of `f64` additions of
/// different rows overlap instead of waiting on each other.
const ROWS: usize = 8;

/// Rows of a [`LayerNorm`] backward pass whose sums run side by side, as [`ROWS`] in forward
/// (each row does more work between its additions there).
const GRAD_ROWS: usize = 4;

/// [`LayerNorm`]'s forward pass over rows of `n` features (`io.params`: `gamma` then `beta`,
/// `n` each; `io.saved`: the mean and `1 / sqrt(var + eps)` of each row), for a model whose
/// sizes are known only at run time. Always inlined, so that `LayerNorm<N>` compiles with its
/// constant.
#[inline(always)]
pub fn layer_norm_forward(n: usize, io: Forward<'_>) {
    let Forward {
        params,
        x,
        y,
        saved,
        ..
    } = io;
    if n == 0 {
        return;
    }
    let affine = params.split_at(n);
    let full = x.len() / n / ROWS * ROWS;
    let (x_full, x_tail) = x.split_at(full * n);
    let (y_full, y_tail) = y.split_at_mut(full * n);
    let (s_full, s_tail) = saved.split_at_mut(full * 2);
    let groups = x_full
        .chunks_exact(ROWS * n)
        .zip(y_full.chunks_exact_mut(ROWS * n))
        .zip(s_full.chunks_exact_mut(ROWS * 2));
    for ((x, y), s) in groups {
        normalize_rows::<ROWS>(n, affine, x, y, s);
    }
    let rows = x_tail
        .chunks_exact(n)
        .zip(y_tail.chunks_exact_mut(n))
        .zip(s_tail.chunks_exact_mut(2));
    for ((x, y), s) in rows {
        normalize_rows::<1>(n, affine, x, y, s);
    }
}

/// `R` rows of `n` values each, as an array of slices.
#[inline(always)]
fn rows<const R: usize>(data: &[f32], n: usize) -> [&[f32]; R] {
    core::array::from_fn(|r| &data[r * n..(r + 1) * n])
}

/// The mean and `1 / sqrt(var + eps)` of each of `R` rows, summed in [`Wide`] in order.
#[inline(always)]
fn row_stats<const R: usize>(x: [&[f32]; R], n: usize) -> [(f32, f32); R] {
    let mut sum = [Accumulator::ZERO; R];
    for i in 0..n {
        for (s, row) in sum.iter_mut().zip(&x) {
            s.add(widen(row[i]));
        }
    }
    let mean = sum.map(|s| s.total() / n as Wide);
    let mut squares = [Accumulator::ZERO; R];
    for i in 0..n {
        for ((s, row), &m) in squares.iter_mut().zip(&x).zip(&mean) {
            let d = widen(row[i]) - m;
            s.add(d * d);
        }
    }
    core::array::from_fn(|r| {
        let var = squares[r].total() / n as Wide;
        (narrow(mean[r]), narrow(1.0 / math::sqrt(var + EPS)))
    })
}

/// The forward pass of `R` rows: their statistics into `saved` (two values a row), then
/// `y = (x - mean) * rstd * gamma + beta`.
#[inline(always)]
fn normalize_rows<const R: usize>(
    n: usize,
    (gamma, beta): (&[f32], &[f32]),
    x: &[f32],
    y: &mut [f32],
    saved: &mut [f32],
) {
    let stats = row_stats::<R>(rows::<R>(x, n), n);
    for (((xr, yr), s), &(mean, rstd)) in x
        .chunks_exact(n)
        .zip(y.chunks_exact_mut(n))
        .zip(saved.chunks_exact_mut(2))
        .zip(&stats)
    {
        s.copy_from_slice(&[mean, rstd]);
        for (((y, &x), &g), &b) in yr.iter_mut().zip(xr).zip(gamma).zip(beta) {
            *y = (x - mean) * rstd * g + b;
        }
    }
}

/// [`LayerNorm`]'s backward pass over rows of `n` features; see [`layer_norm_forward`]. The
/// gradients of `gamma` and `beta` go into `io.dparams` unless `io.frozen` names them; with
/// both frozen and no `io.dx` wanted, nothing is computed.
#[inline(always)]
pub fn layer_norm_backward(n: usize, io: Backward<'_>) {
    let gamma = &io.params[..n];
    let [mut dgamma, mut dbeta] = io.frozen.split(io.dparams, [n, n]);
    for grad in [&mut dgamma, &mut dbeta].into_iter().flatten() {
        grad.fill(0.0);
    }
    let mut dx = io.dx.destination();
    if n == 0 || dgamma.is_none() && dbeta.is_none() && dx.is_none() {
        return;
    }
    let total = io.x.len() / n;
    let mut start = 0;
    while start < total {
        let count = if total - start >= GRAD_ROWS {
            GRAD_ROWS
        } else {
            1
        };
        let (a, b) = (start * n, (start + count) * n);
        let group = RowsGrad {
            x: &io.x[a..b],
            dy: &io.dy[a..b],
            saved: &io.saved[start * 2..(start + count) * 2],
            dx: dx.as_mut().map(|(dx, add)| (&mut dx[a..b], *add)),
        };
        let grads = (dgamma.as_deref_mut(), dbeta.as_deref_mut());
        if count == GRAD_ROWS {
            backward_rows::<GRAD_ROWS>(n, gamma, group, grads);
        } else {
            backward_rows::<1>(n, gamma, group, grads);
        }
        start += count;
    }
}

/// The buffers of some rows' backward pass.
struct RowsGrad<'a> {
    /// What forward saw.
    x: &'a [f32],
    /// d loss / d y.
    dy: &'a [f32],
    /// The mean and `1 / sqrt(var + eps)` of each row.
    saved: &'a [f32],
    /// d loss / d x and whether it adds to what is there; `None` when it is not wanted.
    dx: Option<(&'a mut [f32], bool)>,
}

/// The gradients of a normalization's `gamma` and `beta`, each `None` when frozen.
type AffineGrads<'a> = (Option<&'a mut [f32]>, Option<&'a mut [f32]>);

/// One row's terms of `dgamma` (`dy * xhat`) and `dbeta` (`dy`), added into those not frozen.
#[inline(always)]
fn add_affine_terms(x: &[f32], dy: &[f32], (mean, rstd): (f32, f32), grads: AffineGrads<'_>) {
    let xhat = |x: f32| (x - mean) * rstd;
    match grads {
        (Some(dgamma), Some(dbeta)) => {
            let sums = dgamma.iter_mut().zip(dbeta.iter_mut());
            for (((dg, db), &x), &dy) in sums.zip(x).zip(dy) {
                *dg += dy * xhat(x);
                *db += dy;
            }
        }
        (Some(dgamma), None) => {
            for ((dg, &x), &dy) in dgamma.iter_mut().zip(x).zip(dy) {
                *dg += dy * xhat(x);
            }
        }
        (None, Some(dbeta)) => add_assign(dbeta, dy),
        (None, None) => {}
    }
}

/// The backward pass of `R` rows: their terms of `dgamma` and `dbeta` (added row after row,
/// those not frozen), then d loss / d x from each row's sums of `g = dy * gamma` and
/// `g * xhat`, in [`Wide`], in order (the rows' sums side by side).
#[inline(always)]
fn backward_rows<const R: usize>(
    n: usize,
    gamma: &[f32],
    rows_grad: RowsGrad<'_>,
    (mut dgamma, mut dbeta): AffineGrads<'_>,
) {
    let RowsGrad { x, dy, saved, dx } = rows_grad;
    let (xs, dys) = (rows::<R>(x, n), rows::<R>(dy, n));
    let stats: [(f32, f32); R] = core::array::from_fn(|r| (saved[2 * r], saved[2 * r + 1]));
    for ((x, dy), &stats) in xs.iter().zip(&dys).zip(&stats) {
        let grads = (dgamma.as_deref_mut(), dbeta.as_deref_mut());
        add_affine_terms(x, dy, stats, grads);
    }
    let (mut sum_g, mut sum_gx) = ([Accumulator::ZERO; R], [Accumulator::ZERO; R]);
    for i in 0..n {
        for r in 0..R {
            let (mean, rstd) = stats[r];
            let xhat = (xs[r][i] - mean) * rstd;
            let g = widen(dys[r][i] * gamma[i]);
            sum_g[r].add(g);
            sum_gx[r].add(g * widen(xhat));
        }
    }
    let Some((dx, add)) = dx else {
        return;
    };
    for (r, d) in dx.chunks_exact_mut(n).enumerate() {
        let (mean, rstd) = stats[r];
        let mean_of = |s: &Accumulator| narrow(s.total() / n as Wide);
        let (mean_g, mean_gx) = (mean_of(&sum_g[r]), mean_of(&sum_gx[r]));
        let v = |x: f32, dy: f32, g: f32| rstd * (dy * g - mean_g - (x - mean) * rstd * mean_gx);
        let terms = d.iter_mut().zip(xs[r]).zip(dys[r]).zip(gamma);
        // Two loops, so that neither decides per element whether to add.
        if add {
            terms.for_each(|(((d, &x), &dy), &g)| *d += v(x, dy, g));
        } else {
            terms.for_each(|(((d, &x), &dy), &g)| *d = v(x, dy, g));
        }
    }
}

/// Batch normalization of `C` channels, each over the batch and `SPATIAL` positions (1 after
/// a dense layer, `H * W` after a convolution: NHWC samples of `SPATIAL * C` values, channels
/// innermost).
///
/// `y = (x - mean) / sqrt(var + 1e-5) * gamma + beta`, per channel. Parameters, in order:
/// `gamma` ([`Init::Ones`]) and `beta` ([`Init::Zeros`]), `C` values each. State: the running
/// mean (initially 0) then the running variance (initially 1), `C` values each.
///
/// In [`Mode::Train`] the batch statistics are used (biased variance) and the running ones
/// move as PyTorch moves them: `running = 0.9 * running + 0.1 * batch`, with the unbiased
/// variance (`var * m / (m - 1)` over `m = batch * SPATIAL` values; with `m = 1`, where
/// PyTorch refuses to train, the biased one). In [`Mode::Eval`] the running statistics are
/// used and backward treats them as constants. Keras' `BatchNormalization` differs: its
/// momentum 0.99 keeps 99% of the running value (PyTorch's 0.1 keeps 90%), it moves the
/// running variance by the biased batch variance, and its epsilon is 1e-3.
///
/// Forward saves the mean and `1 / sqrt(var + eps)` of every channel: `2 * C` values, held in
/// the first sample's part of `saved` ([`SAVED`](Layer::SAVED) = `2 * C` per sample, since the
/// contract counts per sample). Backward must run in the mode of its forward.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BatchNorm<const C: usize, const SPATIAL: usize = 1>;

impl<const C: usize, const SPATIAL: usize> BatchNorm<C, SPATIAL> {
    /// PyTorch's momentum: the weight of the batch statistic in the running one.
    pub const MOMENTUM: Wide = 0.1;

    /// The layer (it holds no data: parameters and running statistics live in the model).
    pub const fn new() -> Self {
        BatchNorm
    }

    /// For each channel `c`, the sums in [`Wide`] of the pairs `f(r, c)` over the rows `r` of
    /// `C` values, `0..rows` in order; `out(c, sums)` receives them. Channels are taken
    /// [`BLOCK`] at a time, each block in one pass over the data.
    fn channel_sums(
        rows: usize,
        mut f: impl FnMut(usize, usize) -> (Wide, Wide),
        mut out: impl FnMut(usize, (Wide, Wide)),
    ) {
        for c0 in (0..C).step_by(BLOCK) {
            Self::block_sums(c0, rows, &mut f, &mut out);
        }
    }

    /// [`channel_sums`](Self::channel_sums) of the block of channels from `c0`.
    #[inline(always)]
    fn block_sums(
        c0: usize,
        rows: usize,
        mut f: impl FnMut(usize, usize) -> (Wide, Wide),
        mut out: impl FnMut(usize, (Wide, Wide)),
    ) {
        let c1 = (c0 + BLOCK).min(C);
        let mut acc = [(Accumulator::ZERO, Accumulator::ZERO); BLOCK];
        for r in 0..rows {
            for (c, a) in (c0..c1).zip(acc.iter_mut()) {
                let (u, v) = f(r, c);
                a.0.add(u);
                a.1.add(v);
            }
        }
        for (c, a) in (c0..c1).zip(acc) {
            out(c, (a.0.total(), a.1.total()));
        }
    }

    /// [`Layer::backward`] with `gamma` or `beta` frozen (`None`): block after block of
    /// channels, the sums the gradients that train and (in training) `dx` need, then `dx` of
    /// those channels. `value(r, c, (Σ dy, Σ dy * xhat))` is d loss / d x at row `r`, channel
    /// `c`; `sums(r, c)` the terms of those sums.
    fn backward_frozen(
        (rows, train): (usize, bool),
        (mut dgamma, mut dbeta): AffineGrads<'_>,
        mut dx: Option<(&mut [f32], bool)>,
        sums: impl Fn(usize, usize) -> (Wide, Wide),
        value: impl Fn(usize, usize, (f32, f32)) -> f32,
    ) {
        let needed = dgamma.is_some() || dbeta.is_some() || train && dx.is_some();
        for c0 in (0..C).step_by(BLOCK) {
            let c1 = (c0 + BLOCK).min(C);
            let mut block = [(0.0, 0.0); BLOCK];
            if needed {
                Self::block_sums(c0, rows, &sums, |c, (s, sx)| {
                    block[c - c0] = (narrow(s), narrow(sx));
                });
            }
            for (c, &(s, sx)) in (c0..c1).zip(&block) {
                if let Some(dbeta) = dbeta.as_deref_mut() {
                    dbeta[c] = s;
                }
                if let Some(dgamma) = dgamma.as_deref_mut() {
                    dgamma[c] = sx;
                }
            }
            let Some((dx, add)) = dx.as_mut() else {
                continue;
            };
            for (r, dxr) in dx.chunks_exact_mut(C).enumerate() {
                for (c, &block) in (c0..c1).zip(&block) {
                    let v = value(r, c, block);
                    dxr[c] = if *add { dxr[c] + v } else { v };
                }
            }
        }
    }
}

impl<const C: usize, const SPATIAL: usize> Layer for BatchNorm<C, SPATIAL> {
    fn describe(out: &mut dyn core::fmt::Write) -> core::fmt::Result {
        write!(out, "BatchNorm<{C}, spatial: {SPATIAL}>")
    }

    const IN: usize = SPATIAL * C;
    const OUT: usize = SPATIAL * C;
    const PARAMS: usize = 2 * C;
    const STATE: usize = 2 * C;
    const SAVED: usize = 2 * C;
    const TENSORS: &'static [Tensor] = affine_tensors!(C);
    const TORCH: &'static [Torch] = TORCH_AFFINE;
    const FREEZABLE: bool = true;
    const STATE_TENSORS: &'static [Tensor] = &[
        Tensor {
            name: "running_mean",
            shape: &[C],
            fans: (C, C),
            init: Init::Zeros,
        },
        Tensor {
            name: "running_var",
            shape: &[C],
            fans: (C, C),
            init: Init::Ones,
        },
    ];
    const BATCH_COUNTER: bool = true;

    fn init_state(state: &mut [f32]) {
        let (mean, var) = state.split_at_mut(C);
        mean.fill(0.0);
        var.fill(1.0);
    }

    fn forward(ctx: &mut Ctx<'_>, io: Forward<'_>) {
        buffers::forward::<Self>(&io);
        let Forward {
            params,
            state,
            x,
            y,
            saved,
            batch,
        } = io;
        let rows = batch * SPATIAL;
        if rows == 0 || C == 0 {
            return;
        }
        let (gamma, beta) = params.split_at(C);
        let (running_mean, running_var) = state.split_at_mut(C);
        let (mean, rstd) = saved[..2 * C].split_at_mut(C);
        let rstd_of = |var: Wide| narrow(1.0 / math::sqrt(var + EPS));
        if ctx.mode == Mode::Eval {
            mean.copy_from_slice(running_mean);
            for (r, &v) in rstd.iter_mut().zip(running_var.iter()) {
                *r = rstd_of(widen(v));
            }
        } else {
            let m = rows as Wide;
            // Means, a block of channels at a time, then the variances around them.
            Self::channel_sums(
                rows,
                |r, c| (widen(x[r * C + c]), 0.0),
                |c, (s, _)| {
                    mean[c] = narrow(s / m);
                },
            );
            Self::channel_sums(
                rows,
                |r, c| {
                    let d = widen(x[r * C + c]) - widen(mean[c]);
                    (d * d, 0.0)
                },
                |c, (s, _)| {
                    let var = s / m;
                    rstd[c] = rstd_of(var);
                    let unbiased = if rows > 1 { s / (m - 1.0) } else { var };
                    let mo = Self::MOMENTUM;
                    running_mean[c] =
                        narrow(mo * widen(mean[c]) + (1.0 - mo) * widen(running_mean[c]));
                    running_var[c] = narrow(mo * unbiased + (1.0 - mo) * widen(running_var[c]));
                },
            );
        }
        for (xr, yr) in x.chunks_exact(C).zip(y.chunks_exact_mut(C)) {
            for c in 0..C {
                yr[c] = (xr[c] - mean[c]) * rstd[c] * gamma[c] + beta[c];
            }
        }
    }

    fn backward(ctx: &mut Ctx<'_>, io: Backward<'_>) {
        buffers::backward::<Self>(&io);
        let Backward {
            params,
            x,
            saved,
            dy,
            dx,
            frozen,
            dparams,
            batch,
            ..
        } = io;
        let rows = batch * SPATIAL;
        let [dgamma, dbeta] = frozen.split(dparams, [C, C]);
        if rows == 0 || C == 0 {
            dgamma.into_iter().chain(dbeta).for_each(|d| d.fill(0.0));
            return;
        }
        let gamma = &params[..C];
        let (mean, rstd) = saved[..2 * C].split_at(C);
        let xhat = |r: usize, c: usize| (x[r * C + c] - mean[c]) * rstd[c];
        // dbeta = Σ dy, dgamma = Σ dy * xhat, per channel.
        let sums = |r: usize, c: usize| {
            let d = widen(dy[r * C + c]);
            (d, d * widen(xhat(r, c)))
        };
        let train = ctx.mode == Mode::Train;
        let m = rows as f32;
        // d loss / d x at row `r`, channel `c`, from the channel's `(dbeta, dgamma)`.
        let value = |r: usize, c: usize, (dbeta, dgamma): (f32, f32)| {
            // With batch statistics, the mean and variance depend on x too:
            // dx = gamma * rstd * (dy - mean(dy) - xhat * mean(dy * xhat)).
            let dy = dy[r * C + c];
            let g = if train {
                dy - dbeta / m - xhat(r, c) * (dgamma / m)
            } else {
                dy
            };
            gamma[c] * rstd[c] * g
        };
        let (dgamma, dbeta) = match (dgamma, dbeta) {
            (Some(dgamma), Some(dbeta)) => (dgamma, dbeta),
            grads => {
                Self::backward_frozen((rows, train), grads, dx.destination(), sums, value);
                return;
            }
        };
        Self::channel_sums(rows, sums, |c, (s, sx)| {
            dbeta[c] = narrow(s);
            dgamma[c] = narrow(sx);
        });
        let Some((dx, add)) = dx.destination() else {
            return;
        };
        for (r, dxr) in dx.chunks_exact_mut(C).enumerate() {
            for c in 0..C {
                let v = value(r, c, (dbeta[c], dgamma[c]));
                dxr[c] = if add { dxr[c] + v } else { v };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::layers::gradcheck::{assert_close, bits, Check};
    use std::vec::Vec;

    /// [`EPS`] for the `f64` references.
    const EPS_F64: f64 = 1e-5;

    /// Normalizes `x` (rows of `c` values) per channel with the given statistics.
    fn normalize(p: &[f64], x: &[f64], c: usize, mean: &[f64], var: &[f64]) -> Vec<f64> {
        let (gamma, beta) = p.split_at(c);
        x.iter()
            .enumerate()
            .map(|(i, &v)| {
                let j = i % c;
                (v - mean[j]) / (var[j] + EPS_F64).sqrt() * gamma[j] + beta[j]
            })
            .collect()
    }

    /// Per-channel mean and biased variance over rows of `c` values.
    fn stats(x: &[f64], c: usize) -> (Vec<f64>, Vec<f64>) {
        let m = (x.len() / c) as f64;
        let mean: Vec<f64> = (0..c)
            .map(|j| x.iter().skip(j).step_by(c).sum::<f64>() / m)
            .collect();
        let var = (0..c)
            .map(|j| {
                x.iter()
                    .skip(j)
                    .step_by(c)
                    .map(|v| (v - mean[j]).powi(2))
                    .sum::<f64>()
                    / m
            })
            .collect();
        (mean, var)
    }

    fn layer_norm<const N: usize>(batch: usize) {
        Check::new(batch).run::<LayerNorm<N>>(&|p, x, _| {
            let (gamma, beta) = p.split_at(N);
            x.chunks(N)
                .flat_map(|r| {
                    let (mean, var) = stats(r, 1);
                    let rstd = 1.0 / (var[0] + EPS_F64).sqrt();
                    (0..N).map(move |i| (r[i] - mean[0]) * rstd * gamma[i] + beta[i])
                })
                .collect()
        });
    }

    #[test]
    fn layer_norm_matches_reference_and_finite_differences() {
        layer_norm::<11>(3);
        layer_norm::<5>(1);
        layer_norm::<16>(2);
        layer_norm::<6>(ROWS + 2);
    }

    /// `rows` rows of [`LayerNorm`] over `n` features in one call: `y`, `saved`, `dx`,
    /// `dgamma` and `dbeta`.
    fn layer_norm_passes(n: usize, x: &[f32], dy: &[f32], params: &[f32]) -> [Vec<f32>; 5] {
        let rows = x.len() / n;
        let (mut y, mut saved) = (std::vec![0.0; rows * n], std::vec![0.0; rows * 2]);
        let io = Forward {
            params,
            state: &mut [],
            x,
            y: &mut y,
            saved: &mut saved,
            batch: rows,
        };
        layer_norm_forward(n, io);
        let (mut dx, mut dparams, mut dy) =
            (std::vec![0.0; rows * n], std::vec![0.0; 2 * n], dy.to_vec());
        let io = Backward {
            params,
            x,
            y: &y,
            saved: &saved,
            dy: &mut dy,
            dx: crate::layers::Grad::Set(&mut dx),
            frozen: crate::layers::Frozen::NONE,
            dparams: &mut dparams,
            batch: rows,
        };
        layer_norm_backward(n, io);
        let dbeta = dparams.split_off(n);
        [y, saved, dx, dparams, dbeta]
    }

    #[test]
    fn layer_norm_rows_side_by_side_give_the_bits_of_one_row_at_a_time() {
        let (n, rows) = (7, 2 * ROWS + 3);
        let mut rng = crate::rng::Rng::new(crate::rng::Seed(5));
        let mut draw =
            |len: usize| -> Vec<f32> { (0..len).map(|_| rng.uniform(-2.0, 2.0)).collect() };
        let (x, dy, params) = (draw(rows * n), draw(rows * n), draw(2 * n));
        let all = layer_norm_passes(n, &x, &dy, &params);
        let mut alone: [Vec<f32>; 5] = Default::default();
        let mut sums = (std::vec![0.0f32; n], std::vec![0.0f32; n]);
        for r in 0..rows {
            let row = r * n..(r + 1) * n;
            let [y, saved, dx, dgamma, dbeta] =
                layer_norm_passes(n, &x[row.clone()], &dy[row], &params);
            alone[0].extend(y);
            alone[1].extend(saved);
            alone[2].extend(dx);
            for i in 0..n {
                sums.0[i] += dgamma[i];
                sums.1[i] += dbeta[i];
            }
        }
        (alone[3], alone[4]) = sums;
        for (what, (a, b)) in ["y", "saved", "dx", "dgamma", "dbeta"]
            .iter()
            .zip(all.iter().zip(&alone))
        {
            assert_eq!(bits(a), bits(b), "{what}");
        }
    }

    fn batch_norm_train<const C: usize, const S: usize>(batch: usize) {
        let mut rng = crate::rng::Rng::new(crate::rng::Seed(11));
        let x: Vec<f32> = (0..batch * S * C).map(|_| rng.uniform(-1.0, 1.0)).collect();
        let state: Vec<f32> = (0..2 * C).map(|i| 0.5 + 0.01 * i as f32).collect();
        let mut c = Check::new(batch);
        c.x = Some(x.clone());
        c.state = Some(state.clone());
        let out = c.run::<BatchNorm<C, S>>(&|p, x, _| {
            let (mean, var) = stats(x, C);
            normalize(p, x, C, &mean, &var)
        });
        // The running statistics move by 0.1 towards the batch's, with unbiased variance.
        let x: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
        let (mean, var) = stats(&x, C);
        let m = (batch * S) as f64;
        let expected: Vec<f64> = (0..2 * C)
            .map(|i| {
                let (batch_stat, old) = if i < C {
                    (mean[i], state[i])
                } else {
                    (var[i - C] * m / (m - 1.0), state[i])
                };
                0.9 * f64::from(old) + 0.1 * batch_stat
            })
            .collect();
        assert_close("running statistics", &out.state, &expected, 1e-6, 1e-7);
    }

    #[test]
    fn batch_norm_trains_on_batch_statistics() {
        batch_norm_train::<3, 1>(5);
        batch_norm_train::<4, 6>(2);
        batch_norm_train::<70, 2>(3); // more channels than one block
    }

    #[test]
    fn batch_norm_evaluates_with_running_statistics() {
        const C: usize = 5;
        let mut c = Check::new(4);
        c.mode = Mode::Eval;
        let state: Vec<f32> = (0..2 * C)
            .map(|i| {
                if i < C {
                    0.3 * i as f32 - 0.5
                } else {
                    0.2 + 0.4 * i as f32
                }
            })
            .collect();
        c.state = Some(state.clone());
        let out = c.run::<BatchNorm<C, 3>>(&|p, x, _| {
            let s: Vec<f64> = state.iter().map(|&v| f64::from(v)).collect();
            normalize(p, x, C, &s[..C], &s[C..])
        });
        assert_eq!(out.state, state, "Eval leaves the running statistics alone");
    }

    #[test]
    fn state_starts_at_zero_mean_unit_variance() {
        let mut s = [f32::NAN; 6];
        BatchNorm::<3, 4>::init_state(&mut s);
        assert_eq!(s, [0.0, 0.0, 0.0, 1.0, 1.0, 1.0]);
        assert_eq!(BatchNorm::<3, 4>::IN, 12);
        assert_eq!(LayerNorm::<3>::TENSORS[0].name, "gamma");
        type B = BatchNorm<3, 4>;
        let state: usize = B::STATE_TENSORS.iter().map(Tensor::len).sum();
        assert_eq!(state, B::STATE);
        assert_eq!(B::STATE_TENSORS[1].name, "running_var");
        assert_eq!(B::TORCH[0].name, "weight");
        assert_eq!(BatchNorm::<3>::new(), BatchNorm::<3, 1>);
        assert_eq!(LayerNorm::<3>::new(), LayerNorm::<3>);
    }
}
