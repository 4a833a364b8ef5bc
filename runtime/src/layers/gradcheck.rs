//! Test support: checks a layer's forward against a scalar `f64` reference and its backward
//! against central finite differences of that reference.

extern crate std;

use super::{Backward, Ctx, Forward, Frozen, Grad, Layer, Lengths, Mode};
use crate::rng::{Rng, Seed};
use std::vec;
use std::vec::Vec;

/// A scalar reference: `(params, x, batch) -> y`, all in `f64`.
pub(crate) type Reference<'a> = &'a dyn Fn(&[f64], &[f64], usize) -> Vec<f64>;

/// What one checked layer call produced.
pub(crate) struct Outcome {
    /// What forward saved.
    pub saved: Vec<f32>,
    /// The state after forward.
    pub state: Vec<f32>,
}

/// A gradient check of one layer on one batch.
pub(crate) struct Check {
    pub batch: usize,
    pub mode: Mode,
    pub seed: u64,
    /// Inputs; uniform in `[-1, 1)` when `None`.
    pub x: Option<Vec<f32>>,
    /// Parameters; uniform in `[-1, 1)` when `None`.
    pub params: Option<Vec<f32>>,
    /// State before forward; `Layer::init_state` when `None`.
    pub state: Option<Vec<f32>>,
    /// The lengths of the samples (the reference must honour the same); every step real
    /// when `None`.
    pub lengths: Option<Vec<u32>>,
}

/// `|a - b| <= rtol * |b| + atol`, with a message naming `what` and the index.
pub(crate) fn assert_close(what: &str, a: &[f32], b: &[f64], rtol: f64, atol: f64) {
    assert_eq!(a.len(), b.len(), "{what}: lengths differ");
    for (i, (&a, &b)) in a.iter().zip(b).enumerate() {
        let a = f64::from(a);
        assert!(
            (a - b).abs() <= rtol * b.abs() + atol,
            "{what}[{i}]: got {a}, expected {b}"
        );
    }
}

fn widen(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| f64::from(x)).collect()
}

fn uniform(rng: &mut Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.uniform(-1.0, 1.0)).collect()
}

/// `Σ dy_i * f(v)_i`, differentiated numerically with respect to each element of `v`.
fn numeric_grad(v: &[f64], dy: &[f64], f: &dyn Fn(&[f64]) -> Vec<f64>) -> Vec<f64> {
    let mut v = v.to_vec();
    (0..v.len())
        .map(|j| {
            let h = 1e-6 * v[j].abs().max(1.0);
            let orig = v[j];
            v[j] = orig + h;
            let plus: f64 = f(&v).iter().zip(dy).map(|(y, d)| y * d).sum();
            v[j] = orig - h;
            let minus: f64 = f(&v).iter().zip(dy).map(|(y, d)| y * d).sum();
            v[j] = orig;
            (plus - minus) / (2.0 * h)
        })
        .collect()
}

/// `got` against `expected` with a relative tolerance of 1e-3 and an absolute floor of 1e-4
/// times the largest expected magnitude (at least 1).
fn assert_grad(what: &str, got: &[f32], expected: &[f64]) {
    let scale = expected.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    assert_close(what, got, expected, 1e-3, 1e-4 * scale);
}

impl Check {
    /// A check of `batch` samples in training mode with random inputs and parameters.
    pub fn new(batch: usize) -> Self {
        Check {
            batch,
            mode: Mode::Train,
            seed: 1,
            x: None,
            params: None,
            state: None,
            lengths: None,
        }
    }

