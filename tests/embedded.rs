//! Training without an allocator: `EmbeddedStep` keeps every buffer in one arena; updating each
//! layer during the backward pass (`Fused`) gives the same bits as the full gradient and one
//! update (`Full`, and `TrainStep` in both modes), with every option that does not need all
//! gradients first.

mod common;

use common::bits;
use fusegraph::optim::{
    keras, torch, Config, Full, Fused, NormClip, Plain, Rule, Schedule, UpdateMode, UpdatePart,
    Updates, WeightDecay,
};
use fusegraph::prelude::*;
use fusegraph::train::{ArenaError, EmbeddedStep, Static};

/// The tiny model of embedded targets.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
pub struct Tiny {
    fc1: Dense<8, 16, Relu>,
    fc2: Dense<16, 4>,
}

/// Every kind of layer state: batch statistics, dropout, normalization, three dense layers.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
pub struct Deeper {
    fc1: Dense<8, 32, Relu>,
    norm: BatchNorm<32>,
    drop: Dropout<32, 200>,
    fc2: Dense<32, 16, Tanh>,
    ln: LayerNorm<16>,
    fc3: Dense<16, 4>,
}

/// A residual graph.
#[fusegraph::model(loss = Mse, graph(h = fc1(x).tanh(), r = fc2(h).sigmoid() + h, y = head(r)))]
pub struct Residual {
    fc1: Dense<8, 6>,
    fc2: Dense<6, 6>,
    head: Dense<6, 4>,
}

/// A fixed batch of `n` samples.
fn batch(n: usize, seed: u64) -> (Vec<f32>, Vec<u32>) {
    let mut rng = Rng::new(Seed(seed));
    let x = (0..n * 8).map(|_| rng.normal()).collect();
    let y = (0..n).map(|_| rng.below(4)).collect();
    (x, y)
}

/// Steps `TrainStep` and an `EmbeddedStep` in mode `U` side by side; their parameters (and
/// slots) must agree bit for bit after every step.
fn same_bits<M, R, U>(
    init: fn(Seed) -> M,
    rule: R,
    config: Config,
    step_config: Config<U>,
    steps: usize,
) where
    M: Model<Loss = SoftmaxCrossEntropy, Input = f32>,
    R: Rule,
    U: UpdateMode,
{
    let mut a = init(Seed(3));
    let mut b = init(Seed(3));
    let mut normal = TrainStep::<M, R, 8>::with_config(&a, rule, config);
    let mut arena = vec![f32::NAN; EmbeddedStep::<M, R, 8, U>::FLOATS];
    let mut embedded =
        EmbeddedStep::<M, R, 8, U>::with_config(&b, rule, step_config, &mut arena).unwrap();
    for s in 0..steps {
        let (x, y) = batch(1 + s % 8, s as u64);
        let la = normal.run(&mut a, &x, &y);
        let lb = embedded.run(&mut b, &x, &y);
        assert_eq!(la.to_bits(), lb.to_bits(), "loss of step {s}");
        assert_eq!(
            bits(a.params()),
            bits(b.params()),
            "parameters after step {s}"
        );
        assert_eq!(bits(a.state()), bits(b.state()), "state after step {s}");
    }
    for (i, _) in M::TENSORS.iter().enumerate() {
        for slot in R::SLOTS {
            assert_eq!(
                bits(normal.optimizer().slot_tensor(slot, i).unwrap()),
                bits(embedded.optimizer().slot_tensor(slot, i).unwrap()),
                "slot {slot} of tensor {i}"
            );
        }
    }
    assert_eq!(embedded.optimizer().iterations(), steps as u64);
    let (x, _) = batch(8, 99);
    assert_eq!(bits(normal.predict(&a, &x)), bits(embedded.predict(&b, &x)));
}

#[test]
fn fused_updates_give_the_bits_of_a_full_gradient() {
    let plain = || (Config::default(), Config::<Fused>::new());
    for model in 0..2 {
        let run = |rule_case: usize| {
            let (c, sc) = plain();
            match (model, rule_case) {
                (0, 0) => same_bits(
                    Tiny::init,
                    torch::SgdMomentum::default().with_lr(0.05),
                    c,
                    sc,
                    12,
                ),
                (0, _) => same_bits(Tiny::init, keras::Adam::default().with_lr(0.01), c, sc, 12),
                (_, 0) => same_bits(
                    Deeper::init,
                    torch::SgdMomentum::default().with_lr(0.05),
                    c,
                    sc,
                    12,
                ),
                (_, _) => same_bits(
                    Deeper::init,
                    keras::Adam::default().with_lr(0.01),
                    c,
                    sc,
                    12,
                ),
            }
        };
        run(0);
        run(1);
    }
}

