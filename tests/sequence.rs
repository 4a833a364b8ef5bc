//! Token models: `input = u32`, `Embedding` (with a padding id) and `PositionalEmbedding` in a
//! generated model, against hand computations in `f64` and finite differences; padded batches
//! (`Padded`, ignored targets), whose padding changes nothing.

mod common;

use fusegraph::loss::IGNORE;
use fusegraph::optim::keras::Adam;
use fusegraph::optim::torch::Sgd;
use fusegraph::prelude::*;
use fusegraph::train::Padded;

const VOCAB: usize = 12;
const DIM: usize = 6;
const SEQ: usize = 7;
const PAD: usize = 0;
const CLASSES: usize = 3;

/// Token ids of `[batch, SEQ]`, embedded with learned positions, to class logits.
#[fusegraph::model(loss = SoftmaxCrossEntropy, input = u32)]
struct TokenBag {
    tok: Embedding<VOCAB, DIM, SEQ, PAD>,
    pos: PositionalEmbedding<9, DIM, SEQ>,
    fc: Dense<{ SEQ * DIM }, CLASSES>,
}

/// Ids that repeat, use the padding id, and leave tokens 10 and 11 out.
fn ids(batch: usize) -> Vec<u32> {
    (0..batch * SEQ)
        .map(|i| ((i * 7 + 3) % 10) as u32)
        .collect()
}

fn labels(batch: usize) -> Vec<u32> {
    (0..batch as u32).map(|i| i % CLASSES as u32).collect()
}

/// The logits in `f64`: `(tok[x] + pos[0..SEQ]) · W + b` per sample.
fn logits(model: &TokenBag, x: &[u32]) -> Vec<f64> {
    let (tok, pos) = (model.tok().weight(), model.pos().weight());
    let (w, b) = (model.fc().weight(), model.fc().tensor("bias").unwrap());
    let mut out = Vec::new();
    for sample in x.chunks(SEQ) {
        let h: Vec<f64> = (0..SEQ * DIM)
            .map(|i| {
                let (s, d) = (i / DIM, i % DIM);
                f64::from(tok[sample[s] as usize * DIM + d]) + f64::from(pos[i])
            })
            .collect();
        for o in 0..CLASSES {
            let dot: f64 = (0..SEQ * DIM)
                .map(|i| h[i] * f64::from(w[i * CLASSES + o]))
                .sum();
            out.push(dot + f64::from(b[o]));
        }
    }
    out
}

#[test]
fn a_token_model_computes_its_logits_from_the_ids() {
    let model = TokenBag::init(Seed(3));
    assert_eq!(
        &model.tok().weight()[PAD * DIM..(PAD + 1) * DIM],
        [0.0; DIM]
    );
    let mut step = TrainStep::<TokenBag, Sgd, 4>::new(&model, Sgd::default());
    let x = ids(4);
    let got = step.predict(&model, &x).to_vec();
    for (i, (g, e)) in got.iter().zip(logits(&model, &x)).enumerate() {
        assert!(
            (f64::from(*g) - e).abs() <= 1e-5 * e.abs().max(1.0),
            "{i}: {g} vs {e}"
        );
    }
}

/// The loss of the model's parameters `p`, in `f64`, on `x` and `y`.
fn loss_at(p: &[f32], x: &[u32], y: &[u32]) -> f64 {
    let mut model = TokenBag::init(Seed(0));
    model.params_mut().copy_from_slice(p);
    let z = logits(&model, x);
    let per: Vec<f64> = z
        .chunks(CLASSES)
        .zip(y)
        .map(|(z, &c)| {
            let m = z.iter().cloned().fold(f64::MIN, f64::max);
            let lse = m + z.iter().map(|v| (v - m).exp()).sum::<f64>().ln();
            lse - z[c as usize]
        })
        .collect();
    per.iter().sum::<f64>() / per.len() as f64
}

