//! A train step allocates nothing: a counting global allocator sees no allocation during
//! optimizer steps and model train steps, whatever options are folded into the pass, with every
//! layer kind, frozen tensors among them, serial or across rayon; nor does the Trainer's loop
//! after its first epoch, padded token sequences included, nor gradient accumulation.

use fusegraph::fit::{Control, DatasetOf, EpochLog, FitState, Hook, TerminateOnNan};
use fusegraph::loss::IGNORE;
use fusegraph::optim::{
    keras, torch, Config, Ema, NormClip, Optimizer, Rule, Schedule, WeightDecay,
};
use fusegraph::optim::{Full, Fused, Storage, UpdateMode};
use fusegraph::prelude::{
    model, AvgPool2d, BatchNorm, BiGru, CausalSelfAttention, Conv1d, Conv2d, Dataset, Dense,
    Dropout, EarlyStopping, Embedding, FitOptions, Flatten, Gelu, Gru, LayerNorm, Lstm, MaxPool2d,
    MeanOverTime, Metric, Model, Monitor, PerPosition, PositionalEmbedding, Relu, Same, Seed,
    Sequence, SequenceCrossEntropy, SoftmaxCrossEntropy, TrainStep, Trainer, Valid, Verbose,
};
use fusegraph::train::{EmbeddedStep, Inputs, Padded, Step};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

mod common;

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