/// Tensor-wise rules from an arena, layer by layer and after the whole backward pass, give the
/// bits of a `TrainStep`: Muon's Newton-Schulz (its scratch in the arena, sized at compile
/// time), Adafactor's row and column statistics (the arena's slots take what they keep), and
/// LAMB's trust ratio with value clipping (a transformed gradient).
#[test]
fn tensor_wise_rules_train_from_an_arena() {
    use fusegraph::optim::optax;
    let muon = keras::Muon::default().with_lr(0.02);
    same_bits(
        Deeper::init,
        muon,
        Config::default(),
        Config::<Fused>::new(),
        6,
    );
    same_bits(
        Tiny::init,
        muon,
        Config::default(),
        Config::<Full>::new(),
        6,
    );
    let adafactor = torch::Adafactor::default();
    same_bits(
        Deeper::init,
        adafactor,
        Config::default(),
        Config::<Fused>::new(),
        6,
    );
    let clipped = || Config::default().clip_value(0.05);
    let lamb = optax::Lamb::default().with_lr(0.01);
    same_bits(
        Deeper::init,
        lamb,
        clipped(),
        Config::<Fused>::new().clip_value(0.05),
        6,
    );
    let bound = fusegraph::train::optimizer_work::<Deeper, keras::Muon>();
    assert!(
        bound >= fusegraph::optim::newton_schulz_serial_work(32, 16),
        "{bound}"
    );
    assert_eq!(fusegraph::train::optimizer_work::<Deeper, keras::Adam>(), 0);
}

#[test]
fn every_layerwise_option_keeps_the_bits() {
    let schedule = Schedule::cosine(0.02, 20, 0.1).with_warmup(3, 0.0);
    same_bits(
        Tiny::init,
        keras::Adam::default(),
        Config::default()
            .clip_value(0.05)
            .clip_norm(NormClip::PerTensor(0.5))
            .weight_decay(WeightDecay::Decoupled(0.01))
            .schedule(schedule),
        Config::<Fused>::new()
            .clip_value(0.05)
            .clip_tensor_norm(0.5)
            .weight_decay(WeightDecay::Decoupled(0.01))
            .schedule(schedule),
        15,
    );
    same_bits(
        Deeper::init,
        torch::Adam::default(),
        Config::default()
            .weight_decay(WeightDecay::L2(0.1))
            .maximize(true),
        Config::<Fused>::new()
            .weight_decay(WeightDecay::L2(0.1))
            .maximize(true),
        10,
    );
    // Nadam carries a scalar across steps.
    same_bits(
        Tiny::init,
        keras::Nadam::default(),
        Config::default(),
        Config::<Fused>::new(),
        10,
    );
    // Global-norm clipping, with every gradient known first.
    same_bits(
        Deeper::init,
        keras::Adam::default(),
        Config::default().clip_norm(NormClip::Global(0.1)),
        Config::<Full>::new().clip_global_norm(0.1),
        10,
    );
}

/// Coupled weight decay alone.
type L2Only = Updates<false, true, false, false, false>;

/// A step that compiles in fewer parts of the update than every one gives the same bits as a
/// step with every part.
#[test]
fn a_step_with_fewer_parts_of_the_update_keeps_the_bits() {
    same_bits(
        Tiny::init,
        torch::SgdMomentum::default().with_lr(0.05),
        Config::default(),
        Config::<Fused<Plain>>::new(),
        12,
    );
    same_bits(
        Deeper::init,
        torch::Adam::default(),
        Config::default().weight_decay(WeightDecay::L2(0.1)),
        Config::<Full<L2Only>>::new().weight_decay(WeightDecay::L2(0.1)),
        10,
    );
}

