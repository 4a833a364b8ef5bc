//! The recurrent layers against a scalar `f64` reference written from PyTorch's formulas (with
//! lengths: each sample's valid prefix alone, as `pack_padded_sequence`; both directions: the
//! reverse one a forward run over the reversed prefix), and their backward pass against
//! central finite differences of it, with respect to the inputs and every parameter.

extern crate std;
use super::*;
use crate::layers::gradcheck::{assert_same_bits, bits, forward_backward_padded, Check, Passes};
use crate::layers::{Init, Layer, Mode, Tensor};
use crate::rng::{Rng, Seed};
use std::vec::Vec;

fn sigmoid(v: f64) -> f64 {
    1.0 / (1.0 + (-v).exp())
}

/// `W·v + b` for a row-major `W` of `b.len()` rows.
fn affine(w: &[f64], v: &[f64], b: &[f64]) -> Vec<f64> {
    b.iter()
        .enumerate()
        .map(|(r, &bias)| {
            bias + w[r * v.len()..(r + 1) * v.len()]
                .iter()
                .zip(v)
                .map(|(a, b)| a * b)
                .sum::<f64>()
        })
        .collect()
}

/// One layer's parameters, in `f64`.
struct Layer64<'a> {
    ih: &'a [f64],
    hh: &'a [f64],
    b_ih: &'a [f64],
    b_hh: &'a [f64],
}

/// One GRU step: `r, z, n` as PyTorch defines them.
fn gru_step(w: &Layer64<'_>, x: &[f64], h: &[f64]) -> Vec<f64> {
    let n = h.len();
    let gi = affine(w.ih, x, w.b_ih);
    let gh = affine(w.hh, h, w.b_hh);
    (0..n)
        .map(|j| {
            let r = sigmoid(gi[j] + gh[j]);
            let z = sigmoid(gi[n + j] + gh[n + j]);
            let cand = (gi[2 * n + j] + r * gh[2 * n + j]).tanh();
            (1.0 - z) * cand + z * h[j]
        })
        .collect()
}

/// One LSTM step, gates `i, f, g, o`: the new `(h, c)`.
fn lstm_step(w: &Layer64<'_>, x: &[f64], h: &[f64], c: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let n = h.len();
    let gi = affine(w.ih, x, w.b_ih);
    let gh = affine(w.hh, h, w.b_hh);
    let pre = |k: usize, j: usize| gi[k * n + j] + gh[k * n + j];
    let c: Vec<f64> = (0..n)
        .map(|j| sigmoid(pre(1, j)) * c[j] + sigmoid(pre(0, j)) * pre(2, j).tanh())
        .collect();
    let h = (0..n).map(|j| sigmoid(pre(3, j)) * c[j].tanh()).collect();
    (h, c)
}

/// The hidden states of one layer over a sequence of `[T, in]`.
fn layer_sequence(cell: CellKind, w: &Layer64<'_>, xs: &[Vec<f64>], n: usize) -> Vec<Vec<f64>> {
    let (mut h, mut c) = (std::vec![0.0; n], std::vec![0.0; n]);
    xs.iter()
        .map(|x| {
            match cell {
                CellKind::Gru => h = gru_step(w, x, &h),
                CellKind::Lstm => (h, c) = lstm_step(w, x, &h, &c),
            }
            h.clone()
        })
        .collect()
}

/// Direction `d` of one layer's hidden states over the valid steps `xs`: forward, or read
/// from the last step to the first and stored back at each step's position.
fn direction_sequence(
    cell: CellKind,
    w: &Layer64<'_>,
    xs: &[Vec<f64>],
    n: usize,
    d: usize,
) -> Vec<Vec<f64>> {
    if d == 0 {
        return layer_sequence(cell, w, xs, n);
    }
    let reversed: Vec<Vec<f64>> = xs.iter().rev().cloned().collect();
    let mut states = layer_sequence(cell, w, &reversed, n);
    states.reverse();
    states
}