std::thread_local! {
    /// Set on the threads whose allocations count: the test's own and its pools' workers, not
    /// the test harness's main thread, which prints while the test runs.
    static TRACKED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// The allocations of this thread alone.
    static HERE: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

fn count() {
    if TRACKED.with(|t| t.get()) {
        ALLOCATIONS.fetch_add(1, Ordering::SeqCst);
        HERE.with(|n| n.set(n.get() + 1));
    }
}

fn track_this_thread() {
    TRACKED.with(|t| t.set(true));
}

/// A pool whose worker threads count their allocations too.
fn tracked_pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .start_handler(|_| track_this_thread())
        .build()
        .unwrap()
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations_during_steps<R: Rule>(rule: R, lens: &[usize], config: Config) -> usize {
    let n: usize = lens.iter().sum();
    let mut opt = Optimizer::with_config(rule, lens, config);
    opt.set_tensor_weight_decay(0, 0.0).unwrap();
    let mut p = vec![0.5_f32; n];
    let g: Vec<f32> = (0..n).map(|i| (i % 7) as f32 - 3.0).collect();
    opt.step(&mut p, &g);
    let before = ALLOCATIONS.load(Ordering::SeqCst);
    for _ in 0..5 {
        opt.step(&mut p, &g);
    }
    ALLOCATIONS.load(Ordering::SeqCst) - before
}

/// One test, so that no other test allocates while this one counts.
#[test]
fn steps_do_not_allocate() {
    track_this_thread();
    // One pool for the whole test: a pool's threads exiting would allocate in a later window.
    let pool = tracked_pool(2);
    // Every worker has started (and allocated what a worker allocates once) before counting.
    pool.broadcast(|_| ());
    optimizer_steps_do_not_allocate(&pool);
    train_steps_do_not_allocate(&pool);
    // The pool's workers are idle from here on, and when they fall asleep (the first time, a
    // worker may allocate) is theirs to choose, not a step's: they stop counting.
    pool.broadcast(|_| TRACKED.with(|t| t.set(false)));
    fit_loops_do_not_allocate_after_the_first_epoch();
    embedded_steps_do_not_allocate();
    accumulated_steps_do_not_allocate();
}

/// Gradient accumulation (a data-parallel step on one process) over 4 shards of 2 and over 6
/// of 2, the last batch partial (an empty shard), allocates nothing after its first step.
fn accumulated_steps_do_not_allocate() {
    use fusegraph::distributed::{DataParallel, Shards, Solo};
    let (x, y) = batch::<WideMlp, 12>();
    for (shards, samples) in [(4, 8), (6, 11)] {
        let mut model = WideMlp::init(Seed(4));
        let mut step = TrainStep::<WideMlp, keras::Adam, 2>::new(&model, keras::Adam::default());
        let mut dp = DataParallel::new(Solo, Shards::new(shards, 2)).unwrap();
        let (x, y) = (&x[..samples * WideMlp::IN], &y[..samples]);
        dp.run(&mut model, &mut step, x, y);
        let before = ALLOCATIONS.load(Ordering::SeqCst);
        for _ in 0..3 {
            dp.run(&mut model, &mut step, x, y);
            std::hint::black_box(dp.shard(0));
        }
        let counted = ALLOCATIONS.load(Ordering::SeqCst) - before;
        assert_eq!(
            counted, 0,
            "{counted} allocations in accumulated steps of {shards} shards"
        );
    }
}

fn optimizer_steps_do_not_allocate(pool: &rayon::ThreadPool) {
    let full = Config::default()
        .clip_value(1.0)
        .clip_norm(NormClip::Global(2.0))
        .weight_decay(WeightDecay::Decoupled(0.01))
        .ema(Ema {
            momentum: 0.99,
            overwrite_every: 3,
        })
        .schedule(Schedule::cosine(0.01, 100, 0.0).with_warmup(2, 0.0));
    let cases: Vec<(&str, usize)> = vec![
        (
            "keras adam",
            allocations_during_steps(keras::Adam::default(), &[100, 7], Config::default()),
        ),
        (
            "keras adam, all options",
            allocations_during_steps(keras::Adam::default(), &[100, 7], full),
        ),
        (
            "keras nadam",
            allocations_during_steps(keras::Nadam::default(), &[33], full),
        ),
        (
            "torch sgd, per-tensor norm, L2",
            allocations_during_steps(
                torch::SgdMomentum::default(),
                &[10, 20, 30],
                Config::default()
                    .clip_norm(NormClip::PerTensor(1.0))
                    .weight_decay(WeightDecay::L2(0.1)),
            ),
        ),
        (
            "parallel adam",
            pool.install(|| {
                allocations_during_steps(
                    keras::Adam::default(),
                    &[3 << 20, 5],
                    Config::default().clip_norm(NormClip::Global(1.0)),
                )
            }),
        ),
    ];
    for (name, count) in &cases {
        assert_eq!(*count, 0, "{name}: {count} allocations in 5 steps");
    }
}

/// Every layer kind in one model, trained with dropout and batch statistics.
#[model(loss = SoftmaxCrossEntropy)]
pub struct Everything {
    conv: Conv2d<8, 8, 2, 4, 3, 3, 1, Same, Relu>,
    pool: MaxPool2d<8, 8, 4, 2>,
    avg: AvgPool2d<4, 4, 4, 2>,
    flat: Flatten<16>,
    norm: BatchNorm<16>,
    fc1: Dense<16, 32, Relu>,
    drop: Dropout<32, 250>,
    ln: LayerNorm<32>,
    fc2: Dense<32, 10>,
}

/// Every sequence layer in one model: convolutions over time, layers at every position, the
/// mean over time.
#[model(loss = SoftmaxCrossEntropy)]
pub struct SequenceLayers {
    conv: Conv1d<16, 3, 8, 5, 1, Same, Relu>,
    strided: Conv1d<16, 8, 8, 3, 2, Valid, Relu>,
    proj: PerPosition<Dense<8, 8, Gelu>, 7>,
    norm: PerPosition<LayerNorm<8>, 7>,
    pool: MeanOverTime<7, 8>,
    fc: Dense<8, 10>,
}

/// A GRU's every hidden state read by a two-layer LSTM and a classifier.
#[model(loss = SoftmaxCrossEntropy)]
pub struct Recurrences {
    gru: Gru<8, 4, 16, 1, Sequence>,
    lstm: Lstm<8, 16, 12, 2>,
    fc: Dense<12, 10>,
}

/// A GRU whose recurrent weight gradient is split across the pool at a batch of 32.
#[model(loss = SoftmaxCrossEntropy)]
pub struct WideGru {
    gru: Gru<32, 16, 64>,
    fc: Dense<64, 10>,
}

/// A packed bidirectional GRU's every hidden state read by a packed LSTM and a classifier.
#[model(loss = SoftmaxCrossEntropy)]
pub struct PackedRecurrences {
    gru: BiGru<8, 4, 16, 2, Sequence>,
    lstm: Lstm<8, 32, 12>,
    fc: Dense<12, 10>,
}

/// A bidirectional GRU whose recurrence is split across the pool at a batch of 32.
#[model(loss = SoftmaxCrossEntropy)]
pub struct WideBiGru {
    gru: BiGru<32, 16, 64>,
    fc: Dense<128, 10>,
}

/// Allocations in train steps, predictions and input gradients of a recurrent model on padded
/// batches (lengths from 1 to `M::STEPS`), after the first step.
fn allocations_during_padded_steps<
    M: fusegraph::Model<Loss = SoftmaxCrossEntropy, Input = f32>,
    const B: usize,
>(
    mut model: M,
) -> usize {
    let (x, y) = batch::<M, B>();
    let lengths: Vec<u32> = (0..B).map(|b| 1 + (b * 5 % M::STEPS) as u32).collect();
    let mut step = TrainStep::<M, keras::Adam, B>::new(&model, keras::Adam::default());
    let padded = (
        &Padded::new(&x, &lengths),
        &Padded::new(&x[..M::IN], &lengths[..1]),
    );
    allocations_in_rounds(&mut step, &mut model, padded, &y)
}

/// A frozen convolutional backbone, a normalization whose scale is frozen and a layer whose
/// biases alone train, under a trained head.
#[model(loss = SoftmaxCrossEntropy)]
pub struct FineTuned {
    #[frozen]
    conv: Conv2d<8, 8, 2, 4, 3, 3, 1, Same, Relu>,
    pool: MaxPool2d<8, 8, 4, 2>,
    flat: Flatten<64>,
    #[frozen(gamma)]
    norm: LayerNorm<64>,
    #[frozen(weight)]
    fc1: Dense<64, 32, Relu>,
    fc2: Dense<32, 10>,
}

/// A wide MLP whose matrix products are split across the pool.
#[model(loss = SoftmaxCrossEntropy)]
pub struct WideMlp {
    fc1: Dense<784, 256, Relu>,
    fc2: Dense<256, 10>,
}

fn allocations_during_train_steps<
    M: fusegraph::Model<Loss = SoftmaxCrossEntropy, Input = f32>,
    const B: usize,
>(
    mut model: M,
) -> usize {
    let (x, y) = batch::<M, B>();
    let mut step = TrainStep::<M, keras::Adam, B>::with_config(
        &model,
        keras::Adam::default(),
        Config::default().clip_norm(NormClip::Global(1.0)),
    );
    allocations_in_rounds(&mut step, &mut model, (x.as_slice(), &x[..M::IN]), &y)
}

/// Allocations in train steps of `M` with a tensor-wise rule `R` (reductions, row and column
/// statistics, Newton-Schulz on the GEMM) and value clipping (a transformed gradient).
fn allocations_during_tensor_wise_steps<
    M: fusegraph::Model<Loss = SoftmaxCrossEntropy, Input = f32>,
    R: Rule,
    const B: usize,
>(
    mut model: M,
    rule: R,
) -> usize {
    let (x, y) = batch::<M, B>();
    let config = Config::default().clip_value(1.0);
    let mut step = TrainStep::<M, R, B>::with_config(&model, rule, config);
    allocations_in_rounds(&mut step, &mut model, (x.as_slice(), &x[..M::IN]), &y)
}

/// A batch of `B` samples of `M` and their labels.
fn batch<M: fusegraph::Model, const B: usize>() -> (Vec<f32>, Vec<u32>) {
    let x: Vec<f32> = (0..B * M::IN)
        .map(|i| ((i * 37) % 101) as f32 / 50.0 - 1.0)
        .collect();
    (x, (0..B as u32).map(|i| i % 10).collect())
}

/// Allocations in three rounds of train steps on the batch `x` and on the one sample `one`,
/// input gradients and predictions, after a first step.
fn allocations_in_rounds<M, R: Rule, const B: usize, X, One>(
    step: &mut TrainStep<M, R, B>,
    model: &mut M,
    (x, one): (&X, &One),
    y: &[u32],
) -> usize
where
    M: fusegraph::Model<Loss = SoftmaxCrossEntropy, Input = f32>,
    X: ?Sized + Inputs<f32>,
    One: ?Sized + Inputs<f32>,
{
    step.run(model, x, y);
    let before = ALLOCATIONS.load(Ordering::SeqCst);
    for _ in 0..3 {
        step.run(model, x, y);
        step.run(model, one, &y[..1]);
        std::hint::black_box(step.input_gradient(model, x));
        std::hint::black_box(step.predict(model, x));
    }
    ALLOCATIONS.load(Ordering::SeqCst) - before
}

/// A pre-LayerNorm transformer block over token ids, with a padding id.
#[model(loss = SequenceCrossEntropy<16>, input = u32, graph(
    e = pos(tok(x)),
    a = attn(ln1(e)) + e,
    m = fc2(fc1(ln2(a))) + a,
    logits = head(ln_f(m))
))]
pub struct TokenBlock {
    tok: Embedding<16, 8, 6, 0>,
    pos: PositionalEmbedding<8, 8, 6>,
    ln1: PerPosition<LayerNorm<8>, 6>,
    attn: CausalSelfAttention<6, 8, 2>,
    ln2: PerPosition<LayerNorm<8>, 6>,
    fc1: PerPosition<Dense<8, 32, Gelu>, 6>,
    fc2: PerPosition<Dense<32, 8>, 6>,
    ln_f: PerPosition<LayerNorm<8>, 6>,
    head: PerPosition<Dense<8, 16>, 6>,
}

