//! Data-parallel training and gradient accumulation: any number of processes that divides the
//! shards gives the bits of one process computing every shard, the global gradient is the sum
//! of the shards' in shard order, dropout follows the global sample order, a resumed run
//! continues with the same bits, and BatchNorm is refused. Processes are threads here, over a
//! communicator of shared memory; `.ci/run` runs the same under `mpirun`.

mod common;

use fusegraph::distributed::{add_shard, Communicator, DataParallel, ShardError, Shards, Solo};
use fusegraph::fit::{History, TrainError};
use fusegraph::optim::keras::{Adam, Nadam};
use fusegraph::optim::Ema;
use fusegraph::prelude::*;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::sync::{Arc, Barrier, Mutex};

/// Three classes from four features, with dropout.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
struct Net {
    fc1: Dense<4, 16, Relu>,
    drop: Dropout<16, 250>,
    fc2: Dense<16, 3>,
}

/// The same with batch statistics.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
struct Normed {
    fc1: Dense<4, 8>,
    bn: BatchNorm<8>,
    fc2: Dense<8, 3>,
}

const B: usize = 8;

/// `size` processes as threads: gathers and broadcasts go through shared memory.
struct ThreadRanks {
    rank: usize,
    size: usize,
    shared: Arc<Shared>,
}

struct Shared {
    barrier: Barrier,
    floats: Mutex<Vec<Vec<f32>>>,
    words: Mutex<Vec<u64>>,
    word_parts: Mutex<Vec<Vec<u64>>>,
}

impl ThreadRanks {
    fn group(size: usize) -> Vec<ThreadRanks> {
        let shared = Arc::new(Shared {
            barrier: Barrier::new(size),
            floats: Mutex::new(vec![Vec::new(); size]),
            words: Mutex::new(Vec::new()),
            word_parts: Mutex::new(vec![Vec::new(); size]),
        });
        (0..size)
            .map(|rank| ThreadRanks {
                rank,
                size,
                shared: Arc::clone(&shared),
            })
            .collect()
    }
}

impl Communicator for ThreadRanks {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn all_gather(&self, mine: &[f32], all: &mut [f32]) {
        self.shared.floats.lock().unwrap()[self.rank] = mine.to_vec();
        self.shared.barrier.wait();
        for (r, part) in all.chunks_exact_mut(mine.len()).enumerate() {
            part.copy_from_slice(&self.shared.floats.lock().unwrap()[r]);
        }
        self.shared.barrier.wait();
    }
    fn all_gather_u64(&self, mine: &[u64], all: &mut [u64]) {
        self.shared.word_parts.lock().unwrap()[self.rank] = mine.to_vec();
        self.shared.barrier.wait();
        for (r, part) in all.chunks_exact_mut(mine.len()).enumerate() {
            part.copy_from_slice(&self.shared.word_parts.lock().unwrap()[r]);
        }
        self.shared.barrier.wait();
    }
    fn all_to_all(&self, send: &[f32], recv: &mut [f32]) {
        self.shared.floats.lock().unwrap()[self.rank] = send.to_vec();
        self.shared.barrier.wait();
        let block = send.len() / self.size;
        let at = self.rank * block..(self.rank + 1) * block;
        for (r, part) in recv.chunks_exact_mut(block).enumerate() {
            part.copy_from_slice(&self.shared.floats.lock().unwrap()[r][at.clone()]);
        }
        self.shared.barrier.wait();
    }
    fn broadcast(&self, values: &mut [f32]) {
        if self.rank == 0 {
            self.shared.floats.lock().unwrap()[0] = values.to_vec();
        }
        self.shared.barrier.wait();
        values.copy_from_slice(&self.shared.floats.lock().unwrap()[0]);
        self.shared.barrier.wait();
    }
    fn broadcast_u64(&self, values: &mut [u64]) {
        if self.rank == 0 {
            *self.shared.words.lock().unwrap() = values.to_vec();
        }
        self.shared.barrier.wait();
        values.copy_from_slice(&self.shared.words.lock().unwrap());
        self.shared.barrier.wait();
    }
    fn abort(&self, code: i32) -> ! {
        panic!("rank {} aborted the job with code {code}", self.rank)
    }
}