/// A configuration that needs a part of the update that the step's set leaves out is refused
/// when the step is built, naming the part.
#[test]
fn a_configuration_that_needs_a_part_left_out_is_refused() {
    fn refused<U: UpdateMode>(config: Config<U>) -> Option<ArenaError> {
        let model = Tiny::init(Seed(1));
        let rule = torch::SgdMomentum::default();
        let mut arena = vec![0.0; EmbeddedStep::<Tiny, torch::SgdMomentum, 8, U>::FLOATS];
        EmbeddedStep::<Tiny, _, 8, U>::with_config(&model, rule, config, &mut arena).err()
    }
    let plain = Config::<Fused<Plain>>::new;
    let cases = [
        (plain().clip_value(1.0), UpdatePart::GradientTransform),
        (plain().clip_tensor_norm(1.0), UpdatePart::GradientTransform),
        (plain().maximize(true), UpdatePart::GradientTransform),
        (plain().weight_decay(WeightDecay::L2(0.1)), UpdatePart::L2),
        (
            plain().weight_decay(WeightDecay::Decoupled(0.1)),
            UpdatePart::DecoupledDecay,
        ),
        (
            plain().schedule(Schedule::exponential(0.1, 100, 0.5)),
            UpdatePart::Schedule,
        ),
    ];
    for (config, part) in cases {
        let err = refused(config).expect("refused");
        assert_eq!(err, ArenaError::Excluded(part));
        assert!(err.to_string().contains(&part.to_string()), "{err}");
    }
    assert_eq!(refused(plain()), None);
    let l2 = Config::<Fused<L2Only>>::new;
    assert_eq!(refused(l2().weight_decay(WeightDecay::L2(0.1))), None);
    assert_eq!(
        refused(l2().weight_decay(WeightDecay::Decoupled(0.1))),
        Some(ArenaError::Excluded(UpdatePart::DecoupledDecay))
    );
    assert_eq!(
        refused(l2().clip_value(1.0)),
        Some(ArenaError::Excluded(UpdatePart::GradientTransform))
    );
}

#[test]
fn graphs_update_layer_by_layer_too() {
    let mut a = Residual::init(Seed(5));
    let mut b = Residual::init(Seed(5));
    let rule = keras::Adam::default().with_lr(0.02);
    let mut normal = TrainStep::<Residual, _, 4>::new(&a, rule);
    let mut arena = vec![0.0; EmbeddedStep::<Residual, keras::Adam, 4>::FLOATS];
    let mut fused = EmbeddedStep::<Residual, _, 4>::new(&b, rule, &mut arena).unwrap();
    let mut rng = Rng::new(Seed(1));
    for _ in 0..10 {
        let x: Vec<f32> = (0..4 * 8).map(|_| rng.normal()).collect();
        let y: Vec<f32> = (0..4 * 4).map(|_| rng.next_f32()).collect();
        assert_eq!(
            normal.run(&mut a, &x, &y).to_bits(),
            fused.run(&mut b, &x, &y).to_bits()
        );
        assert_eq!(bits(a.params()), bits(b.params()));
    }
    let x: Vec<f32> = (0..2 * 8).map(|_| rng.normal()).collect();
    assert_eq!(
        bits(normal.input_gradient(&a, &x)),
        bits(fused.input_gradient(&b, &x))
    );
}

#[test]
fn the_arena_is_exactly_what_the_bytes_say() {
    type Normal = EmbeddedStep<'static, Tiny, keras::Adam, 8, Full>;
    type Layerwise = EmbeddedStep<'static, Tiny, keras::Adam, 8, Fused>;
    let params = <Tiny as Model>::PARAMS;
    assert_eq!(params, 8 * 16 + 16 + 16 * 4 + 4);
    assert_eq!(Normal::BYTES.grads, params * 4);
    assert_eq!(
        Layerwise::BYTES.grads,
        (8 * 16 + 16) * 4,
        "the largest layer's gradient"
    );
    assert_eq!(
        Normal::BYTES.total() - Layerwise::BYTES.total(),
        (params - 144) * 4
    );
    assert_eq!(Normal::BYTES, TrainStep::<Tiny, keras::Adam, 8>::BYTES);
    // The parts against the buffers a TrainStep really allocates for the same model.
    let mut model = Tiny::init(Seed(1));
    let normal = TrainStep::<Tiny, keras::Adam, 8>::new(&model, keras::Adam::default());
    assert_eq!(normal.grads().len() * 4, Normal::BYTES.grads);
    assert_eq!(normal.workspace_bytes(), Normal::BYTES.workspace);
    let slots: usize = <keras::Adam as Rule>::SLOTS
        .iter()
        .map(|s| normal.optimizer().slot(s).unwrap().len())
        .sum();
    assert_eq!(slots * 4, Normal::BYTES.slots);
    // An arena of exactly FLOATS values (an array whose length is the constant) holds every
    // buffer of a step that trains.
    let mut arena = [0.0f32; Layerwise::FLOATS];
    let mut step =
        EmbeddedStep::<Tiny, _, 8>::new(&model, keras::Adam::default(), &mut arena).unwrap();
    let (x, y) = batch(8, 1);
    assert!(step.run(&mut model, &x, &y).is_finite());

    let mut short = vec![0.0; Layerwise::FLOATS - 1];
    let err = EmbeddedStep::<Tiny, keras::Adam, 8>::new(&model, keras::Adam::default(), &mut short)
        .err()
        .unwrap();
    assert_eq!(
        err,
        ArenaError::Length {
            needed: Layerwise::FLOATS,
            given: Layerwise::FLOATS - 1
        }
    );
    assert!(err.to_string().contains("needs"));
}

