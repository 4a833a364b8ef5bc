//! The passes of a layer with learnable per-feature parameters, what `activation!` generates
//! for a definition with `[name = value, ..]`: one lane of features at a time, each with the
//! same features of every parameter.

use super::{Backward, Forward};
use crate::lane::{self, pieces, Lane, OnLanes};
use core::marker::PhantomData;

/// The lane functions of a layer with `K` learnable per-feature parameters, over any [`Lane`]
/// type: what `activation!` generates for a definition with `[name = value, ..]`, which
/// [`per_feature_forward`] and [`per_feature_backward`] run on the lanes [`lane::dispatch`]
/// picks.
pub trait PerFeature<const K: usize> {
    /// `f(x, p)`, for lanes of features of `x` and the same features of each parameter.
    fn lane<L: Lane>(x: L, p: [L; K]) -> L;
    /// `∂f/∂x` and each `∂f/∂p_j`, for lanes of `x`, of `y = f(x, p)` and of each parameter.
    fn lane_grads<L: Lane>(x: L, y: L, p: [L; K]) -> (L, [L; K]);
}

/// The forward pass of a layer with `K` learnable per-feature parameters (what `activation!`
/// generates for a definition with `[name = value, ..]`): `y = F::lane(x, p)` for each
/// sample of `n` features, where `io.params` holds the `K` parameters one `[n]` tensor after
/// the other. `io.state`, `io.saved` and `io.batch` are not read (the rows are those of
/// `io.x`).
///
/// `F` gets a lane of features of one sample and the same features of each parameter, on the
/// lanes [`lane::dispatch`] picks; the last, shorter piece of a sample is padded with zeros
/// into a full lane.
///
/// ```
/// use fusegraph_runtime::__private_0_1::layers::{per_feature_forward, Forward, PerFeature};
/// use fusegraph_runtime::lane::Lane;
/// // y = a * x, with a per-feature scale `a`.
/// struct Scale;
/// impl PerFeature<1> for Scale {
///     fn lane<L: Lane>(x: L, [a]: [L; 1]) -> L {
///         a * x
///     }
///     fn lane_grads<L: Lane>(x: L, _y: L, [a]: [L; 1]) -> (L, [L; 1]) {
///         (a, [x])
///     }
/// }
/// let mut y = [0.0; 4];
/// let (params, x) = ([2.0, 3.0], [1.0, 1.0, 5.0, 5.0]);
/// let io = Forward { params: &params, state: &mut [], x: &x, y: &mut y, saved: &mut [], batch: 2 };
/// per_feature_forward::<Scale, 1>(io, 2);
/// assert_eq!(y, [2.0, 3.0, 10.0, 15.0]);
/// ```
///
/// # Panics
/// If `io.params` is not `K * n` values, or `io.x` and `io.y` differ in length or are not rows
/// of `n`.
#[inline(always)]
pub fn per_feature_forward<F: PerFeature<K>, const K: usize>(io: Forward<'_>, n: usize) {
    let Forward { params, x, y, .. } = io;
    check_rows(params, K, x, y, n);
    if n > 0 && !y.is_empty() {
        lane::dispatch_for(
            y.len(),
            ForwardPass::<F, K> {
                params,
                x,
                y,
                n,
                f: PhantomData,
            },
        );
    }
}

/// The lanes of features `i..i + k` of each of the `K` parameter tensors of `n` values.
#[inline(always)]
fn parameter_lanes<L: Lane, const K: usize>(
    params: &[f32],
    n: usize,
    i: usize,
    k: usize,
) -> [L; K] {
    core::array::from_fn(|j| L::load_padded(&params[j * n + i..j * n + i + k]))
}

/// [`per_feature_forward`], on any lane type.
struct ForwardPass<'a, F, const K: usize> {
    params: &'a [f32],
    x: &'a [f32],
    y: &'a mut [f32],
    n: usize,
    f: PhantomData<F>,
}

impl<F: PerFeature<K>, const K: usize> OnLanes for ForwardPass<'_, F, K> {
    type Output = ();
    #[inline(always)]
    fn run<L: Lane>(self) {
        let (params, n) = (self.params, self.n);
        for (xr, yr) in self.x.chunks_exact(n).zip(self.y.chunks_exact_mut(n)) {
            for (i, k) in pieces::<L>(n) {
                let p = parameter_lanes(params, n, i, k);
                F::lane(L::load_padded(&xr[i..i + k]), p).store_partial(&mut yr[i..i + k]);
            }
        }
    }
}

