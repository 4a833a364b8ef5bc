//! A train step's checked methods (`try_run`, `try_predict`, ...) return the `BatchError` of
//! each mistake where the unchecked ones panic, change nothing then, and give the unchecked
//! methods' bits on good input; `run_or_skip` leaves no trace of a batch whose loss or
//! gradients are not finite.

mod common;

use common::bits;
use fusegraph::loss::IGNORE;
use fusegraph::optim::keras::{Adam, Nadam};
use fusegraph::optim::Ema;
use fusegraph::prelude::*;
use fusegraph::train::BatchError;

const B: usize = 4;

/// Three classes from four features.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
struct Net {
    fc1: Dense<4, 8, Relu>,
    fc2: Dense<8, 3>,
}

/// Two real-valued targets from three features.
#[fusegraph::model(loss = Mse)]
struct Linear {
    fc: Dense<3, 2>,
}

/// Five token ids of a vocabulary of 6 to a tag of 4 classes at each position: 20 logits a
/// sample, but labels only in `0..4`.
#[fusegraph::model(loss = SequenceCrossEntropy<4>, input = u32)]
struct Tagger {
    tok: Embedding<6, 3, 5>,
    head: PerPosition<Dense<3, 4>, 5>,
}

/// The ids go to two tables, of 4 and of 9 rows: the model reads ids below 4.
#[fusegraph::model(loss = Mse, input = u32, graph(
    e = narrow(x) + wide(x),
    out = fc(e)
))]
struct TwoTables {
    narrow: Embedding<4, 2, 3>,
    wide: Embedding<9, 2, 3>,
    fc: Dense<6, 1>,
}

/// BatchNorm's running statistics and dropout's stream (keyed by the step counter) beside
/// the parameters.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
struct Normed {
    fc1: Dense<4, 8>,
    bn: BatchNorm<8>,
    drop: Dropout<8, 250>,
    fc2: Dense<8, 3>,
}

/// A scalar regression whose weight the tests set.
#[fusegraph::model(loss = Mse)]
struct Scalar {
    fc: Dense<1, 1>,
}

/// `n` values in [-2, 2), different for each `seed`.
fn values(n: usize, seed: u64) -> Vec<f32> {
    common::Rng::new(seed).vec(n, 2.0)
}

/// Labels `0, 1, 2, 0, ...` of `samples` samples.
fn classes(samples: usize) -> Vec<u32> {
    (0..samples as u32).map(|i| i % 3).collect()
}

/// Ids `0..6` and tags `0..4` of `samples` samples of the tagger.
fn tagged(samples: usize) -> (Vec<u32>, Vec<u32>) {
    let ids = (0..samples as u32 * 5).map(|i| (i * 5 + 1) % 6).collect();
    let tags = (0..samples as u32 * 5).map(|i| (i * 3) % 4).collect();
    (ids, tags)
}

fn net() -> (Net, TrainStep<Net, Adam, B>) {
    let model = Net::init(Seed(4));
    let step = TrainStep::new(&model, Adam::default().with_lr(0.01));
    (model, step)
}

/// The bits of everything a step and its model hold: parameters, running statistics,
/// gradients, and the optimizer's whole state (step counter, carried scalars, slots, EMA).
fn everything<M: Model, R: Rule, const N: usize>(
    model: &M,
    step: &TrainStep<M, R, N>,
) -> Vec<Vec<u32>> {
    let mut all = vec![
        bits(model.params()),
        bits(model.state()),
        bits(step.grads()),
    ];
    let weights = step.optimizer().get_weights();
    all.extend(weights.iter().map(|w| bits(w)));
    all.push(vec![step.optimizer().iterations() as u32]);
    all
}

/// The training batches of each kind of mistake for `Net`, with the error each is.
fn net_mistakes() -> [(Vec<f32>, Vec<u32>, BatchError); 4] {
    let mut bad_label = classes(3);
    bad_label[2] = 3;
    [
        (
            values(9, 1),
            classes(2),
            BatchError::InputLength {
                len: 9,
                per_sample: 4,
            },
        ),
        (
            values(20, 2),
            classes(5),
            BatchError::BatchSize { samples: 5, max: B },
        ),
        (
            values(8, 3),
            classes(3),
            BatchError::TargetCount {
                samples: 2,
                expected: 2,
                given: 3,
            },
        ),
        (
            values(12, 4),
            bad_label,
            BatchError::Label {
                sample: 2,
                position: None,
                label: 3,
                classes: 3,
            },
        ),
    ]
}

