//! The passes of a layer with learnable per-feature parameters, what `activation!` generates
//! for a definition with `[name = value, ..]`: one lane of features at a time, each with the
//! same features of every parameter.

use super::{Backward, Forward};
use crate::lane::{pieces, Lane};
use wide::f32x8;

/// The forward pass of a layer with `K` learnable per-feature parameters (what `activation!`
/// generates for a definition with `[name = value, ..]`): `y = f(x, p)` for each sample of `n`
/// features, where `io.params` holds the `K` parameters one `[n]` tensor after the other.
/// `io.state`, `io.saved` and `io.batch` are not read (the rows are those of `io.x`).
///
/// `f` gets eight features of one sample and the same eight features of each parameter; the
/// last, shorter piece of a sample is padded with zeros into a full lane.
///
/// ```
/// use fusegraph_runtime::f32x8;
/// use fusegraph_runtime::__private_0_1::layers::{per_feature_forward, Forward};
/// // y = a * x, with a per-feature scale `a`.
/// let mut y = [0.0; 4];
/// let (params, x) = ([2.0, 3.0], [1.0, 1.0, 5.0, 5.0]);
/// let io = Forward { params: &params, state: &mut [], x: &x, y: &mut y, saved: &mut [], batch: 2 };
/// per_feature_forward(io, 2, |x, [a]: [f32x8; 1]| a * x);
/// assert_eq!(y, [2.0, 3.0, 10.0, 15.0]);
/// ```
///
/// # Panics
/// If `io.params` is not `K * n` values, or `io.x` and `io.y` differ in length or are not rows
/// of `n`.
#[inline(always)]
pub fn per_feature_forward<const K: usize>(
    io: Forward<'_>,
    n: usize,
    f: impl Fn(f32x8, [f32x8; K]) -> f32x8,
) {
    let Forward { params, x, y, .. } = io;
    check_rows(params, K, x, y, n);
    if n == 0 {
        return;
    }
    for (xr, yr) in x.chunks_exact(n).zip(y.chunks_exact_mut(n)) {
        for (i, k) in pieces::<f32x8>(n) {
            let p = core::array::from_fn(|j| f32x8::load_padded(&params[j * n + i..j * n + i + k]));
            f(f32x8::load_padded(&xr[i..i + k]), p).store_partial(&mut yr[i..i + k]);
        }
    }
}

