//! Generated models with GRU and LSTM layers: gradients through stacked recurrences and the
//! sequence loss against finite differences, accuracy per position, training that gives the
//! same bits on one and two threads, and an inline model within a memory budget trained
//! without an allocator.

mod common;

use common::Rng;
use fusegraph::kernels::gemm::PARALLEL_FLOPS;
use fusegraph::optim::{keras, torch};
use fusegraph::prelude::*;
use fusegraph::train::EmbeddedStep;

/// Two stacked GRU layers read by a Dense layer, regressing two values.
#[fusegraph::model(loss = Mse)]
pub struct GruRegressor {
    gru: Gru<4, 3, 5, 2>,
    fc: Dense<5, 2>,
}

/// A GRU's every hidden state read by a two-layer LSTM, whose every hidden state is the logits
/// of three classes at each of four positions.
#[fusegraph::model(loss = SequenceCrossEntropy<3>)]
pub struct LstmTagger {
    gru: Gru<4, 2, 4, 1, Sequence>,
    lstm: Lstm<4, 4, 3, 2, Sequence>,
}

#[test]
fn stacked_recurrences_match_finite_differences_through_the_loss() {
    let mut rng = Rng::new(21);
    let x = rng.vec(3 * GruRegressor::IN, 1.0);
    let y = rng.vec(3 * 2, 1.0);
    common::check_weights(&mut GruRegressor::init(Seed(4)), &x, &y, 1e-2);
    common::check_loss_input_gradient(&GruRegressor::init(Seed(5)), &x, &y, 1e-2, 1e-2);

    let x = rng.vec(3 * LstmTagger::IN, 1.0);
    let labels: Vec<u32> = (0..3 * 4).map(|i| (i * 7 % 3) as u32).collect();
    common::check_weights(&mut LstmTagger::init(Seed(6)), &x, &labels, 1e-2);
    common::check_loss_input_gradient(&LstmTagger::init(Seed(7)), &x, &labels, 1e-2, 1e-2);
}

#[test]
fn a_tagger_learns_and_its_accuracy_counts_positions() {
    // The class at each position is the sign of that position's first feature.
    let mut rng = Rng::new(22);
    let x = rng.vec(8 * LstmTagger::IN, 1.0);
    let labels: Vec<u32> = x.chunks(2).map(|step| u32::from(step[0] > 0.0)).collect();
    let mut model = LstmTagger::init(Seed(8));
    let mut step =
        TrainStep::<LstmTagger, torch::Adam, 8>::new(&model, torch::Adam::default().with_lr(0.05));
    let first = step.evaluate(&model, &x, &labels);
    for _ in 0..150 {
        step.run(&mut model, &x, &labels);
    }
    let last = step.evaluate(&model, &x, &labels);
    assert!(last.loss < 0.6 * first.loss, "{first:?} -> {last:?}");
    let logits = step.predict(&model, &x);
    let right = logits
        .chunks(3)
        .zip(&labels)
        .filter(|(z, &c)| {
            let best = (0..3).fold(0, |b, j| if z[j] > z[b] { j } else { b });
            best == c as usize
        })
        .count();
    assert_eq!(last.accuracy, Some(right as f32 / 32.0));
    assert!(right > 24, "{right} of 32 positions right");
}

/// The GRU of W6 (input 16, hidden 64, sequence 32), stacked twice, with a classifier.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
pub struct SplitGru {
    gru: Gru<32, 16, 64, 2>,
    fc: Dense<64, 10, Tanh>,
}

#[test]
fn a_gru_trains_to_the_same_bits_on_one_and_two_threads() {
    // dW_hh of batch 32: 2 * (3 * 64) * (32 * 32) * 64 flops, split across the pool.
    const { assert!(2 * 192 * 32 * 32 * 64 >= PARALLEL_FLOPS, "a product splits") };
    let mut rng = Rng::new(23);
    let x = rng.vec(32 * SplitGru::IN, 1.0);
    let y: Vec<u32> = (0..32).map(|i| i % 10).collect();
    common::assert_same_bits_on_one_and_two_threads::<_, 32>(|| SplitGru::init(Seed(9)), &x, &y);
}

/// A keyword-spotting-sized model for a microcontroller: parameters inline, 8 frames of 4
/// features, within 64 KiB for batches of 4 with Adam.
#[fusegraph::model(loss = SoftmaxCrossEntropy, inline, max_bytes = 65536, batch = 4, optimizer = keras::Adam)]
pub struct Keyword {
    gru: Gru<8, 4, 8>,
    fc: Dense<8, 3>,
}

#[test]
fn an_inline_recurrent_model_trains_in_an_arena_to_the_bits_of_a_train_step() {
    // The budget counts what the GRU saves over the whole sequence: per step its 3 gates,
    // W_hn h + b_hn and h, 8 values each, beside the outputs, their gradients and the input.
    let saved = 8 * (3 * 8 + 8 + 8);
    assert_eq!(<Gru<8, 4, 8> as Layer>::SAVED, saved);
    let per_sample = (8 + saved) + 3 + (8 + 3) + Keyword::IN;
    assert_eq!(Keyword::BUDGET_BYTES.activations, per_sample * 4 * 4);
    const { assert!(Keyword::BUDGET_BYTES.total() <= 65536) };

    let mut rng = Rng::new(24);
    let (mut a, mut b) = (Keyword::init(Seed(10)), Keyword::init(Seed(10)));
    let rule = keras::Adam::default().with_lr(0.02);
    let mut normal = TrainStep::<Keyword, _, 4>::new(&a, rule);
    let mut arena = vec![0.0; EmbeddedStep::<Keyword, keras::Adam, 4>::FLOATS];
    let mut layerwise = EmbeddedStep::<Keyword, _, 4>::new(&b, rule, &mut arena).unwrap();
    for i in 0..6 {
        let x = rng.vec(4 * Keyword::IN, 1.0);
        let y: Vec<u32> = (0..4).map(|k| (k + i) % 3).collect();
        let (la, lb) = (normal.run(&mut a, &x, &y), layerwise.run(&mut b, &x, &y));
        assert_eq!(la.to_bits(), lb.to_bits(), "loss of step {i}");
        assert_eq!(common::bits(a.params()), common::bits(b.params()));
    }
}
