//! [`DataParallel`]: one train step over a global batch whose shards are computed by the
//! processes of a [`Communicator`] and summed in the order of their [`Tree`], the same bits on
//! every process and for every process count the tree allows.

use super::communicator::Communicator;
use super::exchange::{Exchange, BUCKET};
use super::shards::Shards;
use super::tree::{Leaf, Tree, TreeFold};
use crate::loss::{Loss, TargetValue, Targets};
use crate::optim::{PartMut, Rule};
use crate::train::batch::{self, expect};
use crate::train::step::{optimizer_step, update_or_skip};
use crate::train::{Inputs, Model, Padded, StepOutcome, Target, TrainStep};
use alloc::boxed::Box;
use alloc::vec;
use core::fmt;
use core::marker::PhantomData;
use core::ops::Range;

/// Why a data-parallel step cannot be built for a model, step and job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShardError {
    /// The number of processes cannot split the shards' [tree](DataParallel): it is not 1
    /// or a product of the first prime factors of the shard count (in increasing order).
    Ranks {
        /// The processes of the job.
        ranks: usize,
        /// The shards of a global batch.
        shards: usize,
    },
    /// A shard holds more samples than the train step's batch.
    ShardTooLarge {
        /// The samples of a shard.
        per_shard: usize,
        /// The train step's maximum batch.
        max: usize,
    },
    /// The model has batch statistics (BatchNorm), which are computed per shard and not
    /// combined across shards: with more than one shard they would differ from the whole
    /// batch's.
    BatchStatistics,
}

impl fmt::Display for ShardError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ShardError::Ranks { ranks, shards } => {
                write!(
                    f,
                    "{ranks} processes cannot sum the {shards} shards of a global batch in the \
                     order that gives the same bits on any number of processes: run on "
                )?;
                let tree = Tree::new(shards);
                let last = tree.process_counts().count() - 1;
                for (i, n) in tree.process_counts().enumerate() {
                    let sep = match i {
                        0 => "",
                        _ if i == last => " or ",
                        _ => ", ",
                    };
                    write!(f, "{sep}{n}")?;
                }
                f.write_str(" processes, or change the shard count")
            }
            ShardError::ShardTooLarge { per_shard, max } => write!(
                f,
                "a shard of {per_shard} samples exceeds the train step's batch of {max}: use \
                 shards of at most {max} samples, or more of them"
            ),
            ShardError::BatchStatistics => f.write_str(
                "this model has batch statistics (BatchNorm), which are not combined across \
                 shards yet: train it with one shard on one process, or without BatchNorm",
            ),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for ShardError {}

/// What one shard of the last global batch gave, the same on every process: what the
/// loss and the metrics of a fit need of it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ShardOutcome {
    /// Its samples (0 for a shard past the end of a partial global batch).
    pub samples: usize,
    /// Its mean loss.
    pub loss: f32,
    /// Its samples (or positions) predicted right ([`Loss::correct`]), if the loss says.
    pub correct: Option<usize>,
    /// The sum of `|output - target|` over its outputs (for real-valued targets).
    pub absolute_error: f64,
    /// The sum of `(output - target)^2` over its outputs (for real-valued targets).
    pub squared_error: f64,
}

/// The words of a [`ShardOutcome`] as the processes exchange it.
const OUTCOME_WORDS: usize = 5;

impl ShardOutcome {
    /// The outcome of a batch: its mean `loss` and the model's outputs `out` (`width` per
    /// sample) against the targets `y`. The errors add, in `f64` and in order, each output
    /// against the target beside it.
    pub fn measure<L: Loss>(loss: f32, out: &[f32], y: &[L::Target], width: usize) -> Self {
        Self::measure_some::<L>(loss, out, y, width, (true, true))
    }

    /// [`measure`](Self::measure), with the correct count only if `correct` (else `None`) and
    /// the errors only if `errors` (else 0).
    pub(crate) fn measure_some<L: Loss>(
        loss: f32,
        out: &[f32],
        y: &[L::Target],
        width: usize,
        (correct, errors): (bool, bool),
    ) -> Self {
        let (mut absolute_error, mut squared_error) = (0.0, 0.0);
        if errors {
            for (&o, t) in out.iter().zip(y) {
                let d = f64::from(o) - f64::from(t.value().unwrap_or(0.0));
                absolute_error += if d < 0.0 { -d } else { d };
                squared_error += d * d;
            }
        }
        ShardOutcome {
            samples: out.len() / width.max(1),
            loss,
            correct: if correct {
                L::correct(out, y, width)
            } else {
                None
            },
            absolute_error,
            squared_error,
        }
    }