/// Allocations in train steps, predictions and output gradients of a token model, after the
/// first step.
fn allocations_during_token_steps() -> usize {
    let mut model = TokenBlock::init(Seed(5));
    let x: Vec<u32> = (0..8 * 6).map(|i| (i * 5 % 16) as u32).collect();
    let y: Vec<u32> = (0..8 * 6).map(|i| (i * 3 % 16) as u32).collect();
    let mut step = TrainStep::<TokenBlock, keras::Adam, 8>::new(&model, keras::Adam::default());
    step.run(&mut model, &x, &y);
    let before = ALLOCATIONS.load(Ordering::SeqCst);
    for _ in 0..3 {
        step.run(&mut model, &x, &y);
        std::hint::black_box(step.predict(&model, &x[..6]));
        std::hint::black_box(step.output_gradients(&model, &x));
    }
    ALLOCATIONS.load(Ordering::SeqCst) - before
}

/// Allocations in train steps, predictions and output gradients of a token model on padded
/// batches (lengths from 1 to 6, the padded targets ignored), after the first step, on the
/// threads of `pool`.
fn allocations_during_padded_token_steps(pool: &rayon::ThreadPool) -> usize {
    let mut model = TokenBlock::init(Seed(6));
    let lengths: Vec<u32> = (0..8).map(|b| 1 + (b * 5 % 6) as u32).collect();
    let real = |i: usize| i % 6 < lengths[i / 6] as usize;
    let x: Vec<u32> = (0..8 * 6)
        .map(|i| if real(i) { (i * 5 % 15 + 1) as u32 } else { 0 })
        .collect();
    let y: Vec<u32> = (0..8 * 6)
        .map(|i| if real(i) { (i * 3 % 16) as u32 } else { IGNORE })
        .collect();
    let padded = fusegraph::train::Padded::new(&x, &lengths);
    let mut step = TrainStep::<TokenBlock, keras::Adam, 8>::new(&model, keras::Adam::default());
    pool.install(|| {
        step.run(&mut model, &padded, &y);
        let before = ALLOCATIONS.load(Ordering::SeqCst);
        for _ in 0..3 {
            step.run(&mut model, &padded, &y);
            std::hint::black_box(step.evaluate(&model, &padded, &y));
            std::hint::black_box(step.output_gradients(&model, &padded));
        }
        ALLOCATIONS.load(Ordering::SeqCst) - before
    })
}