#[test]
fn checked_training_methods_name_each_mistake_and_change_nothing() {
    let (mut model, mut step) = net();
    step.run(&mut model, &values(16, 9), &classes(4));
    let before = everything(&model, &step);
    for (x, y, expected) in net_mistakes() {
        let e = Err(expected);
        assert_eq!(step.try_run(&mut model, &x, &y), e);
        assert_eq!(step.try_gradients(&mut model, &x, &y), e);
        assert_eq!(step.try_shard_gradients(&mut model, &x, &y, 8), e);
        assert_eq!(
            step.try_loss_input_gradient(&model, &x, &y).err(),
            Some(expected)
        );
    }
    assert_eq!(everything(&model, &step), before);
}

#[test]
fn checked_inference_methods_name_each_mistake_of_the_input() {
    let (model, mut step) = net();
    let mistakes = [
        (
            values(7, 1),
            BatchError::InputLength {
                len: 7,
                per_sample: 4,
            },
        ),
        (values(24, 2), BatchError::BatchSize { samples: 6, max: B }),
    ];
    for (x, expected) in mistakes {
        assert_eq!(step.try_predict(&model, &x).err(), Some(expected));
        assert_eq!(step.try_output_gradients(&model, &x).err(), Some(expected));
        assert_eq!(step.try_input_gradient(&model, &x).err(), Some(expected));
    }
}

#[test]
fn checked_evaluation_takes_any_number_of_samples_and_counts_them_from_the_first() {
    let (model, mut step) = net();
    let x = values(24, 5);
    let mut y = classes(6);
    assert_eq!(
        step.try_evaluate(&model, &x[..23], &y).err(),
        Some(BatchError::InputLength {
            len: 23,
            per_sample: 4
        })
    );
    assert_eq!(
        step.try_evaluate(&model, &x, &y[..5]).err(),
        Some(BatchError::TargetCount {
            samples: 6,
            expected: 6,
            given: 5
        })
    );
    let good = step.try_evaluate(&model, &x, &y).unwrap();
    assert_eq!(good, step.evaluate(&model, &x, &y));
    y[5] = 7;
    assert_eq!(
        step.try_evaluate(&model, &x, &y).err(),
        Some(BatchError::Label {
            sample: 5,
            position: None,
            label: 7,
            classes: 3
        })
    );
}

#[test]
#[should_panic(expected = "2 samples need 2 targets, not 3")]
fn evaluation_panics_on_more_targets_than_samples() {
    let (model, mut step) = net();
    step.evaluate(&model, &values(8, 1), &classes(3));
}

#[test]
fn value_targets_are_counted_per_output_and_never_read_as_labels() {
    let mut model = Linear::init(Seed(1));
    let mut step = TrainStep::<Linear, Adam, B>::new(&model, Adam::default());
    let x = values(6, 1);
    assert_eq!(
        step.try_run(&mut model, &x, &[0.5, 1.5, 2.5]),
        Err(BatchError::TargetCount {
            samples: 2,
            expected: 4,
            given: 3
        })
    );
    let loss = step
        .try_run(&mut model, &x, &[1e3, -1e3, 7.0, 9.0])
        .unwrap();
    assert!(loss > 1e5, "{loss}");
    assert_eq!(Linear::VOCAB, 0);
}

#[test]
fn a_token_model_refuses_ids_outside_its_vocabulary_and_labels_outside_its_classes() {
    let mut model = Tagger::init(Seed(2));
    let mut step = TrainStep::<Tagger, Adam, B>::new(&model, Adam::default());
    assert_eq!(Tagger::VOCAB, 6);
    let before = everything(&model, &step);
    let (ids, tags) = tagged(2);

    // A tag of 7 is below the model's 20 outputs but not one of the loss's 4 classes.
    let mut bad_tags = tags.clone();
    bad_tags[7] = 7;
    let label = BatchError::Label {
        sample: 1,
        position: Some(2),
        label: 7,
        classes: 4,
    };
    assert_eq!(step.try_run(&mut model, &ids, &bad_tags), Err(label));
    assert_eq!(step.try_gradients(&mut model, &ids, &bad_tags), Err(label));
    assert_eq!(step.try_evaluate(&model, &ids, &bad_tags), Err(label));

    for (at, id) in [(3, 6), (9, u32::MAX)] {
        let mut bad_ids = ids.clone();
        bad_ids[at] = id;
        let token = BatchError::TokenId {
            sample: at / 5,
            position: at % 5,
            id,
            vocab: 6,
        };
        assert_eq!(step.try_run(&mut model, &bad_ids, &tags), Err(token));
        assert_eq!(step.try_gradients(&mut model, &bad_ids, &tags), Err(token));
        assert_eq!(step.try_evaluate(&model, &bad_ids, &tags), Err(token));
        assert_eq!(step.try_predict(&model, &bad_ids).err(), Some(token));
        assert_eq!(
            step.try_output_gradients(&model, &bad_ids).err(),
            Some(token)
        );
    }
    assert_eq!(everything(&model, &step), before);
    assert!(step.try_run(&mut model, &ids, &tags).unwrap().is_finite());
}