#[test]
fn gradients_match_finite_differences_and_spare_the_padding_row() {
    let mut model = TokenBag::init(Seed(5));
    let (x, y) = (ids(4), labels(4));
    let mut step = TrainStep::<TokenBag, Sgd, 4>::new(&model, Sgd::default());
    step.gradients(&mut model, &x, &y);
    let grads = step.grads().to_vec();
    let p0 = model.params().to_vec();
    let (pad, absent) = (PAD * DIM..(PAD + 1) * DIM, 10 * DIM..VOCAB * DIM);
    for i in 0..p0.len() {
        let h = 1e-3f32;
        let (mut plus, mut minus) = (p0.clone(), p0.clone());
        plus[i] += h;
        minus[i] -= h;
        let numeric = (loss_at(&plus, &x, &y) - loss_at(&minus, &x, &y))
            / (f64::from(plus[i]) - f64::from(minus[i]));
        let expected = if pad.contains(&i) { 0.0 } else { numeric };
        let got = f64::from(grads[i]);
        assert!(
            (got - expected).abs() <= 1e-3 * expected.abs() + 1e-5,
            "parameter {i}: {got} vs {expected}"
        );
        if pad.contains(&i) || absent.contains(&i) {
            assert_eq!(grads[i], 0.0, "parameter {i}");
        }
    }
    assert!(
        pad.clone().any(|i| loss_at(&p0, &x, &y) != {
            let mut moved = p0.clone();
            moved[i] += 0.5;
            loss_at(&moved, &x, &y)
        }),
        "the padding row is read"
    );
}

#[test]
fn adam_never_moves_the_padding_row_or_unused_tokens() {
    let mut model = TokenBag::init(Seed(7));
    let before = model.tok().weight().to_vec();
    let mut step = TrainStep::<TokenBag, Adam, 4>::new(&model, Adam::default().with_lr(0.05));
    let (x, y) = (ids(4), labels(4));
    let first = step.run(&mut model, &x, &y);
    for _ in 0..20 {
        step.run(&mut model, &x, &y);
    }
    let last = step.evaluate(&model, &x, &y).loss;
    assert!(last < 0.5 * first, "the loss went from {first} to {last}");
    let after = model.tok().weight();
    for row in [PAD, 10, 11] {
        let r = row * DIM..(row + 1) * DIM;
        assert_eq!(
            common::bits(&after[r.clone()]),
            common::bits(&before[r]),
            "row {row}"
        );
    }
    assert_ne!(
        &after[DIM..2 * DIM],
        &before[DIM..2 * DIM],
        "a used row moves"
    );
}

#[test]
fn output_gradients_scatter_into_the_rows_of_the_ids() {
    let model = TokenBag::init(Seed(9));
    let mut step = TrainStep::<TokenBag, Sgd, 4>::new(&model, Sgd::default());
    let x = ids(2);
    let grads = step.output_gradients(&model, &x).to_vec();
    let w = model.fc().weight();
    // d sum(logits) / d tok[r][d] = Σ over positions s holding r of Σ_o W[s*DIM + d][o].
    let mut expected = vec![0.0f64; VOCAB * DIM];
    for sample in x.chunks(SEQ) {
        for (s, &id) in sample.iter().enumerate() {
            for d in 0..DIM {
                let row: f64 = (0..CLASSES)
                    .map(|o| f64::from(w[(s * DIM + d) * CLASSES + o]))
                    .sum();
                if id as usize != PAD {
                    expected[id as usize * DIM + d] += row;
                }
            }
        }
    }
    for (i, (g, e)) in grads[..VOCAB * DIM].iter().zip(&expected).enumerate() {
        assert!(
            (f64::from(*g) - e).abs() <= 1e-5 * e.abs().max(1.0),
            "{i}: {g} vs {e}"
        );
    }
}

#[test]
#[should_panic(
    expected = "sample 1, position 2: token id 12 is outside the vocabulary of 12 ids (0..12)"
)]
fn an_id_past_the_vocabulary_stops_the_step() {
    let mut model = TokenBag::init(Seed(1));
    let mut step = TrainStep::<TokenBag, Sgd, 2>::new(&model, Sgd::default());
    let mut x = ids(2);
    x[9] = VOCAB as u32;
    step.run(&mut model, &x, &labels(2));
}