    /// As words: samples, loss bits, correct (`u64::MAX` for none), the errors' bits.
    fn to_words(self) -> [u64; OUTCOME_WORDS] {
        [
            self.samples as u64,
            u64::from(self.loss.to_bits()),
            self.correct.map_or(u64::MAX, |c| c as u64),
            self.absolute_error.to_bits(),
            self.squared_error.to_bits(),
        ]
    }

    /// From [`to_words`](Self::to_words).
    fn from_words(w: &[u64]) -> Self {
        ShardOutcome {
            samples: w[0] as usize,
            loss: f32::from_bits(w[1] as u32),
            correct: (w[2] != u64::MAX).then_some(w[2] as usize),
            absolute_error: f64::from_bits(w[3]),
            squared_error: f64::from_bits(w[4]),
        }
    }
}

/// A data-parallel train step: each global batch is cut into [`Shards`]; every process
/// computes the mean gradients of its own shards with a [`TrainStep`] and sums them, weighted
/// by their share of what the loss averages (their samples, or their class labels that are
/// not [`IGNORE`](crate::loss::IGNORE)), in the order of the shards' tree; the processes then
/// sum their subtrees in the tree's top levels, each process one piece of the gradient: an
/// all-to-all exchange of pieces (a reduce-scatter), then an all-gather of the summed pieces,
/// so that each process sends and receives `2 (P - 1) / P` of a gradient per step, as a ring
/// all-reduce does. The exchange goes in buckets ([`with_bucket`](Self::with_bucket)), each
/// leaving as soon as the backward pass of the process's last shard has it whole, while the
/// layers below are still in theirs. Every process then runs the same fused update.
///
/// The tree is fixed by the shard count `S` alone: with `S`'s prime factors in increasing
/// order, the root has as many children as the first, each of those as many as the second,
/// and so on down to the shards; a node adds its children from the first to the last. A job
/// of 1 process, or of a product of the first of those factors (for `S` a power of two, any
/// power of two up to `S`; for 12 shards, 1, 2, 4 or 12 processes), gives each process the
/// shards of one node, and then the parameters and the optimizer's state are the same bits on
/// every process and for every such count, threads and bucket sizes included: a run on 4 ranks
/// can be checked against a run on one. Other counts are refused ([`ShardError::Ranks`]). On
/// [`Solo`](super::Solo) it is gradient accumulation: global batches `count` times larger than
/// the step's.
///
/// The losses and metrics of the shards ([`ShardOutcome`]) travel in one small gather per step.
/// The buffers are allocated once, in [`new`](Self::new).
pub struct DataParallel<M: Model, R: Rule, const B: usize, C: Communicator> {
    comm: C,
    shards: Shards,
    /// This process's subtree of the shards' tree, folded shard by shard.
    own: TreeFold,
    /// The processes' exchange of their subtree sums; `None` in a job of one process.
    exchange: Option<Exchange>,
    /// The global gradient.
    sum: Box<[f32]>,
    /// The outcomes of this process's shards, as words.
    mine: Box<[u64]>,
    /// The outcomes of every shard, in shard order, as words.
    all: Box<[u64]>,
    kinds: PhantomData<fn() -> (M, R)>,
}

impl<M: Model, R: Rule, const B: usize, C: Communicator> DataParallel<M, R, B, C> {
    /// A data-parallel step over `comm`'s processes with global batches cut into `shards`.
    pub fn new(comm: C, shards: Shards) -> Result<Self, ShardError> {
        let ranks = comm.size();
        let tree = Tree::new(shards.count());
        let Some((own, top)) = tree.split(ranks) else {
            return Err(ShardError::Ranks {
                ranks,
                shards: shards.count(),
            });
        };
        if shards.per_shard() > B {
            return Err(ShardError::ShardTooLarge {
                per_shard: shards.per_shard(),
                max: B,
            });
        }
        if M::STATE > 0 && shards.count() > 1 {
            return Err(ShardError::BatchStatistics);
        }
        let own_shards = shards.count() / ranks;
        Ok(DataParallel {
            exchange: (ranks > 1).then(|| Exchange::new(M::TRAINABLE, ranks, &top, BUCKET)),
            comm,
            shards,
            own: TreeFold::new(&own, M::TRAINABLE),
            sum: vec![0.0; M::TRAINABLE].into_boxed_slice(),
            mine: vec![0; own_shards * OUTCOME_WORDS].into_boxed_slice(),
            all: vec![0; shards.count() * OUTCOME_WORDS].into_boxed_slice(),
            kinds: PhantomData,
        })
    }