fn train_steps_do_not_allocate(pool: &rayon::ThreadPool) {
    let tokens = allocations_during_token_steps();
    assert_eq!(tokens, 0, "{tokens} allocations in steps of a token model");
    let padded = allocations_during_padded_token_steps(pool);
    assert_eq!(
        padded, 0,
        "{padded} allocations in steps of a token model on padded batches"
    );
    let serial = allocations_during_train_steps::<_, 8>(Everything::init(Seed(1)));
    assert_eq!(
        serial, 0,
        "{serial} allocations in train steps of every layer kind"
    );
    let frozen = allocations_during_train_steps::<_, 8>(FineTuned::init(Seed(6)));
    assert_eq!(
        frozen, 0,
        "{frozen} allocations in train steps of a model with frozen tensors"
    );
    let sequence = allocations_during_train_steps::<_, 8>(SequenceLayers::init(Seed(4)));
    assert_eq!(
        sequence, 0,
        "{sequence} allocations in train steps of the sequence layers"
    );
    let parallel = pool.install(|| allocations_during_train_steps::<_, 64>(WideMlp::init(Seed(2))));
    assert_eq!(
        parallel, 0,
        "{parallel} allocations in parallel train steps"
    );
    let recurrent = allocations_during_train_steps::<_, 8>(Recurrences::init(Seed(3)));
    assert_eq!(
        recurrent, 0,
        "{recurrent} allocations in recurrent train steps"
    );
    let split = pool.install(|| allocations_during_train_steps::<_, 32>(WideGru::init(Seed(4))));
    assert_eq!(
        split, 0,
        "{split} allocations in parallel recurrent train steps"
    );
    use fusegraph::optim::optax;
    let muon = pool.install(|| {
        allocations_during_tensor_wise_steps::<_, _, 16>(
            WideMlp::init(Seed(2)),
            keras::Muon::default(),
        )
    });
    assert_eq!(muon, 0, "{muon} allocations in parallel Muon steps");
    let adafactor = allocations_during_tensor_wise_steps::<_, _, 8>(
        Everything::init(Seed(1)),
        torch::Adafactor::default(),
    );
    assert_eq!(
        adafactor, 0,
        "{adafactor} allocations in Adafactor steps of every layer kind"
    );
    let lamb = allocations_during_tensor_wise_steps::<_, _, 8>(
        FineTuned::init(Seed(6)),
        optax::Lamb::default(),
    );
    assert_eq!(
        lamb, 0,
        "{lamb} allocations in LAMB steps with frozen tensors"
    );
    let schedule_free = allocations_during_tensor_wise_steps::<_, _, 8>(
        Everything::init(Seed(1)),
        optax::ScheduleFreeAdamw::default(),
    );
    assert_eq!(
        schedule_free, 0,
        "{schedule_free} allocations in schedule-free steps"
    );
    let packed = allocations_during_padded_steps::<_, 8>(PackedRecurrences::init(Seed(7)));
    assert_eq!(
        packed, 0,
        "{packed} allocations in recurrent train steps on padded batches"
    );
    let wide = pool.install(|| allocations_during_padded_steps::<_, 32>(WideBiGru::init(Seed(8))));
    assert_eq!(
        wide, 0,
        "{wide} allocations in parallel bidirectional train steps on padded batches"
    );
}