/// Ignored tags are accepted, scored nowhere and weigh nothing: an evaluation over six
/// samples whose last five positions are ignored equals the loss over the rest, with the
/// accuracy over the positions that count.
#[test]
fn ignored_labels_are_accepted_and_left_out_of_evaluation() {
    let model = Tagger::init(Seed(2));
    let mut step = TrainStep::<Tagger, Adam, B>::new(&model, Adam::default());
    let (ids, tags) = tagged(6);
    let mut masked = tags.clone();
    masked[25..].fill(IGNORE);
    masked[3] = IGNORE;
    let got = step.try_evaluate(&model, &ids, &masked).unwrap();
    // The mean over the 24 counted positions, from each position's own loss.
    let out = step.predict(&model, &ids[..20]).to_vec();
    let out = [out, step.predict(&model, &ids[20..]).to_vec()].concat();
    let (mut sum, mut counted, mut right) = (0.0f64, 0, 0);
    for (row, &tag) in out.chunks(4).zip(&masked) {
        if tag == IGNORE {
            continue;
        }
        let lse = row.iter().map(|&z| f64::from(z).exp()).sum::<f64>().ln();
        sum += lse - f64::from(row[tag as usize]);
        counted += 1;
        let best = (0..4).fold(0, |b, j| if row[j] > row[b] { j } else { b });
        right += usize::from(best == tag as usize);
    }
    assert_eq!(counted, 24);
    assert!((f64::from(got.loss) - sum / 24.0).abs() < 1e-6, "{got:?}");
    assert_eq!(got.accuracy, Some(right as f32 / 24.0));
    let full = step.try_evaluate(&model, &ids, &tags).unwrap();
    assert_ne!(full.loss, got.loss, "the ignored positions are left out");
}

#[test]
fn the_vocabulary_is_the_smallest_of_the_tables_that_read_the_ids() {
    let model = TwoTables::init(Seed(1));
    let mut step = TrainStep::<TwoTables, Adam, B>::new(&model, Adam::default());
    assert_eq!(TwoTables::VOCAB, 4);
    assert_eq!(
        step.try_predict(&model, &[0, 3, 4]).err(),
        Some(BatchError::TokenId {
            sample: 0,
            position: 2,
            id: 4,
            vocab: 4
        })
    );
    let out = step.try_predict(&model, &[0, 3, 3]).unwrap().to_vec();
    assert_eq!(bits(&out), bits(step.predict(&model, &[0, 3, 3])));
}

#[test]
fn checked_methods_give_the_bits_of_the_unchecked_ones() {
    let (mut a_model, mut a) = net();
    let (mut b_model, mut b) = net();
    for seed in 0..3 {
        let (x, y) = (values(16, seed), classes(4));
        let unchecked = a.run(&mut a_model, &x, &y);
        assert_eq!(b.try_run(&mut b_model, &x, &y), Ok(unchecked));
        let unchecked = a.gradients(&mut a_model, &x, &y);
        assert_eq!(b.try_gradients(&mut b_model, &x, &y), Ok(unchecked));
        assert_eq!(bits(a.grads()), bits(b.grads()));
    }
    let (x, y) = (values(12, 7), classes(3));
    let unchecked = a.predict(&a_model, &x).to_vec();
    assert_eq!(b.try_predict(&b_model, &x).map(bits), Ok(bits(&unchecked)));
    let unchecked = a.output_gradients(&a_model, &x).to_vec();
    assert_eq!(
        b.try_output_gradients(&b_model, &x).map(bits),
        Ok(bits(&unchecked))
    );
    let unchecked = a.input_gradient(&a_model, &x).to_vec();
    assert_eq!(
        b.try_input_gradient(&b_model, &x).map(bits),
        Ok(bits(&unchecked))
    );
    let unchecked = a.loss_input_gradient(&a_model, &x, &y).to_vec();
    assert_eq!(
        b.try_loss_input_gradient(&b_model, &x, &y).map(bits),
        Ok(bits(&unchecked))
    );
    let unchecked = a.shard_gradients(&mut a_model, &x, &y, 5);
    assert_eq!(
        b.try_shard_gradients(&mut b_model, &x, &y, 5),
        Ok(unchecked)
    );
    let (x, y) = (values(40, 8), classes(10));
    assert_eq!(
        b.try_evaluate(&b_model, &x, &y),
        Ok(a.evaluate(&a_model, &x, &y))
    );
    assert_eq!(everything(&a_model, &a), everything(&b_model, &b));

    let mut a_model = Tagger::init(Seed(5));
    let mut b_model = Tagger::init(Seed(5));
    let mut a = TrainStep::<Tagger, Adam, B>::new(&a_model, Adam::default());
    let mut b = TrainStep::<Tagger, Adam, B>::new(&b_model, Adam::default());
    let (ids, tags) = tagged(3);
    let unchecked = a.run(&mut a_model, &ids, &tags);
    assert_eq!(b.try_run(&mut b_model, &ids, &tags), Ok(unchecked));
    let unchecked = a.predict(&a_model, &ids).to_vec();
    assert_eq!(
        b.try_predict(&b_model, &ids).map(bits),
        Ok(bits(&unchecked))
    );
    assert_eq!(everything(&a_model, &a), everything(&b_model, &b));
}