/// The stack's output for `batch` samples of `lengths` (every step when `None`), written from
/// the formulas alone: each sample's valid steps run through every layer and direction, the
/// output 0 at padded steps, the last state the forward direction's at the last valid step
/// and the reverse direction's at step 0.
fn reference(
    dims: RnnDims,
    lengths: Option<&[u32]>,
    p: &[f64],
    x: &[f64],
    batch: usize,
) -> Vec<f64> {
    let (t, n, g) = (dims.steps, dims.hidden, dims.gate_rows());
    let mut out = Vec::new();
    for (b, sample) in x.chunks(t * dims.inputs).take(batch).enumerate() {
        let len = lengths.map_or(t, |l| l[b] as usize);
        let mut seq: Vec<Vec<f64>> = sample
            .chunks(dims.inputs)
            .take(len)
            .map(<[f64]>::to_vec)
            .collect();
        let mut rest = p;
        for l in 0..dims.layers {
            let m = dims.layer_inputs(l);
            let mut outputs = std::vec![Vec::new(); len];
            for d in 0..dims.directions() {
                let (ih, r) = rest.split_at(g * m);
                let (hh, r) = r.split_at(g * n);
                let (b_ih, r) = r.split_at(g);
                let (b_hh, r) = r.split_at(g);
                rest = r;
                let w = Layer64 { ih, hh, b_ih, b_hh };
                let states = direction_sequence(dims.cell, &w, &seq, n, d);
                outputs
                    .iter_mut()
                    .zip(states)
                    .for_each(|(o, s)| o.extend(s));
            }
            seq = outputs;
        }
        if dims.sequence {
            for step in 0..t {
                match seq.get(step) {
                    Some(h) => out.extend(h),
                    None => out.extend(std::vec![0.0; dims.layer_outputs()]),
                }
            }
        } else {
            out.extend(&seq[len - 1][..n]);
            if dims.bidirectional {
                out.extend(&seq[0][n..]);
            }
        }
    }
    out
}

fn check<L: Layer>(dims: RnnDims, batch: usize) {
    Check::new(batch).run::<L>(&|p, x, b| reference(dims, None, p, x, b));
}

/// [`check`] with the samples' `lengths`.
fn check_padded<L: Layer>(dims: RnnDims, lengths: &[u32]) {
    let mut check = Check::new(lengths.len());
    check.lengths = Some(lengths.to_vec());
    check.run::<L>(&|p, x, b| reference(dims, Some(lengths), p, x, b));
}

#[test]
fn gru_matches_reference_and_finite_differences() {
    check::<Gru<4, 3, 5>>(Gru::<4, 3, 5>::DIMS, 3);
    check::<Gru<3, 2, 9, 1, Sequence>>(Gru::<3, 2, 9, 1, Sequence>::DIMS, 2);
    check::<Gru<3, 4, 3, 2>>(Gru::<3, 4, 3, 2>::DIMS, 2);
    check::<Gru<5, 2, 4, 2, Sequence>>(Gru::<5, 2, 4, 2, Sequence>::DIMS, 3);
    check::<Gru<1, 3, 2>>(Gru::<1, 3, 2>::DIMS, 1);
}

#[test]
fn lstm_matches_reference_and_finite_differences() {
    check::<Lstm<4, 3, 5>>(Lstm::<4, 3, 5>::DIMS, 3);
    check::<Lstm<3, 2, 9, 1, Sequence>>(Lstm::<3, 2, 9, 1, Sequence>::DIMS, 2);
    check::<Lstm<3, 4, 3, 2>>(Lstm::<3, 4, 3, 2>::DIMS, 2);
    check::<Lstm<5, 2, 4, 2, Sequence>>(Lstm::<5, 2, 4, 2, Sequence>::DIMS, 3);
    check::<Lstm<2, 3, 2, 3>>(Lstm::<2, 3, 2, 3>::DIMS, 2);
}