    /// Exchanges the gradient in buckets of `values` values (256 KiB of them, 65,536, by
    /// default; PyTorch DDP's `bucket_cap_mb`): a bucket leaves as soon as the backward pass
    /// of the process's last shard has it whole, while the layers below are still in their
    /// backward pass. Smaller buckets leave earlier, in more messages. The sums, and so the
    /// bits, are the same for every bucket size.
    pub fn with_bucket(mut self, values: usize) -> Self {
        let ranks = self.comm.size();
        if let Some((_, top)) = Tree::new(self.shards.count())
            .split(ranks)
            .filter(|_| ranks > 1)
        {
            self.exchange = Some(Exchange::new(M::TRAINABLE, ranks, &top, values));
        }
        self
    }

    /// The processes.
    pub fn communicator(&self) -> &C {
        &self.comm
    }

    /// How a global batch is cut.
    pub fn shards(&self) -> Shards {
        self.shards
    }

    /// Cuts the next global batches into `shards`, of the same count as before (the buffers
    /// were sized for it) and at most `B` samples each.
    pub fn set_shards(&mut self, shards: Shards) -> Result<(), ShardError> {
        assert_eq!(
            shards.count(),
            self.shards.count(),
            "the shard count is fixed at construction"
        );
        if shards.per_shard() > B {
            return Err(ShardError::ShardTooLarge {
                per_shard: shards.per_shard(),
                max: B,
            });
        }
        self.shards = shards;
        Ok(())
    }

    /// Bytes this process sends per step, and as many it receives: the pieces of its subtree
    /// sum that other processes sum, its summed pieces to each of them, and its shards'
    /// outcomes (what it hands MPI; how MPI's algorithms relay it is theirs).
    pub fn bytes_sent_per_step(&self) -> usize {
        let others = self.comm.size() - 1;
        let exchanged = self.exchange.as_ref().map_or(0, Exchange::bytes_per_step);
        exchanged + others * self.mine.len() * 8
    }

    /// Bytes of the gradient ([`Model::TRAINABLE`] values of 4 bytes): a ring all-reduce
    /// sends and receives `2 (P - 1) / P` of them per process.
    pub fn gradient_bytes(&self) -> usize {
        M::TRAINABLE * 4
    }

    /// Gives every process rank 0's state: every part of [`Step::state_parts`] (parameters,
    /// model state, optimizer slots, EMA, carried scalars, step counter and dropout seed), at
    /// the start of training and after a resume.
    ///
    /// [`Step::state_parts`]: crate::train::Step::state_parts
    pub fn broadcast(&self, model: &mut M, step: &mut TrainStep<M, R, B>) {
        for part in step.state_parts() {
            match step.part_mut(model, part) {
                PartMut::Floats(values) => self.comm.broadcast(values),
                PartMut::Word(word) => self.comm.broadcast_u64(core::slice::from_mut(word)),
            }
        }
    }

    /// One step on a global batch `x`, `y` (every process passes the same one, of at most
    /// [`Shards::global_batch`] samples): this process's shards' gradients, the gather, the sum
    /// in shard order and the update. Returns the global batch's mean loss, the same bits on
    /// every process. `x` is a slice, an array, a `Vec` or a [`Padded`] batch, whose lengths
    /// go with each shard's samples.
    ///
    /// # Panics
    /// If the batch is empty or larger than the global batch, or the targets or the lengths do
    /// not match it.
    pub fn run<X: ?Sized + Inputs<M::Input>, Y: ?Sized + Targets<M::Loss>>(
        &mut self,
        model: &mut M,
        step: &mut TrainStep<M, R, B>,
        x: &X,
        y: &Y,
    ) -> f32 {
        let x = Padded::with(x.values(), x.lengths());
        let loss = self.global_gradient(model, step, x, y.as_targets());
        optimizer_step(step.optimizer_mut(), model, &self.sum);
        loss
    }

    /// [`run`](Self::run), except that a global batch whose loss or any gradient is NaN or
    /// infinite changes nothing, on every process alike (see [`Step::run_or_skip`]).
    ///
    /// [`Step::run_or_skip`]: crate::train::Step::run_or_skip
    ///
    /// # Panics
    /// As [`run`](Self::run).
    pub fn run_or_skip<X: ?Sized + Inputs<M::Input>, Y: ?Sized + Targets<M::Loss>>(
        &mut self,
        model: &mut M,
        step: &mut TrainStep<M, R, B>,
        x: &X,
        y: &Y,
    ) -> StepOutcome {
        let x = Padded::with(x.values(), x.lengths());
        step.keep_state(model);
        let loss = self.global_gradient(model, step, x, y.as_targets());
        update_or_skip(
            &mut step.optimizer,
            &step.bufs.state,
            model,
            loss,
            &self.sum,
        )
    }