/// The arena of a layer-wise step of `Tiny` with SGD-momentum, in a `static`.
static ARENA: Static<[f32; EmbeddedStep::<Tiny, torch::SgdMomentum, 8, Fused>::FLOATS]> =
    Static::new([0.0; EmbeddedStep::<Tiny, torch::SgdMomentum, 8, Fused>::FLOATS]);

#[test]
fn a_step_trains_from_a_static_arena() {
    let arena = ARENA.take().unwrap();
    assert!(ARENA.take().is_none(), "taken once");
    let mut model = Tiny::init(Seed(2));
    let rule = torch::SgdMomentum::default().with_lr(0.1);
    let mut step = EmbeddedStep::<Tiny, _, 8>::new(&model, rule, arena).unwrap();
    let (x, y) = batch(8, 7);
    let first = step.evaluate(&model, &x, &y).loss;
    for _ in 0..100 {
        step.run(&mut model, &x, &y);
    }
    let last = step.evaluate(&model, &x, &y).loss;
    assert!(last < 0.05 * first, "{first} -> {last}");
}

/// `TrainStep` in the layer-wise mode: the bits of the full step (with per-tensor weight decay
/// and learning rates, which an `EmbeddedStep` has no room for), and only the largest layer's
/// gradient buffer.
#[test]
fn a_layerwise_train_step_gives_the_bits_of_the_full_one() {
    let rule = torch::AdamW::default().with_lr(0.01);
    fn config<U: UpdateMode>() -> Config<U> {
        Config::new()
            .weight_decay(WeightDecay::Decoupled(0.05))
            .clip_tensor_norm(1.0)
    }
    let mut a = Deeper::init(Seed(4));
    let mut b = Deeper::init(Seed(4));
    let mut full = TrainStep::<Deeper, _, 8>::with_config(&a, rule, config());
    let mut layerwise = TrainStep::<Deeper, _, 8, Fused>::with_config(&b, rule, config());
    full.optimizer_mut()
        .set_tensor_weight_decay(1, 0.0)
        .unwrap();
    layerwise
        .optimizer_mut()
        .set_tensor_weight_decay(1, 0.0)
        .unwrap();
    full.optimizer_mut()
        .set_tensor_rule(4, rule.with_lr(0.1))
        .unwrap();
    layerwise
        .optimizer_mut()
        .set_tensor_rule(4, rule.with_lr(0.1))
        .unwrap();
    for s in 0..10 {
        let (x, y) = batch(1 + s % 8, 40 + s as u64);
        let la = full.run(&mut a, &x, &y);
        let lb = layerwise.run(&mut b, &x, &y);
        assert_eq!(la.to_bits(), lb.to_bits(), "loss of step {s}");
        assert_eq!(
            bits(a.params()),
            bits(b.params()),
            "parameters after step {s}"
        );
    }
    for slot in <torch::AdamW as Rule>::SLOTS {
        assert_eq!(
            bits(full.optimizer().slot(slot).unwrap()),
            bits(layerwise.optimizer().slot(slot).unwrap())
        );
    }
    type Layerwise = TrainStep<Deeper, torch::AdamW, 8, Fused>;
    assert_eq!(
        Layerwise::BYTES.grads,
        (32 * 16 + 16) * 4,
        "the largest layer's gradient"
    );
    assert_eq!(layerwise.grads().len() * 4, Layerwise::BYTES.grads);
}

/// A sensor-stream classifier for a microcontroller: 32 steps of 3 channels, its parameters
/// inline, within a budget the build checks.
#[fusegraph::model(loss = SoftmaxCrossEntropy, inline, max_bytes = 65536, batch = 8, optimizer = fusegraph::optim::keras::Adam)]
pub struct SensorNet {
    conv: Conv1d<32, 3, 8, 5, 2, Same, Relu>,
    mix: PerPosition<Dense<8, 8, Tanh>, 16>,
    pool: MeanOverTime<16, 8>,
    fc: Dense<8, 4>,
}

/// Values per sample a layer's output and saved values take.
const fn activations<L: Layer>() -> usize {
    L::OUT + L::SAVED
}