#[test]
fn batch_of_zero_does_nothing() {
    check::<Gru<3, 2, 4, 2>>(Gru::<3, 2, 4, 2>::DIMS, 0);
    check::<Lstm<3, 2, 4, 1, Sequence>>(Lstm::<3, 2, 4, 1, Sequence>::DIMS, 0);
}

#[test]
fn constants_follow_pytorch() {
    type G = Gru<6, 3, 5, 2, Sequence>;
    assert_eq!((G::IN, G::OUT), (18, 30));
    // Layer 0: [15, 3] + [15, 5] + 15 + 15; layer 1: [15, 5] + [15, 5] + 15 + 15.
    assert_eq!(G::PARAMS, 45 + 75 + 30 + 75 + 75 + 30);
    assert_eq!(G::PARAMS, G::TENSORS.iter().map(Tensor::len).sum::<usize>());
    // Per layer and step: 3 gates, h_n and h.
    assert_eq!(G::SAVED, 2 * 6 * 5 * 5);
    let names: Vec<&str> = G::TENSORS.iter().map(|t| t.name).collect();
    assert_eq!(
        names,
        [
            "weight_ih_l0",
            "weight_hh_l0",
            "bias_ih_l0",
            "bias_hh_l0",
            "weight_ih_l1",
            "weight_hh_l1",
            "bias_ih_l1",
            "bias_hh_l1"
        ]
    );
    let shapes: Vec<&[usize]> = G::TENSORS.iter().map(|t| t.shape).collect();
    assert_eq!(
        shapes,
        [
            &[15, 3][..],
            &[15, 5],
            &[15],
            &[15],
            &[15, 5],
            &[15, 5],
            &[15],
            &[15]
        ]
    );
    assert!(G::TENSORS
        .iter()
        .all(|t| t.init == Init::TorchDefault && t.fans.0 == 5));
    assert!(G::TORCH
        .iter()
        .zip(G::TENSORS)
        .all(|(p, t)| p.name == t.name && p.axes.is_empty()));
    type L = Lstm<7, 4, 6>;
    assert_eq!((L::IN, L::OUT, L::PARAMS), (28, 6, 24 * 4 + 24 * 6 + 48));
    // Per step: 4 gates, c, tanh(c) and h.
    assert_eq!(L::SAVED, 7 * 6 * 7);
    assert_eq!(L::TENSORS[0].shape, &[24, 4]);
    assert_eq!(L::TORCH.len(), 4);
    assert_eq!(
        std::format!("{:?}", G::new()),
        "GRU<6 steps, 3 -> 5, layers: 2, sequence>"
    );
    assert_eq!(
        std::format!("{:?}", L::new()),
        "LSTM<7 steps, 4 -> 6, layers: 1, last>"
    );
}

#[test]
#[should_panic(expected = "at least 1")]
fn a_run_time_size_of_zero_panics() {
    let dims = RnnDims {
        hidden: 0,
        ..Gru::<2, 2, 2>::DIMS
    };
    let mut rng = crate::rng::Rng::new(crate::rng::Seed(0));
    let mut ctx = Ctx {
        gemm: &mut [],
        scratch: &mut [],
        rng: &mut rng,
        first_sample: 0,
        mode: Mode::Eval,
        lengths: crate::layers::Lengths::FULL,
    };
    let io = Forward {
        params: &[],
        state: &mut [],
        x: &[0.0; 4],
        y: &mut [],
        saved: &mut [],
        batch: 1,
    };
    rnn_forward(&mut ctx, dims, io);
}