    /// The global batch's mean loss and gradient (in `sum`), from this process's shards and
    /// the other processes' subtree sums, the same bits on every process.
    fn global_gradient(
        &mut self,
        model: &mut M,
        step: &mut TrainStep<M, R, B>,
        x: Padded<'_, M::Input>,
        y: &[Target<M>],
    ) -> f32 {
        let len = x.values().len();
        let n = len / M::IN.max(1);
        assert!(
            n > 0 && n <= self.shards.global_batch() && len == n * M::IN,
            "a global batch of {len} inputs is not 1..={} samples of {}",
            self.shards.global_batch(),
            M::IN
        );
        expect(batch::lengths::<M>(x.lengths(), n));
        let total = <M::Loss as Loss>::scored(y, M::OUT).max(1);
        self.compute_own(model, step, x, y, (n, total));
        self.comm.all_gather_u64(&self.mine, &mut self.all);
        self.sum_subtrees();
        self.mean_loss(y, (n, total))
    }

    /// What shard `s` of the last global batch gave, the same on every process.
    pub fn shard(&self, s: usize) -> ShardOutcome {
        ShardOutcome::from_words(&self.all[s * OUTCOME_WORDS..(s + 1) * OUTCOME_WORDS])
    }

    /// Computes this process's shards of a global batch of `n` samples (whose loss averages
    /// over `total` scored targets), folds their weighted gradients into its subtree sum, and
    /// writes their outcomes. With other processes, the
    /// last shard's backward pass hands each layer's part of the subtree sum to the exchange
    /// as soon as it is final.
    fn compute_own(
        &mut self,
        model: &mut M,
        step: &mut TrainStep<M, R, B>,
        x: Padded<'_, M::Input>,
        y: &[Target<M>],
        (n, total): (usize, usize),
    ) {
        let per = <M::Loss as Loss>::targets_per_sample(M::OUT);
        let own = self.shards.of_rank(self.comm.rank(), self.comm.size());
        let Self {
            comm,
            own: fold,
            exchange,
            sum,
            mine,
            ..
        } = self;
        for (words, s) in mine.chunks_exact_mut(OUTCOME_WORDS).zip(own) {
            let at = self.shards.samples(s, n);
            if at.is_empty() {
                words.copy_from_slice(&ShardOutcome::default().to_words());
                if let Some(root) = fold.push(Leaf::Empty) {
                    match exchange {
                        Some(e) => e.place(comm, 0..M::TRAINABLE, root),
                        None => sum.copy_from_slice(root),
                    }
                }
                continue;
            }
            let xs = x.samples(at.clone(), M::IN);
            let ys = &y[at.start * per..at.end * per];
            let weight = shard_weight::<M>(ys, total);
            let loss = match exchange {
                Some(e) if fold.at_last_leaf() => {
                    let mut each = |range: Range<usize>, g: &[f32]| {
                        let root = fold.push_last_part(Leaf::Weighted(g, weight), range.clone());
                        e.place(comm, range, root);
                    };
                    let loss = step.shard_gradients_by_layer(model, &xs, ys, at.start, &mut each);
                    fold.end_last_leaf();
                    loss
                }
                _ => {
                    let loss = step.shard_gradients(model, &xs, ys, at.start);
                    if let Some(root) = fold.push(Leaf::Weighted(step.grads(), weight)) {
                        sum.copy_from_slice(root);
                    }
                    loss
                }
            };
            let out = step.output(at.len());
            let outcome = ShardOutcome::measure::<M::Loss>(loss, out, ys, M::OUT);
            words.copy_from_slice(&outcome.to_words());
        }
    }

    /// With several processes, waits for the exchange of the subtree sums and sums them into
    /// `sum`.
    fn sum_subtrees(&mut self) {
        if let Some(e) = &mut self.exchange {
            e.finish(&self.comm, &mut self.sum);
        }
    }

    /// The global batch's mean loss: the shards' losses weighted by their share of the
    /// `total` targets the loss averages over the global batch `y` of `n` samples, added in
    /// shard order.
    fn mean_loss(&self, y: &[Target<M>], (n, total): (usize, usize)) -> f32 {
        let per = <M::Loss as Loss>::targets_per_sample(M::OUT);
        let (mut loss, mut first) = (0.0f32, true);
        for s in 0..self.shards.count() {
            let at = self.shards.samples(s, n);
            if at.is_empty() {
                continue;
            }
            let w = shard_weight::<M>(&y[at.start * per..at.end * per], total);
            let shard_loss = self.shard(s).loss;
            loss = if first {
                w * shard_loss
            } else {
                loss + w * shard_loss
            };
            first = false;
        }
        loss
    }
}

/// A shard's weight in the global batch: its share of the `total` targets the loss averages
/// ([`Loss::scored`]: its samples, or its class labels that are not
/// [`IGNORE`](crate::loss::IGNORE)).
fn shard_weight<M: Model>(ys: &[Target<M>], total: usize) -> f32 {
    <M::Loss as Loss>::scored(ys, M::OUT) as f32 / total as f32
}
