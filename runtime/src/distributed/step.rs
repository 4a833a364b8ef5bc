//! [`DataParallel`]: one train step over a global batch whose shards are computed by the
//! processes of a [`Communicator`], combined in shard order on every process.

use super::communicator::Communicator;
use super::shards::{add_shard, Shards};
use crate::loss::{Loss, Targets};
use crate::optim::{PartMut, Rule};
use crate::train::batch::{self, expect};
use crate::train::step::{optimizer_step, update_or_skip};
use crate::train::{Inputs, Model, Padded, StepOutcome, Target, TrainStep};
use alloc::boxed::Box;
use alloc::vec;
use core::fmt;
use core::marker::PhantomData;

/// Why a data-parallel step cannot be built for a model, step and job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShardError {
    /// The number of processes does not divide the number of shards.
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
            ShardError::Ranks { ranks, shards } => write!(
                f,
                "{ranks} processes do not divide the {shards} shards of a global batch: run \
                 on a number of processes that divides {shards}"
            ),
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

/// What one shard of the last global batch gave.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ShardOutcome<'a> {
    /// Its samples (0 for a shard past the end of a partial global batch).
    pub samples: usize,
    /// Its mean loss.
    pub loss: f32,
    /// The model's outputs on its samples, before the update.
    pub outputs: &'a [f32],
}

/// A data-parallel train step: each global batch is cut into [`Shards`]; every process
/// computes the mean gradient of its own shards with a [`TrainStep`], the processes gather all
/// of them, and each adds them in shard order, weighted by their share of what the loss
/// averages (their samples, or their class labels that are not [`IGNORE`](crate::loss::IGNORE))
/// ([`add_shard`](super::add_shard)), and runs the same fused update. So the parameters and
/// the optimizer's state stay the same bits on every process, and the same bits for any
/// number of processes that divides the shard count, threads included: a run on 4 ranks can
/// be checked against a run on one. On [`Solo`](super::Solo) it is gradient accumulation:
/// global batches `count` times larger than the step's.
///
/// Each shard travels as one record (its sample count, loss, outputs and gradient) in a single
/// gather per step. The buffers are allocated once, in [`new`](Self::new).
pub struct DataParallel<M: Model, R: Rule, const B: usize, C: Communicator> {
    comm: C,
    shards: Shards,
    /// The records of this process's shards.
    mine: Box<[f32]>,
    /// The records of every shard, in shard order.
    all: Box<[f32]>,
    /// The global gradient.
    sum: Box<[f32]>,
    kinds: PhantomData<fn() -> (M, R)>,
}

/// Where a shard record's parts start: `[samples, loss, outputs (B * OUT), gradient]`.
const SAMPLES: usize = 0;
const LOSS: usize = 1;
const OUTPUTS: usize = 2;

impl<M: Model, R: Rule, const B: usize, C: Communicator> DataParallel<M, R, B, C> {
    /// The values of one shard's record.
    pub const RECORD: usize = OUTPUTS + B * M::OUT + M::TRAINABLE;

    /// A data-parallel step over `comm`'s processes with global batches cut into `shards`.
    pub fn new(comm: C, shards: Shards) -> Result<Self, ShardError> {
        let ranks = comm.size();
        if !shards.count().is_multiple_of(ranks) {
            return Err(ShardError::Ranks {
                ranks,
                shards: shards.count(),
            });
        }
        if shards.per_shard() > B {
            return Err(ShardError::ShardTooLarge {
                per_shard: shards.per_shard(),
                max: B,
            });
        }
        if M::STATE > 0 && shards.count() > 1 {
            return Err(ShardError::BatchStatistics);
        }
        let own = shards.count() / ranks;
        Ok(DataParallel {
            comm,
            shards,
            mine: vec![0.0; own * Self::RECORD].into_boxed_slice(),
            all: vec![0.0; shards.count() * Self::RECORD].into_boxed_slice(),
            sum: vec![0.0; M::TRAINABLE].into_boxed_slice(),
            kinds: PhantomData,
        })
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

    /// Bytes this process sends per step (its shards' records; it receives the others').
    pub fn bytes_sent_per_step(&self) -> usize {
        self.mine.len() * 4
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
    /// the gathered others', the same bits on every process.
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
        self.compute_own(model, step, x, y, n);
        self.comm.all_gather(&self.mine, &mut self.all);
        self.combine(y, n)
    }

    /// What shard `s` of the last global batch gave, the same on every process.
    pub fn shard(&self, s: usize) -> ShardOutcome<'_> {
        let r = &self.all[s * Self::RECORD..(s + 1) * Self::RECORD];
        let samples = r[SAMPLES] as usize;
        ShardOutcome {
            samples,
            loss: r[LOSS],
            outputs: &r[OUTPUTS..OUTPUTS + samples * M::OUT],
        }
    }

    /// Computes this process's shards of a global batch of `n` samples into their records.
    fn compute_own(
        &mut self,
        model: &mut M,
        step: &mut TrainStep<M, R, B>,
        x: Padded<'_, M::Input>,
        y: &[Target<M>],
        n: usize,
    ) {
        let per = <M::Loss as Loss>::targets_per_sample(M::OUT);
        let own = self.shards.of_rank(self.comm.rank(), self.comm.size());
        for (record, s) in self.mine.chunks_exact_mut(Self::RECORD).zip(own) {
            let at = self.shards.samples(s, n);
            record[SAMPLES] = at.len() as f32;
            record[LOSS] = 0.0;
            if at.is_empty() {
                continue;
            }
            let xs = x.samples(at.clone(), M::IN);
            let ys = &y[at.start * per..at.end * per];
            record[LOSS] = step.shard_gradients(model, &xs, ys, at.start);
            let outputs = at.len() * M::OUT;
            record[OUTPUTS..OUTPUTS + outputs].copy_from_slice(step.output(at.len()));
            record[OUTPUTS + B * M::OUT..].copy_from_slice(step.grads());
        }
    }

    /// Adds the gathered shards' gradients in shard order into the global gradient, each
    /// weighted by its share of what the loss of the global batch `y` of `n` samples averages
    /// ([`Loss::scored`]: its samples, or its class labels that are not
    /// [`IGNORE`](crate::loss::IGNORE)), so that the sum is the gradient of the mean over the
    /// whole batch; returns the mean loss, summed the same way.
    fn combine(&mut self, y: &[Target<M>], n: usize) -> f32 {
        let per = <M::Loss as Loss>::targets_per_sample(M::OUT);
        let total = <M::Loss as Loss>::scored(y, M::OUT).max(1);
        let (mut loss, mut first) = (0.0f32, true);
        for (s, r) in self.all.chunks_exact(Self::RECORD).enumerate() {
            let at = self.shards.samples(s, n);
            if at.is_empty() {
                continue;
            }
            let scored = <M::Loss as Loss>::scored(&y[at.start * per..at.end * per], M::OUT);
            let w = scored as f32 / total as f32;
            add_shard(&mut self.sum, &r[OUTPUTS + B * M::OUT..], w, first);
            loss = if first {
                w * r[LOSS]
            } else {
                loss + w * r[LOSS]
            };
            first = false;
        }
        loss
    }
}