    /// Runs forward and backward of `L` and compares them with `reference`.
    pub fn run<L: Layer>(self, reference: Reference<'_>) -> Outcome {
        let batch = self.batch;
        let mut rng = Rng::new(Seed(self.seed));
        let params = self.params.unwrap_or_else(|| uniform(&mut rng, L::PARAMS));
        let x = self.x.unwrap_or_else(|| uniform(&mut rng, batch * L::IN));
        assert_eq!(params.len(), L::PARAMS);
        assert_eq!(x.len(), batch * L::IN);
        let state0 = self.state.unwrap_or_else(|| {
            let mut s = vec![f32::NAN; L::STATE];
            L::init_state(&mut s);
            s
        });
        let mut gemm = vec![f32::NAN; L::gemm_len(batch)];
        let mut scratch = vec![f32::NAN; L::scratch_len(batch)];
        let mut step_rng = Rng::new(Seed(self.seed + 1));
        let mode = self.mode;
        let lengths = self.lengths;
        let mut ctx = Ctx {
            gemm: &mut gemm,
            scratch: &mut scratch,
            rng: &mut step_rng,
            first_sample: 0,
            mode,
            lengths: lengths.as_deref().map_or(Lengths::FULL, Lengths::new),
        };

        let mut state = state0.clone();
        let mut y = vec![f32::NAN; batch * L::OUT];
        let mut saved = vec![f32::NAN; batch * L::SAVED];
        let io = Forward {
            params: &params,
            state: &mut state,
            x: &x,
            y: &mut y,
            saved: &mut saved,
            batch,
        };
        L::forward(&mut ctx, io);

        let (p64, x64) = (widen(&params), widen(&x));
        let expected = reference(&p64, &x64, batch);
        assert_close("forward", &y, &expected, 1e-4, 1e-5);

        let dy = uniform(&mut rng, batch * L::OUT);
        let dy64 = widen(&dy);
        ctx.scratch.fill(f32::NAN);
        ctx.gemm.fill(f32::NAN);
        // One backward call from a fresh copy of `dy`.
        let mut masked_backward = |dx: Grad<'_>, frozen: Frozen, dparams: &mut [f32]| {
            let mut dy = dy.clone();
            let io = Backward {
                params: &params,
                x: &x,
                y: &y,
                saved: &saved,
                dy: &mut dy,
                dx,
                frozen,
                dparams,
                batch,
            };
            L::backward(&mut ctx, io);
        };
        let mut dparams = vec![f32::NAN; L::PARAMS];
        let mut dx = vec![f32::NAN; batch * L::IN];
        masked_backward(Grad::Set(&mut dx), Frozen::NONE, &mut dparams);
        let mut backward = |dx: Grad<'_>, dparams: &mut [f32]| {
            masked_backward(dx, Frozen::NONE, dparams);
        };

        let ndp = numeric_grad(&p64, &dy64, &|p| reference(p, &x64, batch));
        let ndx = numeric_grad(&x64, &dy64, &|v| reference(&p64, v, batch));
        assert_grad("dparams", &dparams, &ndp);
        assert_grad("dx", &dx, &ndx);

        // Grad::Add adds the same values; Grad::Skip leaves the parameter gradient as it is.
        let base = uniform(&mut rng, batch * L::IN);
        let mut acc = base.clone();
        let mut dparams2 = vec![f32::NAN; L::PARAMS];
        backward(Grad::Add(&mut acc), &mut dparams2);
        let sum: Vec<f64> = base
            .iter()
            .zip(&dx)
            .map(|(b, d)| f64::from(b + d))
            .collect();
        assert_close("dx (Grad::Add)", &acc, &sum, 1e-6, 1e-6);
        assert_eq!(
            bits(&dparams),
            bits(&dparams2),
            "dparams must repeat bit for bit"
        );
        backward(Grad::Skip, &mut dparams2);
        assert_eq!(
            bits(&dparams),
            bits(&dparams2),
            "Grad::Skip changes dparams"
        );
        let unmasked = Unmasked {
            dparams: &dparams,
            dx: &dx,
            base: &base,
            added: &acc,
        };
        if L::FREEZABLE {
            check_masks::<L>(&mut masked_backward, unmasked, &mut rng);
        } else {
            assert!(
                L::TENSORS.is_empty(),
                "a layer with tensors honours the frozen mask (Layer::FREEZABLE)"
            );
        }
        Outcome { saved, state }
    }
}

/// A layer's backward call with a given output gradient `dx` and mask, writing `dparams`.
type MaskedBackward<'a> = dyn FnMut(Grad<'_>, Frozen, &mut [f32]) + 'a;

/// What backward wrote with no tensor frozen, to compare masked calls with.
struct Unmasked<'a> {
    /// d loss / d params.
    dparams: &'a [f32],
    /// d loss / d x ([`Grad::Set`]).
    dx: &'a [f32],
    /// What [`Grad::Add`] added to...
    added: &'a [f32],
    /// ... giving this.
    base: &'a [f32],
}

/// Masks with up to this many tensors are tried in every subset.
const EVERY_SUBSET_UP_TO: usize = 5;

/// The masks tried on a layer of `n` tensors: every subset of a few; of more, none, each
/// tensor alone, all but each one, every prefix (a frozen bottom, as a stacked layer's lower
/// layers) and a few drawn at random.
fn masks(n: usize, rng: &mut Rng) -> Vec<Frozen> {
    if n <= EVERY_SUBSET_UP_TO {
        return (0..1u64 << n).map(Frozen).collect();
    }
    let all = Frozen::all(n).0;
    let mut masks: Vec<Frozen> = (0..n)
        .flat_map(|i| [Frozen(1 << i), Frozen(all & !(1 << i))])
        .chain((0..=n).map(Frozen::all))
        .collect();
    masks.extend((0..6).map(|_| Frozen(rng.next_u64() & all)));
    masks
}