fn normed() -> (Normed, TrainStep<Normed, Nadam, B>) {
    let model = Normed::init(Seed(6));
    let config = Config::new().ema(Ema {
        momentum: 0.9,
        overwrite_every: 0,
    });
    let step = TrainStep::with_config(&model, Nadam::default().with_lr(0.01), config);
    (model, step)
}

#[test]
fn run_or_skip_leaves_no_trace_of_a_nan_batch_and_trains_on() {
    let (mut skipping, mut a) = normed();
    let (mut plain, mut b) = normed();
    let y = classes(4);
    let (first, last) = (values(16, 1), values(16, 2));
    let mut nan = values(16, 3);
    nan[5] = f32::NAN;

    let outcome = a.run_or_skip(&mut skipping, &first, &y);
    assert!(!outcome.skipped);
    assert_eq!(outcome.loss, b.run(&mut plain, &first, &y));
    assert_eq!(everything(&skipping, &a), everything(&plain, &b));

    let before = everything(&skipping, &a);
    let outcome = a.run_or_skip(&mut skipping, &nan, &y);
    assert!(outcome.skipped && outcome.loss.is_nan(), "{outcome:?}");
    let after: Vec<Vec<u32>> = everything(&skipping, &a);
    let grads = 2; // the gradients of the NaN batch are there to see
    for (i, (got, want)) in after.iter().zip(&before).enumerate() {
        if i != grads {
            assert_eq!(got, want, "part {i} of the state");
        }
    }
    assert!(a.grads().iter().any(|g| g.is_nan()));

    // Training goes on as if the NaN batch had never come.
    let outcome = a.run_or_skip(&mut skipping, &last, &y);
    assert!(!outcome.skipped);
    assert_eq!(outcome.loss, b.run(&mut plain, &last, &y));
    assert_eq!(everything(&skipping, &a), everything(&plain, &b));
    assert_eq!(a.optimizer().iterations(), 2);
    assert_ne!(bits(skipping.params()), before[0]);
}

#[test]
fn run_or_skip_skips_an_overflowing_loss_or_gradient() {
    // With w = 0.01 and x = 1e21 the output is 1e19 and the loss 1e38, finite in f32, but the
    // weight's gradient 2 * 1e19 * 1e21 overflows; with x = 1e30 the loss does too.
    for (x, loss_finite) in [(1e21, true), (1e30, false)] {
        let mut model = Scalar::init(Seed(0));
        model.params_mut().copy_from_slice(&[0.01, 0.0]);
        let mut step = TrainStep::<Scalar, Adam, 1>::new(&model, Adam::default());
        let before = (bits(model.params()), step.optimizer().get_weights());
        let outcome = step.run_or_skip(&mut model, &[x], &[0.0]);
        assert_eq!(outcome.loss.is_finite(), loss_finite, "{outcome:?}");
        assert!(outcome.skipped);
        assert_eq!(step.grads()[0], f32::INFINITY);
        assert_eq!(
            (bits(model.params()), step.optimizer().get_weights()),
            before
        );
        let outcome = step.run_or_skip(&mut model, &[1.0], &[0.0]);
        assert!(!outcome.skipped);
        assert_eq!(step.optimizer().iterations(), 1);
        assert_ne!(bits(model.params()), before.0);
    }
}

/// A step takes a batch's targets as a slice, an array or a `Vec`, the same bits from each;
/// an empty batch's are `&[]`.
#[test]
fn targets_are_a_slice_an_array_or_a_vec() {
    let (mut model, mut step) = net();
    let x = values(12, 6);
    let labels: [u32; 3] = [0, 1, 2];
    let from_array = step.evaluate(&model, &x, &labels);
    assert_eq!(step.evaluate(&model, &x, &labels.to_vec()), from_array);
    assert_eq!(step.evaluate(&model, &x, &labels[..]), from_array);
    assert_eq!(step.try_evaluate(&model, &x, &classes(3)), Ok(from_array));
    let loss = step.gradients(&mut model, &x, &labels[..]);
    assert_eq!(loss.to_bits(), from_array.loss.to_bits());
    assert_eq!(step.run(&mut model, &[], &[]), 0.0);
}