#[test]
fn an_inline_sequence_model_counts_its_activations_over_time_and_trains_from_an_arena() {
    type Conv = Conv1d<32, 3, 8, 5, 2, Same, Relu>;
    type Mix = PerPosition<Dense<8, 8, Tanh>, 16>;
    type Pool = MeanOverTime<16, 8>;
    type Fc = Dense<8, 4>;
    assert_eq!(
        (Conv::OUT, Mix::OUT),
        (16 * 8, 16 * 8),
        "every position counts"
    );
    assert_eq!(
        <SensorNet as Model>::ACTIVATIONS,
        activations::<Conv>() + activations::<Mix>() + activations::<Pool>() + activations::<Fc>()
    );
    assert_eq!(
        <SensorNet as Model>::SCRATCH_PER_SAMPLE,
        16 * 5 * 3,
        "the convolution's patches"
    );
    let bytes = SensorNet::BUDGET_BYTES;
    assert_eq!(
        bytes,
        fusegraph::Bytes::of::<SensorNet, keras::Adam>(8, false)
    );
    assert_eq!(bytes.params, std::mem::size_of::<SensorNet>());
    assert_eq!(bytes.params, (5 * 3 * 8 + 8 + 8 * 8 + 8 + 8 * 4 + 4) * 4);
    const { assert!(SensorNet::BUDGET_BYTES.total() <= 65536) };

    type Arena = EmbeddedStep<'static, SensorNet, keras::Adam, 8, Full>;
    assert_eq!(Arena::BYTES, bytes);
    let mut arena = vec![0.0; Arena::FLOATS];
    let mut model = SensorNet::init(Seed(8));
    let rule = keras::Adam::default().with_lr(0.02);
    let mut step = EmbeddedStep::<SensorNet, _, 8, Full>::new(&model, rule, &mut arena).unwrap();
    let mut rng = Rng::new(Seed(9));
    let x: Vec<f32> = (0..8 * 32 * 3).map(|_| rng.normal()).collect();
    let y: Vec<u32> = (0..8).map(|_| rng.below(4)).collect();
    let first = step.evaluate(&model, &x, &y).loss;
    for _ in 0..60 {
        step.run(&mut model, &x, &y);
    }
    let last = step.evaluate(&model, &x, &y).loss;
    assert!(last < 0.5 * first, "{first} -> {last}");
}

/// Token ids to a tag of 4 classes at each of 6 positions, stored inline.
#[fusegraph::model(loss = SequenceCrossEntropy<4>, input = u32, inline)]
pub struct InlineTagger {
    tok: Embedding<20, 4, 6, 0>,
    pos: PositionalEmbedding<6, 4, 6>,
    head: PerPosition<Dense<4, 4>, 6>,
}

#[test]
fn a_token_model_reads_its_ids_where_they_are_and_trains_from_an_arena() {
    type Tok = Embedding<20, 4, 6, 0>;
    type Pos = PositionalEmbedding<6, 4, 6>;
    type Head = PerPosition<Dense<4, 4>, 6>;
    assert_eq!(
        <InlineTagger as Model>::ACTIVATIONS,
        activations::<Tok>() + activations::<Pos>() + activations::<Head>(),
        "no copy of the ids beside the activations"
    );
    type Arena<'a> = EmbeddedStep<'a, InlineTagger, keras::Adam, 4>;
    let mut arena = vec![0.0; Arena::FLOATS];
    let mut model = InlineTagger::init(Seed(3));
    let mut twin = InlineTagger::init(Seed(3));
    let rule = keras::Adam::default().with_lr(0.05);
    let mut embedded = Arena::new(&model, rule, &mut arena).unwrap();
    let mut step = TrainStep::<InlineTagger, keras::Adam, 4>::new(&twin, rule);
    let mut rng = Rng::new(Seed(4));
    let ids: Vec<u32> = (0..4 * 6).map(|_| rng.below(20)).collect();
    let tags: Vec<u32> = (0..4 * 6).map(|_| rng.below(4)).collect();
    let first = embedded.evaluate(&model, &ids, &tags).loss;
    for _ in 0..20 {
        let loss = embedded.run(&mut model, &ids, &tags);
        assert_eq!(loss.to_bits(), step.run(&mut twin, &ids, &tags).to_bits());
    }
    assert_eq!(bits(model.params()), bits(twin.params()));
    let last = embedded.evaluate(&model, &ids, &tags).loss;
    assert!(last < 0.5 * first, "{first} -> {last}");
}