#[test]
fn packed_gru_and_lstm_match_reference_and_finite_differences() {
    check_padded::<Gru<5, 3, 4>>(Gru::<5, 3, 4>::DIMS, &[5, 1, 3]);
    check_padded::<Gru<4, 2, 3, 2, Sequence>>(Gru::<4, 2, 3, 2, Sequence>::DIMS, &[2, 4, 1]);
    check_padded::<Lstm<5, 3, 4>>(Lstm::<5, 3, 4>::DIMS, &[1, 5, 2]);
    check_padded::<Lstm<4, 2, 3, 2, Sequence>>(Lstm::<4, 2, 3, 2, Sequence>::DIMS, &[4, 1, 3]);
    // Lengths of every step are no lengths.
    check_padded::<Gru<3, 2, 3, 2>>(Gru::<3, 2, 3, 2>::DIMS, &[3, 3]);
}

#[test]
fn bidirectional_matches_reference_and_finite_differences() {
    check::<BiGru<4, 3, 3>>(BiGru::<4, 3, 3>::DIMS, 2);
    check::<BiGru<3, 2, 3, 2, Sequence>>(BiGru::<3, 2, 3, 2, Sequence>::DIMS, 2);
    check::<BiLstm<4, 2, 3>>(BiLstm::<4, 2, 3>::DIMS, 2);
    check::<BiLstm<3, 3, 2, 2, Sequence>>(BiLstm::<3, 3, 2, 2, Sequence>::DIMS, 2);
    check::<BiGru<1, 2, 2>>(BiGru::<1, 2, 2>::DIMS, 1);
}

#[test]
fn packed_bidirectional_matches_reference_and_finite_differences() {
    check_padded::<BiGru<5, 3, 3>>(BiGru::<5, 3, 3>::DIMS, &[3, 5, 1]);
    check_padded::<BiGru<4, 2, 3, 2, Sequence>>(BiGru::<4, 2, 3, 2, Sequence>::DIMS, &[1, 4, 2]);
    check_padded::<BiLstm<5, 2, 3>>(BiLstm::<5, 2, 3>::DIMS, &[5, 2, 1]);
    check_padded::<BiLstm<4, 3, 2, 2, Sequence>>(BiLstm::<4, 3, 2, 2, Sequence>::DIMS, &[2, 1, 4]);
}

/// Uniform values in `[-1, 1)`.
fn uniform(rng: &mut Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.uniform(-1.0, 1.0)).collect()
}

/// Forward and backward of `L` on `x` padded to `lengths`.
fn padded<L: Layer>(lengths: &[u32], params: &[f32], x: &[f32], dy: &[f32]) -> Passes {
    let x = (x, crate::layers::Lengths::new(lengths));
    forward_backward_padded::<L>(Mode::Train, 0, params, &[], x, dy, lengths.len())
}

/// `v` with the values of sample `b`'s steps from `lengths[b]` on (of `per` values each, `T`
/// steps a sample) drawn anew.
fn repad(v: &[f32], lengths: &[u32], (steps, per): (usize, usize), rng: &mut Rng) -> Vec<f32> {
    let mut v = v.to_vec();
    for (b, &len) in lengths.iter().enumerate() {
        let padding = (b * steps + len as usize) * per..(b + 1) * steps * per;
        v[padding]
            .iter_mut()
            .for_each(|x| *x = rng.uniform(-9.0, 9.0));
    }
    v
}

/// Whether every value of sample `b`'s padded steps is exactly 0.
fn padding_is_zero(v: &[f32], lengths: &[u32], (steps, per): (usize, usize)) -> bool {
    lengths.iter().enumerate().all(|(b, &len)| {
        let padding = (b * steps + len as usize) * per..(b + 1) * steps * per;
        v[padding].iter().all(|&x| x == 0.0)
    })
}