/// `samples` samples of model `M`'s features, of 10 classes.
fn features<M: Model<Loss = SoftmaxCrossEntropy, Input = f32>>(samples: usize) -> DatasetOf<M> {
    let x: Vec<f32> = (0..samples * M::IN)
        .map(|i| ((i * 37) % 101) as f32 / 50.0 - 1.0)
        .collect();
    let y: Vec<u32> = (0..samples as u32).map(|i| i % 10).collect();
    Dataset::new(x, y, M::IN).unwrap()
}

/// Ten classes from token ids read as padded sequences of up to 8 steps.
#[model(loss = SoftmaxCrossEntropy, input = u32)]
struct PaddedTokens {
    tok: Embedding<16, 4, 8>,
    pool: common::RealMean<8, 4>,
    fc: Dense<4, 10>,
}

/// `samples` padded sequences of ids for [`PaddedTokens`], with their lengths.
fn padded_tokens(samples: usize) -> DatasetOf<PaddedTokens> {
    let x: Vec<u32> = (0..samples * 8).map(|i| (i * 7 % 16) as u32).collect();
    let y: Vec<u32> = (0..samples as u32).map(|i| i % 10).collect();
    let lengths = (0..samples as u32).map(|i| 1 + i * 3 % 8).collect();
    Dataset::new(x, y, 8)
        .unwrap()
        .with_lengths(lengths)
        .unwrap()
}

/// Allocations counted between the end of the first epoch and the end of the last, in a fit
/// with validation, metrics and callbacks, in a pool of `threads` tracked workers.
fn allocations_after_first_epoch<
    M: fusegraph::Model<Loss = SoftmaxCrossEntropy> + Send,
    const B: usize,