/// The backward pass matching [`per_feature_forward`]: given `io.dy`, `dx = dy ∂f/∂x`
/// (computed in `io.dy`, then given to `io.dx`) and `dparams[j]`, the `j`-th `[n]` tensor of
/// `io.dparams`, `Σ_samples dy ∂f/∂p_j` (overwriting it). A parameter `io.frozen` names gets
/// no sum, and `io.dparams` holds the others' only. `io.saved` and `io.batch` are not read.
///
/// `F::lane_grads` gets a lane of features of `x`, of `y = f(x, p)` and of each parameter, and
/// returns `∂f/∂x` and each `∂f/∂p_j` there. The sums run sample after sample in batch order,
/// one lane at a time: the same bits whatever the number of threads and the lane type.
///
/// ```
/// use fusegraph_runtime::__private_0_1::layers::{per_feature_backward, Backward, PerFeature};
/// use fusegraph_runtime::lane::Lane;
/// use fusegraph_runtime::layers::{Frozen, Grad};
/// // y = a * x: dy/dx = a, dy/da = x.
/// struct Scale;
/// impl PerFeature<1> for Scale {
///     fn lane<L: Lane>(x: L, [a]: [L; 1]) -> L {
///         a * x
///     }
///     fn lane_grads<L: Lane>(x: L, _y: L, [a]: [L; 1]) -> (L, [L; 1]) {
///         (a, [x])
///     }
/// }
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
///     frozen: Frozen::NONE,
///     dparams: &mut da,
///     batch: 2,
/// };
/// per_feature_backward::<Scale, 1>(io, 2);
/// assert_eq!((dx, da), ([2.0, 3.0, 2.0, 3.0], [6.0, 6.0]));
/// ```
///
/// # Panics
/// If `io.params` is not `K * n` values, `io.dparams` not `n` for each parameter not frozen,
/// or `io.x`, `io.y` and `io.dy` differ in length or are not rows of `n`.
#[inline(always)]
pub fn per_feature_backward<F: PerFeature<K>, const K: usize>(io: Backward<'_>, n: usize) {
    let Backward {
        params,
        x,
        y,
        dy,
        dx,
        frozen,
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
        frozen.trainable_values(&[n; K]),
        "per-feature layer: dparams and the trainable parameters' lengths differ"
    );
    // Where each parameter's gradient starts in `dparams`; `None` when frozen.
    let mut packed = 0;
    let slots = core::array::from_fn(|j| {
        (!frozen.is_frozen(j)).then(|| {
            packed += n;
            packed - n
        })
    });
    dparams.fill(0.0);
    if n == 0 {
        return;
    }
    if !dy.is_empty() {
        lane::dispatch_for(
            dy.len(),
            BackwardPass::<F, K> {
                params,
                x,
                y,
                dy: &mut *dy,
                dparams,
                slots,
                n,
                f: PhantomData,
            },
        );
    }
    dx.give(dy);
}

/// [`per_feature_backward`] before `dx` is given, on any lane type.
struct BackwardPass<'a, F, const K: usize> {
    params: &'a [f32],
    x: &'a [f32],
    y: &'a [f32],
    dy: &'a mut [f32],
    dparams: &'a mut [f32],
    /// Where each parameter's gradient starts in `dparams`; `None` when frozen.
    slots: [Option<usize>; K],
    n: usize,
    f: PhantomData<F>,
}