/// The padding of the input (and, for a sequence, of the output gradient) changes no bit of
/// the output and the gradients; the input gradient and a sequence output are 0 there.
fn padding_never_matters<L: Layer>(dims: RnnDims, lengths: &[u32]) {
    let mut rng = Rng::new(Seed(7));
    let batch = lengths.len();
    let params = uniform(&mut rng, L::PARAMS);
    let x = uniform(&mut rng, batch * L::IN);
    let dy = uniform(&mut rng, batch * L::OUT);
    let one = padded::<L>(lengths, &params, &x, &dy);
    let x_in = (dims.steps, dims.inputs);
    let x2 = repad(&x, lengths, x_in, &mut rng);
    assert_ne!(bits(&x), bits(&x2));
    let y_in = (dims.steps, dims.layer_outputs());
    let dy2 = match dims.sequence {
        true => repad(&dy, lengths, y_in, &mut rng),
        false => dy.clone(),
    };
    let two = padded::<L>(lengths, &params, &x2, &dy2);
    assert_same_bits(&one, &two);
    assert!(
        padding_is_zero(&one.dx, lengths, x_in),
        "dx at padded steps"
    );
    if dims.sequence {
        assert!(padding_is_zero(&one.y, lengths, y_in), "y at padded steps");
    }
}

#[test]
fn padding_changes_nothing_and_gets_no_gradient() {
    padding_never_matters::<Gru<6, 3, 4, 2, Sequence>>(
        Gru::<6, 3, 4, 2, Sequence>::DIMS,
        &[6, 1, 4, 2],
    );
    padding_never_matters::<Lstm<6, 3, 4>>(Lstm::<6, 3, 4>::DIMS, &[3, 6, 1]);
    padding_never_matters::<BiGru<5, 2, 3>>(BiGru::<5, 2, 3>::DIMS, &[1, 5, 3]);
    padding_never_matters::<BiLstm<5, 3, 3, 2, Sequence>>(
        BiLstm::<5, 3, 3, 2, Sequence>::DIMS,
        &[5, 2, 1],
    );
}

#[test]
fn a_bidirectional_layer_is_a_forward_run_and_a_run_over_the_reversed_prefix() {
    const T: usize = 5;
    type Both = BiGru<T, 3, 4, 1, Sequence>;
    type One = Gru<T, 3, 4, 1, Sequence>;
    let lengths = [5, 2, 1, 4];
    let mut rng = Rng::new(Seed(3));
    let params = uniform(&mut rng, Both::PARAMS);
    let x = uniform(&mut rng, lengths.len() * Both::IN);
    let both = padded::<Both>(&lengths, &params, &x, &[0.0; 4 * Both::OUT]).y;
    let (forward_params, reverse_params) = params.split_at(One::PARAMS);
    let forward = padded::<One>(&lengths, forward_params, &x, &[0.0; 4 * One::OUT]).y;
    // Each sample's valid steps in reverse order, its padding left as it is.
    let mut reversed = x.clone();
    for (b, &len) in lengths.iter().enumerate() {
        for t in 0..len as usize {
            let (to, from) = ((b * T + t) * 3, (b * T + len as usize - 1 - t) * 3);
            reversed[to..to + 3].copy_from_slice(&x[from..from + 3]);
        }
    }
    let reverse = padded::<One>(&lengths, reverse_params, &reversed, &[0.0; 4 * One::OUT]).y;
    for (b, &len) in lengths.iter().enumerate() {
        for t in 0..T {
            let at = (b * T + t) * 8;
            let fwd = &forward[(b * T + t) * 4..(b * T + t + 1) * 4];
            assert_eq!(
                bits(&both[at..at + 4]),
                bits(fwd),
                "forward, sample {b} step {t}"
            );
            let rev = match (t as u32) < len {
                true => {
                    let from = (b * T + len as usize - 1 - t) * 4;
                    &reverse[from..from + 4]
                }
                false => &[0.0; 4][..],
            };
            assert_eq!(
                bits(&both[at + 4..at + 8]),
                bits(rev),
                "reverse, sample {b} step {t}"
            );
        }
    }
}

