//! The recurrent layers against a scalar `f64` reference written from PyTorch's formulas, and
//! their backward pass against central finite differences of it, with respect to the inputs
//! and every parameter.

extern crate std;
use super::*;
use crate::layers::gradcheck::Check;
use crate::layers::{Init, Layer, Mode, Tensor};
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

/// The stack's output for `batch` samples, written from the formulas alone.
fn reference(dims: RnnDims, p: &[f64], x: &[f64], batch: usize) -> Vec<f64> {
    let (t, n, g) = (dims.steps, dims.hidden, dims.gate_rows());
    let mut out = Vec::new();
    for sample in x.chunks(t * dims.inputs).take(batch) {
        let mut seq: Vec<Vec<f64>> = sample.chunks(dims.inputs).map(<[f64]>::to_vec).collect();
        let mut rest = p;
        for l in 0..dims.layers {
            let m = dims.layer_inputs(l);
            let (ih, r) = rest.split_at(g * m);
            let (hh, r) = r.split_at(g * n);
            let (b_ih, r) = r.split_at(g);
            let (b_hh, r) = r.split_at(g);
            rest = r;
            let w = Layer64 { ih, hh, b_ih, b_hh };
            seq = layer_sequence(dims.cell, &w, &seq, n);
        }
        if dims.sequence {
            seq.iter().for_each(|h| out.extend(h));
        } else {
            out.extend(&seq[t - 1]);
        }
    }
    out
}

fn check<L: Layer>(dims: RnnDims, batch: usize) {
    Check::new(batch).run::<L>(&|p, x, b| reference(dims, p, x, b));
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