/// Three Gaussian blobs in four dimensions, `n` samples.
fn blobs(n: usize) -> Dataset<u32> {
    let mut rng = Rng::new(Seed(9));
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for i in 0..n {
        let c = i % 3;
        for d in 0..4 {
            x.push(if d == c { 2.0 } else { 0.0 } + 0.7 * rng.normal());
        }
        y.push(c as u32);
    }
    Dataset::new(x, y, 4).unwrap()
}

fn trainer() -> Trainer<Net, Adam, B> {
    let model = Net::init(Seed(3));
    let step = TrainStep::new(&model, Adam::default().with_lr(0.01)).with_seed(Seed(5));
    Trainer::new(model, step)
        .metrics(&[Metric::Accuracy])
        .verbose(Verbose::Silent)
        .threads(1)
}

/// What a fit leaves: the bits of the parameters, of Adam's slots and the step counter, and
/// the history.
#[derive(Debug, PartialEq)]
struct Outcome {
    params: Vec<u32>,
    slots: Vec<u32>,
    steps: u64,
    losses: Vec<u32>,
    accuracies: Vec<u32>,
}

fn outcome(t: &Trainer<Net, Adam, B>, history: &History) -> Outcome {
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let opt = t.step().optimizer();
    let slots = Adam::SLOTS
        .iter()
        .flat_map(|s| bits(opt.slot(s).unwrap()))
        .collect();
    Outcome {
        params: bits(t.model().params()),
        slots,
        steps: opt.iterations(),
        losses: history
            .epochs
            .iter()
            .map(|e| e.train.loss.to_bits())
            .collect(),
        accuracies: history
            .epochs
            .iter()
            .map(|e| e.train.accuracy.unwrap().to_bits())
            .collect(),
    }
}

/// 61 samples: the last global batch of 4 shards x 5 is partial, with an empty shard.
const SAMPLES: usize = 61;

fn options(epochs: usize) -> FitOptions<'static, u32> {
    FitOptions::new(epochs).batch_size(5).seed(Seed(2))
}

fn accumulated(shards: usize, epochs: usize) -> Outcome {
    let mut t = trainer().accumulate(shards).unwrap();
    let h = t.fit(&blobs(SAMPLES), &options(epochs), &mut []).unwrap();
    outcome(&t, &h)
}

/// Fits on `ranks` threads; every rank's outcome.
fn on_ranks(ranks: usize, shards: usize, epochs: usize) -> Vec<Outcome> {
    let data = blobs(SAMPLES);
    std::thread::scope(|s| {
        let jobs: Vec<_> = ThreadRanks::group(ranks)
            .into_iter()
            .map(|comm| {
                let data = &data;
                s.spawn(move || {
                    let mut t = trainer().data_parallel(comm, shards).unwrap();
                    let h = t.fit(data, &options(epochs), &mut []).unwrap();
                    outcome(&t, &h)
                })
            })
            .collect();
        jobs.into_iter().map(|j| j.join().unwrap()).collect()
    })
}

#[test]
fn any_number_of_ranks_gives_the_bits_of_one_process_accumulating() {
    let one = accumulated(4, 3);
    assert_eq!(one.steps, 3 * SAMPLES.div_ceil(20) as u64);
    for ranks in [1, 2, 4] {
        for (rank, got) in on_ranks(ranks, 4, 3).iter().enumerate() {
            assert_eq!(got, &one, "rank {rank} of {ranks}");
        }
    }
    // Every count that splits the shards' tree: the powers of two up to 8; 1, 2 and 6 of 6.
    for (shards, counts) in [(8, &[2, 4, 8][..]), (6, &[2, 6][..])] {
        let one = accumulated(shards, 1);
        for ranks in counts {
            for (rank, got) in on_ranks(*ranks, shards, 1).iter().enumerate() {
                assert_eq!(got, &one, "rank {rank} of {ranks}, {shards} shards");
            }
        }
    }
    // The shard count is part of the computation: two shards of 5 are other batches.
    assert_ne!(accumulated(2, 3).params, one.params);
}

#[test]
fn one_shard_on_one_process_is_the_plain_step() {
    let mut plain = trainer();
    let h = plain.fit(&blobs(SAMPLES), &options(2), &mut []).unwrap();
    let plain = outcome(&plain, &h);
    let one = accumulated(1, 2);
    assert_eq!(one.params, plain.params);
    assert_eq!(one.slots, plain.slots);
    assert_eq!(one.steps, plain.steps);
}