/// One pre-LayerNorm block whose products over a batch of 16 (512 positions of width 64, the
/// MLP 64 -> 256) and whose heads (8 heads of 32x32 scores a sample) are large enough to be
/// split across the pool.
#[fusegraph::model(loss = SequenceCrossEntropy<32>, input = u32, graph(
    e = pos(tok(x)),
    a = attn(ln1(e)) + e,
    m = fc2(fc1(ln2(a))) + a,
    logits = head(ln_f(m))
))]
struct Block {
    tok: Embedding<32, 64, 32, 0>,
    pos: PositionalEmbedding<40, 64, 32>,
    ln1: PerPosition<LayerNorm<64>, 32>,
    attn: CausalSelfAttention<32, 64, 8, true, false>,
    ln2: PerPosition<LayerNorm<64>, 32>,
    fc1: PerPosition<Dense<64, 256, Gelu>, 32>,
    fc2: PerPosition<Dense<256, 64>, 32>,
    ln_f: PerPosition<LayerNorm<64>, 32>,
    head: PerPosition<Dense<64, 32>, 32>,
}

/// Ids and next ids of 16 sequences of 32 tokens.
fn block_batch() -> (Vec<u32>, Vec<u32>) {
    let x: Vec<u32> = (0..16 * 32).map(|i| (i * 11 % 31) as u32).collect();
    let y: Vec<u32> = (0..16 * 32).map(|i| ((i * 11 + 5) % 31) as u32).collect();
    (x, y)
}

#[test]
fn a_transformer_trains_to_the_same_bits_on_one_and_two_threads() {
    use fusegraph::kernels::gemm::PARALLEL_FLOPS;
    const {
        assert!(
            2 * 16 * 32 * 64 * 256 >= PARALLEL_FLOPS,
            "the MLP's products split"
        )
    };
    let (x, y) = block_batch();
    let run = |threads: usize| {
        common::on_threads(threads, || {
            let mut model = Block::init(Seed(2));
            let mut step = TrainStep::<Block, Adam, 16>::new(&model, Adam::default());
            let losses: Vec<u32> = (0..3)
                .map(|_| step.run(&mut model, &x, &y).to_bits())
                .collect();
            let table = common::bits(step.output_gradients(&model, &x));
            (losses, common::bits(model.params()), table)
        })
    };
    let (one, two) = (run(1), run(2));
    assert_eq!(one.0, two.0, "losses");
    assert!(one.1 == two.1, "parameters differ between 1 and 2 threads");
    assert!(
        one.2 == two.2,
        "output gradients differ between 1 and 2 threads"
    );
    let losses: Vec<f32> = one.0.iter().map(|&b| f32::from_bits(b)).collect();
    assert!(losses[2] < losses[0], "the loss falls: {losses:?}");
}

/// The ids and targets of [`block_batch`] with lengths from 1 to 32: the padded steps hold
/// `pad(i)` and their targets are ignored.
fn padded_block_batch(pad: impl Fn(usize) -> u32) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
    let (mut x, mut y) = block_batch();
    let lengths: Vec<u32> = (0..16)
        .map(|b| [32, 1, 17, 9][b % 4] + b as u32 % 3)
        .collect();
    let lengths: Vec<u32> = lengths.into_iter().map(|l| l.min(32)).collect();
    for i in 0..x.len() {
        if i % 32 >= lengths[i / 32] as usize {
            x[i] = pad(i);
            y[i] = IGNORE;
        }
    }
    (x, y, lengths)
}