impl<F: PerFeature<K>, const K: usize> OnLanes for BackwardPass<'_, F, K> {
    type Output = ();
    #[inline(always)]
    fn run<L: Lane>(self) {
        let (params, n, dparams) = (self.params, self.n, self.dparams);
        let rows = self.x.chunks_exact(n).zip(self.y.chunks_exact(n));
        for ((xr, yr), dr) in rows.zip(self.dy.chunks_exact_mut(n)) {
            for (i, k) in pieces::<L>(n) {
                let p = parameter_lanes(params, n, i, k);
                let (gx, gp) = F::lane_grads(
                    L::load_padded(&xr[i..i + k]),
                    L::load_padded(&yr[i..i + k]),
                    p,
                );
                let d = L::load_padded(&dr[i..i + k]);
                for (slot, g) in self.slots.into_iter().zip(gp) {
                    if let Some(at) = slot {
                        let acc = &mut dparams[at + i..at + i + k];
                        (L::load_padded(acc) + d * g).store_partial(acc);
                    }
                }
                (d * gx).store_partial(&mut dr[i..i + k]);
            }
        }
    }
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
    use crate::lane::Tested;
    use crate::layers::gradcheck::Check;
    use crate::layers::{Ctx, Frozen, Grad, Init, Layer, Tensor};

    /// `y = a x + b`.
    struct Affine;
    impl PerFeature<2> for Affine {
        fn lane<L: Lane>(x: L, [a, b]: [L; 2]) -> L {
            a * x + b
        }
        fn lane_grads<L: Lane>(x: L, _y: L, [a, _b]: [L; 2]) -> (L, [L; 2]) {
            (a, [x, L::ONE])
        }
    }

    /// `y = a x²`: `dy/dx = 2 a x`, `dy/da = x²`.
    struct ScaledSquare;
    impl PerFeature<1> for ScaledSquare {
        fn lane<L: Lane>(x: L, [a]: [L; 1]) -> L {
            a * x * x
        }
        fn lane_grads<L: Lane>(x: L, _y: L, [a]: [L; 1]) -> (L, [L; 1]) {
            (L::splat(2.0) * a * x, [x * x])
        }
    }

    /// [`Affine`] as a layer of `N` features, as `activation!` would generate it, so that the
    /// shared gradient check runs it with every mask of its two tensors.
    struct AffineLayer<const N: usize>;

    impl<const N: usize> Layer for AffineLayer<N> {
        fn describe(out: &mut dyn core::fmt::Write) -> core::fmt::Result {
            out.write_str("AffineLayer")
        }
        const IN: usize = N;
        const OUT: usize = N;
        const PARAMS: usize = 2 * N;
        const STATE: usize = 0;
        const SAVED: usize = 0;
        const TENSORS: &'static [Tensor] = &[
            Tensor {
                name: "a",
                shape: &[N],
                fans: (N, N),
                init: Init::Ones,
            },
            Tensor {
                name: "b",
                shape: &[N],
                fans: (N, N),
                init: Init::Zeros,
            },
        ];
        const FREEZABLE: bool = true;
        fn forward(_: &mut Ctx<'_>, io: Forward<'_>) {
            per_feature_forward::<Affine, 2>(io, N);
        }
        fn backward(_: &mut Ctx<'_>, io: Backward<'_>) {
            per_feature_backward::<Affine, 2>(io, N);
        }
    }

    /// `a x + b` against finite differences, and with `a`, `b` or both frozen the other's
    /// gradient and `dx` bit for bit as without.
    #[test]
    fn affine_layer_matches_finite_differences_under_every_mask() {
        extern crate std;
        fn check<const N: usize>(batch: usize) {
            Check::new(batch).run::<AffineLayer<N>>(&|p, x, _| {
                let at = |i: usize| p[i % N] * x[i] + p[N + i % N];
                (0..x.len()).map(at).collect()
            });
        }
        check::<11>(3);
        check::<8>(2);
        check::<1>(1);
    }

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
            frozen: Frozen::NONE,
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
        per_feature_forward::<Affine, 2>(io, N);
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
        let io = backward_io((&params, &x, &y), &mut dy, Grad::Set(&mut dx), &mut dp);
        per_feature_backward::<Affine, 2>(io, N);
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
            per_feature_forward::<ScaledSquare, 1>(io, n);
            for i in 0..2 * n {
                assert_eq!(y[i], params[i % n] * x[i] * x[i], "{n} [{i}]");
            }
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
            per_feature_backward::<ScaledSquare, 1>(io, n);
            assert_eq!(da[..n], want_da[..], "{n}");
            assert!(da[n].is_nan(), "{n}: nothing past dparams");
            for i in 0..2 * n {
                assert_eq!(dx[i], 1.0 + want_dx[i], "{n} [{i}]");
            }
            assert_eq!(dx[2 * n], 1.0);
            // Again, skipping dx: the same parameter gradients, not twice them.
            let mut dy = dy0.clone();
            let io = backward_io((&params, &x, &y), &mut dy, Grad::Skip, &mut da[..n]);
            per_feature_backward::<ScaledSquare, 1>(io, n);
            assert_eq!(da[..n], want_da[..], "{n}: dparams reset");
        }
    }

    /// Both passes give the bits of the one-lane reference on every lane type.
    #[test]
    fn per_feature_passes_give_the_same_bits_on_every_lane_type() {
        extern crate std;
        use std::vec::Vec;
        let n = 37;
        let value = |i: usize| ((i * 29 % 43) as f32 - 21.0) * 0.137 + (i % 5) as f32 * 1e-4;
        let params: Vec<f32> = (0..2 * n).map(|i| value(i + 3)).collect();
        let x: Vec<f32> = (0..3 * n).map(value).collect();
        let run = |lanes: Tested| {
            let mut y = std::vec![0.0; x.len()];
            lanes.run(ForwardPass::<Affine, 2> {
                params: &params,
                x: &x,
                y: &mut y,
                n,
                f: PhantomData,
            });
            let mut dy: Vec<f32> = (0..x.len()).map(|i| value(i + 11)).collect();
            let mut dp = std::vec![0.0; params.len()];
            lanes.run(BackwardPass::<Affine, 2> {
                params: &params,
                x: &x,
                y: &y,
                dy: &mut dy,
                dparams: &mut dp,
                slots: [Some(0), Some(n)],
                n,
                f: PhantomData,
            });
            [y, dy, dp].map(|v| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>())
        };
        let want = run(Tested::One);
        for lanes in Tested::every() {
            assert!(run(lanes) == want, "{lanes:?}");
        }
    }
}