>(
    model: M,
    data: &DatasetOf<M>,
    threads: usize,
) -> usize {
    let step = TrainStep::<M, keras::Adam, B>::new(&model, keras::Adam::default());
    let pool = tracked_pool(threads);
    pool.broadcast(|_| ());
    let mut trainer = Trainer::new(model, step)
        .metrics(&[Metric::Accuracy])
        .verbose(Verbose::Silent)
        .pool(pool);
    let mut marks = [0usize; 2];
    let mut mark = Hook::new(|log: &EpochLog, _: FitState<'_, M, keras::Adam, B>| {
        let now = ALLOCATIONS.load(Ordering::SeqCst);
        marks[usize::from(log.epoch > 1)] = now;
        Ok(Control::Continue)
    });
    let mut stop = EarlyStopping::new(Monitor::ValLoss)
        .patience(100)
        .restore_best_weights();
    trainer
        .fit(
            data,
            &FitOptions::new(4).validation_split(0.25),
            &mut [&mut mark, &mut stop, &mut TerminateOnNan],
        )
        .unwrap();
    marks[1] - marks[0]
}

fn fit_loops_do_not_allocate_after_the_first_epoch() {
    let data = features::<Everything>(44);
    let serial = allocations_after_first_epoch::<_, 8>(Everything::init(Seed(1)), &data, 1);
    assert_eq!(serial, 0, "{serial} allocations in epochs 2-4 of a fit");
    let data = features::<WideMlp>(200);
    let parallel = allocations_after_first_epoch::<_, 64>(WideMlp::init(Seed(2)), &data, 2);
    assert_eq!(
        parallel, 0,
        "{parallel} allocations in epochs 2-4 of a parallel fit"
    );
    let data = padded_tokens(44);
    let padded = allocations_after_first_epoch::<_, 8>(PaddedTokens::init(Seed(3)), &data, 1);
    assert_eq!(
        padded, 0,
        "{padded} allocations in epochs 2-4 of a fit of padded token sequences"
    );
}

/// Allocations in training steps, predictions and input gradients of `step`, over every layer
/// kind. The steps run on this thread alone (no pool), so only this thread's allocations count:
/// the test's pool is idle meanwhile, and an allocation by one of its workers (one was seen,
/// now and then) is not the step's.
fn allocations_in_steps<
    M: Model<Loss = SoftmaxCrossEntropy, Input = f32>,
    U: UpdateMode,
    S: Storage,
>(
    model: &mut M,
    step: &mut Step<M, keras::Adam, 8, U, S>,
) -> usize {
    let x: Vec<f32> = (0..8 * M::IN)
        .map(|i| ((i * 37) % 101) as f32 / 50.0 - 1.0)
        .collect();
    let y: Vec<u32> = (0..8).map(|i| i % 10).collect();
    step.run(model, &x, &y);
    let before = HERE.with(|n| n.get());
    for _ in 0..3 {
        step.run(model, &x, &y);
        step.run(model, &x[..M::IN], &y[..1]);
        std::hint::black_box(step.predict(model, &x));
        std::hint::black_box(step.input_gradient(model, &x));
    }
    HERE.with(|n| n.get()) - before
}

/// Allocations in the steps of an `EmbeddedStep` in mode `U` of the model `init` builds.
fn allocations_in_embedded_steps<
    M: Model<Loss = SoftmaxCrossEntropy, Input = f32>,
    U: UpdateMode,
>(
    init: fn(Seed) -> M,
) -> usize {
    let mut model = init(Seed(3));
    let mut arena = vec![0.0; EmbeddedStep::<M, keras::Adam, 8, U>::FLOATS];
    let mut step =
        EmbeddedStep::<M, _, 8, U>::new(&model, keras::Adam::default(), &mut arena).unwrap();
    allocations_in_steps(&mut model, &mut step)
}

fn embedded_steps_do_not_allocate() {
    let full = allocations_in_embedded_steps::<_, Full>(Everything::init);
    let fused = allocations_in_embedded_steps::<_, Fused>(Everything::init);
    let sequence = (
        allocations_in_embedded_steps::<_, Full>(SequenceLayers::init),
        allocations_in_embedded_steps::<_, Fused>(SequenceLayers::init),
    );
    assert_eq!(
        sequence,
        (0, 0),
        "allocations in embedded steps (full, fused) of the sequence layers"
    );
    let mut model = Everything::init(Seed(3));
    let mut layerwise = TrainStep::<Everything, _, 8, Fused>::new(&model, keras::Adam::default());
    let train_fused = allocations_in_steps(&mut model, &mut layerwise);
    assert_eq!(
        (full, fused, train_fused),
        (0, 0, 0),
        "allocations in embedded steps (full, fused) and a layer-wise TrainStep"
    );
}