/// `L`'s forward and backward on a pool of `threads` threads.
#[cfg(feature = "parallel")]
fn on_threads<L: Layer>(threads: usize, lengths: &[u32], seed: u64) -> Passes {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("pool");
    let mut rng = Rng::new(Seed(seed));
    let params = uniform(&mut rng, L::PARAMS);
    let x = uniform(&mut rng, lengths.len() * L::IN);
    let dy = uniform(&mut rng, lengths.len() * L::OUT);
    pool.install(|| padded::<L>(lengths, &params, &x, &dy))
}

#[cfg(feature = "parallel")]
#[test]
fn lengths_give_the_same_bits_on_one_thread_and_two() {
    // Large enough for the recurrence to run in one run of samples per thread.
    type L = BiLstm<8, 4, 64, 2, Sequence>;
    type G = Gru<8, 4, 96>;
    let lengths: Vec<u32> = (0..16).map(|b| 1 + (b * 5) % 8).collect();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .expect("pool");
    for dims in [L::DIMS, G::DIMS] {
        let s = Shape::of(dims, 0, 0, lengths.len(), Lengths::FULL);
        assert_eq!(pool.install(|| recurrence_pieces(s, dims.gate_rows())), 2);
    }
    assert_same_bits(
        &on_threads::<L>(1, &lengths, 5),
        &on_threads::<L>(2, &lengths, 5),
    );
    assert_same_bits(
        &on_threads::<G>(1, &lengths, 6),
        &on_threads::<G>(2, &lengths, 6),
    );
}

#[test]
fn bidirectional_constants_follow_pytorch() {
    type L = BiLstm<5, 3, 4, 2, Sequence>;
    assert_eq!((L::IN, L::OUT, L::STEPS), (15, 5 * 8, 5));
    // Per layer, each direction: [16, in] + [16, 4] + 16 + 16, `in` = 3, then 8.
    let per = |inputs: usize| 16 * inputs + 16 * 4 + 32;
    assert_eq!(L::PARAMS, 2 * per(3) + 2 * per(8));
    assert_eq!(L::PARAMS, L::TENSORS.iter().map(Tensor::len).sum::<usize>());
    // Per layer, step and direction: 4 gates, c, tanh(c) and h.
    assert_eq!(L::SAVED, 2 * 5 * 2 * 4 * 7);
    let names: Vec<&str> = L::TENSORS.iter().map(|t| t.name).collect();
    let expected: Vec<std::string::String> = (0..2)
        .flat_map(|l| {
            ["", "_reverse"].into_iter().flat_map(move |d| {
                ["weight_ih", "weight_hh", "bias_ih", "bias_hh"]
                    .map(|n| std::format!("{n}_l{l}{d}"))
            })
        })
        .collect();
    assert_eq!(names, expected);
    assert_eq!(L::TENSORS[4].shape, &[16, 3]);
    assert_eq!(L::TENSORS[8].shape, &[16, 8]);
    assert_eq!(L::TENSORS[12].shape, &[16, 8]);
    assert!(L::TORCH
        .iter()
        .zip(L::TENSORS)
        .all(|(p, t)| p.name == t.name && p.axes.is_empty()));
    assert_eq!(L::TORCH.len(), 16);
    assert_eq!(
        std::format!("{:?}", L::new()),
        "LSTM<5 steps, 3 -> 4, layers: 2, bidirectional, sequence>"
    );
    assert_eq!(
        std::format!("{:?}", BiGru::<6, 2, 3>::new()),
        "GRU<6 steps, 2 -> 3, layers: 1, bidirectional, last>"
    );
    assert_eq!((BiGru::<6, 2, 3>::OUT, Gru::<6, 2, 3>::STEPS), (6, 6));
}

#[test]
#[should_panic(expected = "lengths of at least 1")]
fn a_length_of_zero_panics() {
    type G = Gru<3, 2, 2>;
    let params = std::vec![0.0; G::PARAMS];
    padded::<G>(&[2, 0], &params, &[0.0; 12], &[0.0; 4]);
}