/// For each mask of [`masks`], backward with [`Grad::Set`], [`Grad::Add`] and [`Grad::Skip`]
/// into `dparams` of exactly the trainable tensors' length, cut from a buffer of NaN sentinels:
/// each trainable tensor's gradient and `dx` bit for bit as without a mask, and no sentinel
/// written.
fn check_masks<L: Layer>(backward: &mut MaskedBackward<'_>, unmasked: Unmasked<'_>, rng: &mut Rng) {
    const PAD: usize = 5;
    let sentinel = f32::from_bits(0x7fc0_beef);
    for frozen in masks(L::TENSORS.len(), rng) {
        let len = frozen.trainable_len(L::TENSORS);
        let mut expected = Vec::with_capacity(len);
        let mut at = 0;
        for (i, t) in L::TENSORS.iter().enumerate() {
            if !frozen.is_frozen(i) {
                expected.extend_from_slice(&unmasked.dparams[at..at + t.len()]);
            }
            at += t.len();
        }
        let mut dx = vec![f32::NAN; unmasked.dx.len()];
        let mut added = unmasked.base.to_vec();
        let calls: [(&str, Grad<'_>); 3] = [
            ("Set", Grad::Set(&mut dx)),
            ("Add", Grad::Add(&mut added)),
            ("Skip", Grad::Skip),
        ];
        for (kind, grad) in calls {
            let mut buffer = vec![sentinel; len + 2 * PAD];
            backward(grad, frozen, &mut buffer[PAD..PAD + len]);
            let what = std::format!("{frozen:?}, Grad::{kind}");
            assert_eq!(
                bits(&buffer[PAD..PAD + len]),
                bits(&expected),
                "{what}: trainable gradients"
            );
            let outside = buffer[..PAD].iter().chain(&buffer[PAD + len..]);
            assert!(
                outside
                    .into_iter()
                    .all(|v| v.to_bits() == sentinel.to_bits()),
                "{what}: written outside dparams"
            );
        }
        assert_eq!(bits(&dx), bits(unmasked.dx), "{frozen:?}: dx (Grad::Set)");
        assert_eq!(
            bits(&added),
            bits(unmasked.added),
            "{frozen:?}: dx (Grad::Add)"
        );
    }
}

/// What one forward and backward call of a layer wrote.
pub(crate) struct Passes {
    /// The output.
    pub y: Vec<f32>,
    /// The state after forward.
    pub state: Vec<f32>,
    /// d loss / d x.
    pub dx: Vec<f32>,
    /// d loss / d params.
    pub dparams: Vec<f32>,
}

impl Passes {
    /// The four buffers with their names, to compare two runs buffer by buffer.
    pub fn named(&self) -> [(&'static str, &[f32]); 4] {
        [
            ("y", &self.y),
            ("state", &self.state),
            ("dx", &self.dx),
            ("dparams", &self.dparams),
        ]
    }
}

/// Forward (in `mode`, from `state`) and backward (from the output gradient `dy`) of `L` on
/// `batch` samples of `x`, whose first has global index `first_sample`.
pub(crate) fn forward_backward<L: Layer>(
    mode: Mode,
    first_sample: usize,
    params: &[f32],
    state: &[f32],
    x: &[f32],
    dy: &[f32],
    batch: usize,
) -> Passes {
    let x = (x, Lengths::FULL);
    forward_backward_padded::<L>(mode, first_sample, params, state, x, dy, batch)
}

/// [`forward_backward`] of `x` padded to the `lengths` it comes with.
pub(crate) fn forward_backward_padded<L: Layer>(
    mode: Mode,
    first_sample: usize,
    params: &[f32],
    state: &[f32],
    (x, lengths): (&[f32], Lengths<'_>),
    dy: &[f32],
    batch: usize,
) -> Passes {
    let mut gemm = vec![0.0; L::gemm_len(batch)];
    let mut scratch = vec![0.0; L::scratch_len(batch)];
    let mut rng = Rng::new(Seed(4));
    let mut ctx = Ctx {
        gemm: &mut gemm,
        scratch: &mut scratch,
        rng: &mut rng,
        first_sample,
        mode,
        lengths,
    };
    let (mut y, mut state) = (vec![0.0; L::OUT * batch], state.to_vec());
    let mut saved = vec![0.0; L::SAVED * batch];
    let io = Forward {
        params,
        state: &mut state,
        x,
        y: &mut y,
        saved: &mut saved,
        batch,
    };
    L::forward(&mut ctx, io);
    let (mut dy, mut dx) = (dy.to_vec(), vec![0.0; x.len()]);
    let mut dparams = vec![0.0; L::PARAMS];
    let io = Backward {
        params,
        x,
        y: &y,
        saved: &saved,
        dy: &mut dy,
        dx: Grad::Set(&mut dx),
        frozen: crate::layers::Frozen::NONE,
        dparams: &mut dparams,
        batch,
    };
    L::backward(&mut ctx, io);
    Passes {
        y,
        state,
        dx,
        dparams,
    }
}

/// Asserts that `a` and `b` wrote the same bits into every buffer.
pub(crate) fn assert_same_bits(a: &Passes, b: &Passes) {
    for ((what, a), (_, b)) in a.named().into_iter().zip(b.named()) {
        assert_eq!(bits(a), bits(b), "{what} differs");
    }
}

/// The bit patterns of `v`, to compare results exactly (NaN included).
pub(crate) fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}