#[test]
fn the_update_uses_the_weighted_sum_of_the_shards_in_the_order_of_their_tree() {
    let data = blobs(13);
    let (x, y) = (data.x(), data.y());
    let mut model = Net::init(Seed(3));
    let mut step = TrainStep::<Net, Adam, B>::new(&model, Adam::default()).with_seed(Seed(5));
    let mut want_model = Net::init(Seed(3));
    let mut want_step = TrainStep::<Net, Adam, B>::new(&model, Adam::default());
    // 6 shards of 3: the tree of 6 = 2 x 3 has two nodes of three shards each; the last
    // shard of this batch of 13 is empty.
    let shards = Shards::new(6, 3);
    let mut dp = DataParallel::<Net, Adam, B, Solo>::new(Solo, shards).unwrap();
    let loss = dp.run(&mut model, &mut step, x, y);

    // By hand: each shard's mean gradient from the same weights, weighted by its share of the
    // 13 samples (3/13 ... 1/13), each node's three added in order, then the two nodes.
    // Dropout draws each sample's mask from its global index, so the shards are run with
    // their offsets.
    let mut nodes = vec![vec![0.0; Net::PARAMS]; 2];
    let mut want_loss = 0.0f32;
    for s in 0..5 {
        let at = shards.samples(s, 13);
        let mut m = Net::init(Seed(3));
        let mut st = TrainStep::<Net, Adam, B>::new(&m, Adam::default()).with_seed(Seed(5));
        let (xs, ys) = (&x[at.start * 4..at.end * 4], &y[at.clone()]);
        let l = st.shard_gradients(&mut m, xs, ys, at.start);
        let w = at.len() as f32 / 13.0;
        add_shard(&mut nodes[s / 3], st.grads(), w, s % 3 == 0);
        want_loss = if s == 0 { w * l } else { want_loss + w * l };
    }
    let (first, second) = nodes.split_at_mut(1);
    add_shard(&mut first[0], &second[0], 1.0, false);
    want_step
        .optimizer_mut()
        .step(want_model.params_mut(), &first[0]);
    assert_eq!(loss.to_bits(), want_loss.to_bits());
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(model.params()), bits(want_model.params()));
    assert_eq!((dp.shard(4).samples, dp.shard(5).samples), (1, 0));
    assert_eq!(dp.bytes_sent_per_step(), 0, "one process sends nothing");
}

#[test]
fn two_processes_send_what_a_ring_sends() {
    // 6 shards: 1, 2 or 6 processes. On 2, each sends the other half of its subtree's sum,
    // then its summed half, and its 3 shards' outcomes (5 words each).
    let bytes: Vec<usize> = ThreadRanks::group(2)
        .into_iter()
        .map(|comm| {
            let dp = DataParallel::<Net, Adam, B, _>::new(comm, Shards::new(6, 3)).unwrap();
            assert_eq!(dp.gradient_bytes(), Net::TRAINABLE * 4);
            dp.bytes_sent_per_step()
        })
        .collect();
    let half = Net::TRAINABLE.div_ceil(2) * 4;
    assert_eq!(bytes, [2 * half + 3 * 5 * 8; 2]);
    let three = ThreadRanks::group(3).into_iter().next().unwrap();
    let refused = DataParallel::<Net, Adam, B, _>::new(three, Shards::new(6, 3)).err();
    assert_eq!(
        refused,
        Some(ShardError::Ranks {
            ranks: 3,
            shards: 6
        })
    );
    assert_eq!(
        refused.unwrap().to_string(),
        "3 processes cannot sum the 6 shards of a global batch in the order that gives the \
         same bits on any number of processes: run on 1, 2 or 6 processes, or change the shard \
         count"
    );
}