/// With lengths, a transformer trains to the same bits on one thread and two, and what the
/// padded steps hold (their targets ignored) changes no bit of the losses or the parameters.
#[test]
fn a_padded_transformer_trains_to_the_same_bits_whatever_the_padding_and_the_threads() {
    let run = |threads: usize, pad: &dyn Fn(usize) -> u32| {
        let (x, y, lengths) = padded_block_batch(pad);
        common::on_threads(threads, || {
            let mut model = Block::init(Seed(2));
            let mut step = TrainStep::<Block, Adam, 16>::new(&model, Adam::default());
            let x = Padded::new(&x, &lengths);
            let losses: Vec<u32> = (0..3)
                .map(|_| step.run(&mut model, &x, &y).to_bits())
                .collect();
            let table = common::bits(step.output_gradients(&model, &x));
            (losses, common::bits(model.params()), table)
        })
    };
    let zeros = run(1, &|_| 0);
    let two = run(2, &|_| 0);
    assert_eq!(zeros, two, "one thread and two differ");
    let other = run(1, &|i| (i * 7 % 31) as u32 + 1);
    assert_eq!(zeros.0, other.0, "losses");
    assert!(zeros.1 == other.1, "the padding changed the parameters");
    let losses: Vec<f32> = zeros.0.iter().map(|&b| f32::from_bits(b)).collect();
    assert!(losses[2] < losses[0], "the loss falls: {losses:?}");
}

/// Features at every step, averaged over each sample's real steps.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
struct Pooled {
    proj: PerPosition<Dense<3, 5, Tanh>, 6>,
    pool: MeanOverTime<6, 5>,
    fc: Dense<5, 3>,
}

/// What the padded steps of `f32` features hold changes no bit of the loss, of the
/// parameters' gradients or of the input gradient at the real steps, and the padded steps'
/// input gradient is exactly 0; the loss is the mean of each sample's own, computed from the
/// mean of its real steps alone.
#[test]
fn padded_features_change_nothing() {
    let lengths = [6, 1, 3, 2];
    let mut rng = common::Rng::new(3);
    let x = rng.vec(4 * 18, 1.0);
    let is_real = |i: usize| i / 3 % 6 < lengths[i / 18] as usize;
    let mut other = x.clone();
    for (i, v) in other.iter_mut().enumerate() {
        if !is_real(i) {
            *v = 1e3 * (i as f32).sin();
        }
    }
    let y = [2, 0, 1, 1];
    let run = |x: &[f32]| {
        let mut model = Pooled::init(Seed(4));
        let mut step = TrainStep::<Pooled, Sgd, 4>::new(&model, Sgd::default());
        let x = Padded::new(x, &lengths);
        let loss = step.gradients(&mut model, &x, &y);
        let grads = step.grads().to_vec();
        (loss, grads, step.input_gradient(&model, &x).to_vec())
    };
    let (a, b) = (run(&x), run(&other));
    assert_eq!(a.0.to_bits(), b.0.to_bits(), "loss");
    assert_eq!(a.1, b.1, "parameter gradients");
    for i in 0..x.len() {
        if is_real(i) {
            assert_eq!(a.2[i].to_bits(), b.2[i].to_bits(), "dx[{i}]");
        } else {
            assert_eq!((a.2[i], b.2[i]), (0.0, 0.0), "dx[{i}]");
        }
    }
    // Each sample on its own: its real steps alone, repeated to fill the sequence (each
    // length divides 6), have the same mean.
    let model = Pooled::init(Seed(4));
    let mut step = TrainStep::<Pooled, Sgd, 4>::new(&model, Sgd::default());
    let mut losses = Vec::new();
    for (b, &len) in lengths.iter().enumerate() {
        let real = &x[b * 18..b * 18 + len as usize * 3];
        let tiled: Vec<f32> = real.iter().copied().cycle().take(18).collect();
        losses.push(f64::from(step.evaluate(&model, &tiled, &y[b..=b]).loss));
    }
    let whole = f64::from(step.evaluate(&model, &Padded::new(&x, &lengths), &y).loss);
    let mean = losses.iter().sum::<f64>() / 4.0;
    assert!((whole - mean).abs() <= 1e-6 * mean, "{whole} vs {mean}");
}