/// The backward pass matching [`per_feature_forward`]: given `io.dy`, `dx = dy ∂f/∂x`
/// (computed in `io.dy`, then given to `io.dx`) and `dparams[j]`, the `j`-th `[n]` tensor of
/// `io.dparams`, `Σ_samples dy ∂f/∂p_j` (overwriting it). `io.saved` and `io.batch` are not
/// read.
///
/// `f` gets eight features of `x`, of `y = f(x, p)` and of each parameter, and returns
/// `∂f/∂x` and each `∂f/∂p_j` there. The sums run sample after sample in batch order, one lane
/// at a time: the same bits whatever the number of threads.
///
/// ```
/// use fusegraph_runtime::f32x8;
/// use fusegraph_runtime::__private_0_1::layers::{per_feature_backward, Backward};
/// use fusegraph_runtime::layers::Grad;
/// // y = a * x: dy/dx = a, dy/da = x.
/// let (x, y) = ([1.0, 1.0, 5.0, 5.0], [2.0, 3.0, 10.0, 15.0]);
/// let mut dy = [1.0; 4];
/// let (mut dx, mut da) = ([0.0; 4], [0.0; 2]);
/// let io = Backward {
///     params: &[2.0, 3.0],
///     x: &x,
///     y: &y,
///     saved: &[],
///     dy: &mut dy,
///     dx: Grad::Set(&mut dx),
///     dparams: &mut da,
///     batch: 2,
/// };
/// per_feature_backward(io, 2, |x, _y, [a]: [f32x8; 1]| (a, [x]));
/// assert_eq!((dx, da), ([2.0, 3.0, 2.0, 3.0], [6.0, 6.0]));
/// ```
///
/// # Panics
/// If `io.params` or `io.dparams` is not `K * n` values, or `io.x`, `io.y` and `io.dy` differ
/// in length or are not rows of `n`.
#[inline(always)]
pub fn per_feature_backward<const K: usize>(
    io: Backward<'_>,
    n: usize,
    f: impl Fn(f32x8, f32x8, [f32x8; K]) -> (f32x8, [f32x8; K]),
) {
    let Backward {
        params,
        x,
        y,
        dy,
        dx,
        dparams,
        ..
    } = io;
    check_rows(params, K, x, y, n);
    assert_eq!(
        dy.len(),
        y.len(),
        "per-feature layer: dy and y lengths differ"
    );
    assert_eq!(
        dparams.len(),
        params.len(),
        "per-feature layer: dparams and params lengths differ"
    );
    dparams.fill(0.0);
    if n == 0 {
        return;
    }
    let rows = x.chunks_exact(n).zip(y.chunks_exact(n));
    for ((xr, yr), dr) in rows.zip(dy.chunks_exact_mut(n)) {
        for (i, k) in pieces::<f32x8>(n) {
            let p = core::array::from_fn(|j| f32x8::load_padded(&params[j * n + i..j * n + i + k]));
            let (gx, gp) = f(
                f32x8::load_padded(&xr[i..i + k]),
                f32x8::load_padded(&yr[i..i + k]),
                p,
            );
            let d = f32x8::load_padded(&dr[i..i + k]);
            for (j, g) in gp.into_iter().enumerate() {
                let acc = &mut dparams[j * n + i..j * n + i + k];
                (f32x8::load_padded(acc) + d * g).store_partial(acc);
            }
            (d * gx).store_partial(&mut dr[i..i + k]);
        }
    }
    dx.give(dy);
}