#[test]
fn batch_statistics_are_refused_with_shards_and_allowed_without() {
    let model = Normed::init(Seed(1));
    let step = TrainStep::<Normed, Adam, B>::new(&model, Adam::default());
    let err = Trainer::new(model, step).accumulate(2).err().unwrap();
    assert!(
        matches!(&err, TrainError::Config(m) if m.contains("BatchNorm")),
        "{err}"
    );
    let model = Normed::init(Seed(1));
    let step = TrainStep::<Normed, Adam, B>::new(&model, Adam::default());
    assert!(Trainer::new(model, step).accumulate(1).is_ok());
    assert_eq!(
        DataParallel::<Net, Adam, B, Solo>::new(Solo, Shards::new(2, 9)).err(),
        Some(ShardError::ShardTooLarge {
            per_shard: 9,
            max: B
        })
    );
    let three = ThreadRanks::group(2).into_iter().next().unwrap();
    assert_eq!(
        DataParallel::<Net, Adam, B, _>::new(three, Shards::new(3, 4)).err(),
        Some(ShardError::Ranks {
            ranks: 2,
            shards: 3
        })
    );
}

#[test]
fn a_resumed_data_parallel_run_continues_with_the_same_bits() {
    let dir = std::env::temp_dir().join(format!("fusegraph-dp-resume-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("dp.safetensors");
    let data = blobs(SAMPLES);
    let run = |epochs: usize, resume: bool, save: bool| -> Vec<Outcome> {
        std::thread::scope(|s| {
            let jobs: Vec<_> = ThreadRanks::group(2)
                .into_iter()
                .map(|comm| {
                    let (data, path) = (&data, &path);
                    s.spawn(move || {
                        let mut t = trainer().data_parallel(comm, 4).unwrap();
                        let first = if resume { t.resume(path).unwrap() } else { 0 };
                        let h = t
                            .fit(data, &options(epochs).initial_epoch(first), &mut [])
                            .unwrap();
                        if save {
                            t.save_checkpoint(path, epochs).unwrap();
                        }
                        outcome(&t, &h)
                    })
                })
                .collect();
            jobs.into_iter().map(|j| j.join().unwrap()).collect()
        })
    };
    let whole = run(3, false, false);
    run(1, false, true);
    let resumed = run(3, true, false);
    for (w, r) in whole.iter().zip(&resumed) {
        assert_eq!(w.params, r.params);
        assert_eq!(w.slots, r.slots);
        assert_eq!(w.steps, r.steps);
        assert_eq!(w.losses[1..], r.losses[..], "epochs 2 and 3");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// One process that keeps what it broadcasts (as rank 0), or, once `replay` is set, receives
/// what it kept (as another rank).
#[derive(Default)]
struct Tape {
    floats: RefCell<VecDeque<Vec<f32>>>,
    words: RefCell<VecDeque<u64>>,
    replay: Cell<bool>,
}

impl Communicator for Tape {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn all_gather(&self, mine: &[f32], all: &mut [f32]) {
        all.copy_from_slice(mine);
    }
    fn all_gather_u64(&self, mine: &[u64], all: &mut [u64]) {
        all.copy_from_slice(mine);
    }
    fn all_to_all(&self, send: &[f32], recv: &mut [f32]) {
        recv.copy_from_slice(send);
    }
    fn broadcast(&self, values: &mut [f32]) {
        let mut tape = self.floats.borrow_mut();
        match self.replay.get() {
            true => values.copy_from_slice(&tape.pop_front().unwrap()),
            false => tape.push_back(values.to_vec()),
        }
    }
    fn broadcast_u64(&self, values: &mut [u64]) {
        let mut tape = self.words.borrow_mut();
        for v in values {
            match self.replay.get() {
                true => *v = tape.pop_front().unwrap(),
                false => tape.push_back(*v),
            }
        }
    }
    fn abort(&self, code: i32) -> ! {
        panic!("aborted with code {code}")
    }
}

/// A model and a step of it with every kind of part: parameters, BatchNorm's statistics,
/// Nadam's slots and carried scalar, the EMA, the step counter and the seed.
fn every_part_step(seed: u64) -> (Normed, TrainStep<Normed, Nadam, B>) {
    let model = Normed::init(Seed(seed));
    let config = Config::default().ema(Ema {
        momentum: 0.9,
        overwrite_every: 0,
    });
    let step = TrainStep::with_config(&model, Nadam::default(), config);
    (model, step)
}

#[test]
fn a_broadcast_sends_every_part_of_the_state() {
    let tape = Tape::default();
    let (mut model, mut step) = every_part_step(1);
    common::mark_every_part(&mut model, &mut step, 1);
    let sender = DataParallel::<Normed, Nadam, B, _>::new(&tape, Shards::new(1, B)).unwrap();
    sender.broadcast(&mut model, &mut step);
    let sent = common::state_bits(&model, &step);
    let (mut other, mut other_step) = every_part_step(2);
    for ((part, a), (_, b)) in sent.iter().zip(&common::state_bits(&other, &other_step)) {
        assert_ne!(a, b, "{part:?} is marked");
    }
    tape.replay.set(true);
    let receiver = DataParallel::<Normed, Nadam, B, _>::new(&tape, Shards::new(1, B)).unwrap();
    receiver.broadcast(&mut other, &mut other_step);
    assert_eq!(common::state_bits(&other, &other_step), sent);
    assert!(tape.floats.borrow().is_empty() && tape.words.borrow().is_empty());
}

/// A tagger over 4 positions of 3 features, 3 classes a position.
#[fusegraph::model(loss = SequenceCrossEntropy<3>)]
struct Tagger {
    fc: PerPosition<Dense<3, 3>, 4>,
}

#[test]
fn ignored_targets_weigh_each_shard_by_its_counted_labels() {
    use fusegraph::loss::IGNORE;
    use fusegraph::optim::torch::Sgd;
    const N: usize = 6;
    let x: Vec<f32> = (0..N * 12)
        .map(|i| ((i * 7 % 11) as f32 - 5.0) / 4.0)
        .collect();
    // The first shard's samples are mostly ignored, the second's not at all.
    let y: Vec<u32> = (0..N * 4)
        .map(|i| match (i / 4 < 3, i % 4) {
            (true, 1..) => IGNORE,
            _ => (i % 3) as u32,
        })
        .collect();
    let mut whole = Tagger::init(Seed(2));
    let mut step = TrainStep::<Tagger, Sgd, N>::new(&whole, Sgd::default().with_lr(1.0));
    let want_loss = step.gradients(&mut whole, &x, &y);
    let want = step.grads().to_vec();

    // With a learning rate of 1, plain SGD moves each weight by minus its gradient.
    let mut model = Tagger::init(Seed(2));
    let before = model.params().to_vec();
    let mut shard_step = TrainStep::<Tagger, Sgd, 3>::new(&model, Sgd::default().with_lr(1.0));
    let mut dp = DataParallel::<Tagger, Sgd, 3, Solo>::new(Solo, Shards::new(2, 3)).unwrap();
    let loss = dp.run(&mut model, &mut shard_step, &x, &y);
    assert!(
        (loss - want_loss).abs() <= 1e-6 * want_loss.abs(),
        "{loss} {want_loss}"
    );
    for (i, g) in want.iter().enumerate() {
        let got = before[i] - model.params()[i];
        assert!((got - g).abs() <= 1e-6, "gradient {i}: {got} against {g}");
    }
    assert!(want.iter().any(|g| g.abs() > 1e-2));
}

/// Fits on two thread ranks that were given `data` and `seed` each, with a minute to end:
/// what each rank's thread ended with (its panic's message when it aborted the job).
fn fit_two_ranks(data: [Dataset<u32>; 2], seed: [u64; 2]) -> Vec<Result<(), String>> {
    let (done, ended) = std::sync::mpsc::channel();
    for ((comm, data), seed) in ThreadRanks::group(2).into_iter().zip(data).zip(seed) {
        let done = done.clone();
        std::thread::spawn(move || {
            let fitted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let mut t = trainer().data_parallel(comm, 4).unwrap();
                let options = options(1).seed(Seed(seed));
                t.fit(&data, &options, &mut []).map(|_| ())
            }));
            let ended = match fitted {
                Ok(fitted) => fitted.map_err(|e| e.to_string()),
                Err(panic) => Err(panic.downcast_ref::<String>().cloned().unwrap_or_default()),
            };
            done.send(ended).unwrap();
        });
    }
    (0..2)
        .map(|_| {
            let wait = std::time::Duration::from_secs(60);
            ended.recv_timeout(wait).expect("a rank hangs")
        })
        .collect()
}

#[test]
fn processes_that_disagree_stop_before_the_first_step_instead_of_hanging() {
    let data = blobs(SAMPLES);
    let aborted = |ended: Vec<Result<(), String>>| {
        let mut ended: Vec<String> = ended.into_iter().map(|e| e.unwrap_err()).collect();
        ended.sort();
        assert_eq!(
            ended,
            [
                "rank 0 aborted the job with code 1",
                "rank 1 aborted the job with code 1"
            ]
        );
    };
    // The same: both train.
    let same = fit_two_ranks([data.clone(), data.clone()], [1, 1]);
    assert_eq!(same, [Ok(()), Ok(())]);
    // Fewer samples on one: a collective on a data set of another length would hang.
    let (shorter, _) = data.split_tail(0.1);
    aborted(fit_two_ranks([data.clone(), shorter], [1, 1]));
    // One label changed, or another seed: both would train, on different batches.
    let mut relabelled = data.clone();
    let (x, mut y) = (relabelled.x().to_vec(), relabelled.y().to_vec());
    y[7] = (y[7] + 1) % 3;
    relabelled = Dataset::new(x, y, 4).unwrap();
    aborted(fit_two_ranks([data.clone(), relabelled], [1, 1]));
    aborted(fit_two_ranks([data.clone(), data], [1, 2]));
}

#[test]
fn small_buckets_sent_during_the_backward_pass_give_the_same_bits() {
    let data = blobs(SAMPLES);
    let (x, y) = (&data.x()[..32 * 4], &data.y()[..32]);
    let steps = |comm: Box<dyn Communicator + Send>, bucket: usize| {
        let mut model = Net::init(Seed(3));
        let mut step = TrainStep::<Net, Adam, B>::new(&model, Adam::default()).with_seed(Seed(5));
        let mut dp = DataParallel::<Net, Adam, B, _>::new(comm, Shards::new(4, 8))
            .unwrap()
            .with_bucket(bucket);
        let losses: Vec<u32> = (0..3)
            .map(|_| dp.run(&mut model, &mut step, x, y).to_bits())
            .collect();
        let params: Vec<u32> = model.params().iter().map(|v| v.to_bits()).collect();
        (losses, params)
    };
    let one = steps(Box::new(Solo), 7);
    // Net's 131 gradient values in buckets of 7 (19 buckets, cut across its layers), of 64, and
    // in one, on 2 and 4 processes.
    for bucket in [7, 64, 1 << 16] {
        for ranks in [2, 4] {
            let got: Vec<_> = std::thread::scope(|s| {
                let jobs: Vec<_> = ThreadRanks::group(ranks)
                    .into_iter()
                    .map(|comm| s.spawn(move || steps(Box::new(comm), bucket)))
                    .collect();
                jobs.into_iter().map(|j| j.join().unwrap()).collect()
            });
            for (rank, got) in got.iter().enumerate() {
                assert_eq!(got, &one, "rank {rank} of {ranks}, buckets of {bucket}");
            }
        }
    }
}

/// A tensor-wise rule (Muon: Newton-Schulz on every matrix, AdamW on the biases) over data
/// parallel ranks gives the bits of one process accumulating the same shards: each rank updates
/// every tensor whole from the same summed gradients.
#[test]
fn muon_on_several_ranks_gives_the_bits_of_one_process() {
    use fusegraph::optim::keras::Muon;
    fn muon_trainer() -> Trainer<Net, Muon, B> {
        let model = Net::init(Seed(3));
        let step = TrainStep::new(&model, Muon::default().with_lr(0.02)).with_seed(Seed(5));
        Trainer::new(model, step)
            .verbose(Verbose::Silent)
            .threads(1)
    }
    let data = blobs(SAMPLES);
    let mut one = muon_trainer().accumulate(4).unwrap();
    one.fit(&data, &options(2), &mut []).unwrap();
    let one = bits(one.model().params());
    let ranks: Vec<Vec<u32>> = std::thread::scope(|s| {
        let jobs: Vec<_> = ThreadRanks::group(2)
            .into_iter()
            .map(|comm| {
                let data = &data;
                s.spawn(move || {
                    let mut t = muon_trainer().data_parallel(comm, 4).unwrap();
                    t.fit(data, &options(2), &mut []).unwrap();
                    bits(t.model().params())
                })
            })
            .collect();
        jobs.into_iter().map(|j| j.join().unwrap()).collect()
    });
    for (rank, got) in ranks.iter().enumerate() {
        assert_eq!(got, &one, "rank {rank} of 2");
    }
    assert_ne!(one, bits(Net::init(Seed(3)).params()));
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}