fn check_rows(params: &[f32], k: usize, x: &[f32], y: &[f32], n: usize) {
    assert_eq!(
        x.len(),
        y.len(),
        "per-feature layer: x and y lengths differ"
    );
    assert!(
        x.is_empty() || n > 0 && x.len().is_multiple_of(n),
        "per-feature layer: {} values are not rows of {n}",
        x.len()
    );
    assert_eq!(
        params.len(),
        k * n,
        "per-feature layer: {k} parameter tensors of {n} values",
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::Grad;

    /// The buffers of a per-feature forward call.
    fn forward_io<'a>(params: &'a [f32], x: &'a [f32], y: &'a mut [f32]) -> Forward<'a> {
        Forward {
            params,
            state: &mut [],
            x,
            y,
            saved: &mut [],
            batch: 0,
        }
    }

    /// The buffers of a per-feature backward call.
    fn backward_io<'a>(
        (params, x, y): (&'a [f32], &'a [f32], &'a [f32]),
        dy: &'a mut [f32],
        dx: Grad<'a>,
        dparams: &'a mut [f32],
    ) -> Backward<'a> {
        Backward {
            params,
            x,
            y,
            saved: &[],
            dy,
            dx,
            dparams,
            batch: 0,
        }
    }

    /// `y = a x + b` per feature over rows of 11 (a tail of 3), against scalar code.
    #[test]
    fn per_feature_passes_match_scalar_code() {
        extern crate std;
        use std::vec::Vec;
        const N: usize = 11;
        let params: Vec<f32> = (0..2 * N).map(|i| 0.5 + i as f32 * 0.25).collect();
        let x: Vec<f32> = (0..3 * N).map(|i| i as f32 - 15.0).collect();
        let mut y = [0.0; 3 * N];
        let io = forward_io(&params, &x, &mut y);
        per_feature_forward(io, N, |x, [a, b]: [f32x8; 2]| a * x + b);
        for (i, v) in y.iter().enumerate() {
            assert_eq!(*v, params[i % N] * x[i] + params[N + i % N]);
        }
        let mut dy: Vec<f32> = (0..3 * N).map(|i| 1.0 + i as f32).collect();
        let want_da: Vec<f32> = (0..N)
            .map(|j| (0..3).fold(0.0, |s, r| s + dy[r * N + j] * x[r * N + j]))
            .collect();
        let want_dx: Vec<f32> = (0..3 * N).map(|i| dy[i] * params[i % N]).collect();
        let want_db: Vec<f32> = (0..N)
            .map(|j| (0..3).fold(0.0, |s, r| s + dy[r * N + j]))
            .collect();
        let mut dp = [f32::NAN; 2 * N];
        let mut dx = [0.0; 3 * N];
        let f = |x, _y, [a, _b]: [f32x8; 2]| (a, [x, f32x8::ONE]);
        let io = backward_io((&params, &x, &y), &mut dy, Grad::Set(&mut dx), &mut dp);
        per_feature_backward(io, N, f);
        assert_eq!(dx[..], want_dx[..]);
        assert_eq!(dp[..N], want_da[..]);
        assert_eq!(dp[N..], want_db[..]);
    }

    /// Tails of every kind (N = 1, 7, 8, 9, 17), two samples: `dparams` is overwritten (it
    /// starts as NaN), `Grad::Add` adds `dx` to what is there, `Grad::Skip` still gives the
    /// parameter gradients, and nothing past the slices is written.
    #[test]
    fn per_feature_tails_add_and_reset() {
        extern crate std;
        use std::vec;
        use std::vec::Vec;
        for n in [1usize, 7, 8, 9, 17] {
            let params: Vec<f32> = (0..n).map(|i| 0.5 + i as f32 * 0.125).collect();
            let x: Vec<f32> = (0..2 * n).map(|i| i as f32 * 0.5 - 3.0).collect();
            let mut y = vec![f32::NAN; 2 * n];
            // y = a x²; dy/dx = 2 a x, dy/da = x².
            let io = forward_io(&params, &x, &mut y);
            per_feature_forward(io, n, |x, [a]: [f32x8; 1]| a * x * x);
            for i in 0..2 * n {
                assert_eq!(y[i], params[i % n] * x[i] * x[i], "{n} [{i}]");
            }
            let f = |x: f32x8, _y, [a]: [f32x8; 1]| (f32x8::splat(2.0) * a * x, [x * x]);
            let dy0: Vec<f32> = (0..2 * n).map(|i| 1.0 - i as f32 * 0.25).collect();
            let want_da: Vec<f32> = (0..n)
                .map(|j| 0.0 + dy0[j] * (x[j] * x[j]) + dy0[n + j] * (x[n + j] * x[n + j]))
                .collect();
            let want_dx: Vec<f32> = (0..2 * n)
                .map(|i| dy0[i] * (2.0 * params[i % n] * x[i]))
                .collect();
            let mut dx = vec![1.0; 2 * n + 1];
            let mut da = vec![f32::NAN; n + 1];
            let mut dy = dy0.clone();
            let g = Grad::Add(&mut dx[..2 * n]);
            let io = backward_io((&params, &x, &y), &mut dy, g, &mut da[..n]);
            per_feature_backward(io, n, f);
            assert_eq!(da[..n], want_da[..], "{n}");
            assert!(da[n].is_nan(), "{n}: nothing past dparams");
            for i in 0..2 * n {
                assert_eq!(dx[i], 1.0 + want_dx[i], "{n} [{i}]");
            }
            assert_eq!(dx[2 * n], 1.0);
            // Again, skipping dx: the same parameter gradients, not twice them.
            let mut dy = dy0.clone();
            let io = backward_io((&params, &x, &y), &mut dy, Grad::Skip, &mut da[..n]);
            per_feature_backward(io, n, f);
            assert_eq!(da[..n], want_da[..], "{n}: dparams reset");
        }
    }
}
