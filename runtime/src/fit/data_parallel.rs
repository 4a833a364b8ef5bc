//! The [`Trainer`]'s data-parallel and accumulating modes: each global batch runs through a
//! [`DataParallel`] step, and the metrics add its shards in shard order.

use super::error::TrainError;
use super::metrics::Accumulator;
use super::options::FitOptions;
use super::trainer::{DatasetOf, Trainer};
use crate::distributed::{Communicator, DataParallel, Entry, Fingerprint, Shards, Solo};
use crate::hash::Fnv;
use crate::layers::Lengths;
use crate::loss::Loss;
use crate::optim::Rule;
use crate::train::{layout_hash, Model, Padded, StepOutcome, Target};
use core::ops::Range;
use std::boxed::Box;
use std::format;

/// The trainer's data-parallel step, over any communicator.
pub(super) type Parallel<M, R, const B: usize> =
    DataParallel<M, R, B, Box<dyn Communicator + Send>>;

impl<M, R, const B: usize> Trainer<M, R, B>
where
    M: Model + Send,
    R: Rule,
{
    /// Trains data-parallel on `comm`'s processes: each global batch is `shards` batches of
    /// the fit's batch size, cut in the order of the one seeded permutation that every process
    /// draws, and each process computes `shards / comm.size()` of them (see
    /// [`DataParallel`]). The parameters, the optimizer's state, the losses and the metrics
    /// are the same bits on every process and for any number of processes that divides
    /// `shards`; rank 0 alone prints progress and writes checkpoints. A fit that fails on one
    /// process ends the job on all of them ([`Communicator::abort`]).
    ///
    /// Every process must hold the whole data set (each reads its shards from it) and call
    /// `fit` with the same options.
    pub fn data_parallel(
        mut self,
        comm: impl Communicator + Send + 'static,
        shards: usize,
    ) -> Result<Self, TrainError> {
        if shards == 0 {
            return Err(TrainError::Config(std::string::String::from(
                "data-parallel training needs at least one shard",
            )));
        }
        let comm: Box<dyn Communicator + Send> = Box::new(comm);
        let step = DataParallel::new(comm, Shards::new(shards, B))
            .map_err(|e| TrainError::Config(std::string::ToString::to_string(&e)))?;
        self.parallel = Some(step);
        Ok(self)
    }

    /// Gradient accumulation: global batches of `k` times the fit's batch size, their `k`
    /// shards' gradients added in order before one update; the same bits as
    /// [`data_parallel`](Self::data_parallel) with `k` shards on any number of processes.
    pub fn accumulate(self, k: usize) -> Result<Self, TrainError> {
        self.data_parallel(Solo, k)
    }

    /// This process's rank in data-parallel training (0 otherwise).
    pub fn rank(&self) -> usize {
        self.parallel
            .as_ref()
            .map_or(0, |p| p.communicator().rank())
    }

    /// The samples of one update: the batch, times the shards of a data-parallel fit.
    pub(super) fn global_batch(&self, batch: usize) -> usize {
        self.parallel
            .as_ref()
            .map_or(batch, |p| p.shards().count() * batch)
    }

    /// Cuts the data-parallel step's global batches into shards of `batch` samples.
    pub(super) fn plan_shards(&mut self, batch: usize) -> Result<(), TrainError> {
        if let Some(p) = &mut self.parallel {
            p.set_shards(Shards::new(p.shards().count(), batch))
                .map_err(|e| TrainError::Config(std::string::ToString::to_string(&e)))?;
        }
        Ok(())
    }

    /// Gives every process rank 0's model and training state.
    pub(super) fn broadcast_state(&mut self) {
        if let Some(p) = &self.parallel {
            p.broadcast(&mut self.model, &mut self.step);
        }
    }

    /// Trains on the samples `at` of the epoch's order (with their lengths, if the data has
    /// them), skipping the update if `skip` and the loss or a gradient is not finite; adds
    /// them to `acc` (or counts the skipped batch) and returns the batch's loss.
    pub(super) fn train_batch(
        &mut self,
        train: &DatasetOf<M>,
        at: Range<usize>,
        acc: &mut Accumulator,
        skip: bool,
    ) -> f32 {
        let idx = &self.order[at];
        train.gather_into(idx, &mut self.bx, &mut self.by);
        train.gather_lengths_into(idx, &mut self.blengths);
        let lengths = Lengths::given(train.lengths().map(|_| &self.blengths[..]));
        let x = &Padded::with(&self.bx, lengths);
        let (model, step, y) = (&mut self.model, &mut self.step, &self.by);
        let outcome = match (&mut self.parallel, skip) {
            (None, false) => StepOutcome {
                loss: step.run(model, x, y),
                skipped: false,
            },
            (None, true) => step.run_or_skip(model, x, y),
            (Some(p), false) => StepOutcome {
                loss: p.run(model, step, x, y),
                skipped: false,
            },
            (Some(p), true) => p.run_or_skip(model, step, x, y),
        };
        if outcome.skipped {
            acc.skip();
        } else {
            self.measure(acc, outcome.loss);
        }
        outcome.loss
    }

    /// Adds the last batch (in `bx`, `by`) with its `loss` to `acc`: its outputs, or the
    /// outcome of each shard of a data-parallel step.
    fn measure(&self, acc: &mut Accumulator, loss: f32) {
        let n = self.bx.len() / M::IN;
        let Some(p) = &self.parallel else {
            acc.add::<M::Loss>(loss, self.step.output(n), &self.by, M::OUT);
            return;
        };
        let per = <M::Loss as Loss>::targets_per_sample(M::OUT);
        for s in 0..p.shards().count() {
            let shard = p.shard(s);
            let at = p.shards().samples(s, n);
            if shard.samples > 0 {
                let ys = &self.by[at.start * per..at.end * per];
                acc.add_outcome::<M::Loss>(&shard, ys, M::OUT);
            }
        }
    }

    /// In a data-parallel fit, compares with every other process ([`Fingerprint`]) what must
    /// be the same on all of them: the data, the fit's options, the shards, the model's
    /// layout, the optimizer and the kernels. A difference is an error on every process,
    /// naming it and the first rank that differs from rank 0.
    pub(super) fn agree_on(
        &self,
        train: &DatasetOf<M>,
        val: Option<&DatasetOf<M>>,
        options: &FitOptions<'_, Target<M>, M::Input>,
        batch: usize,
    ) -> Result<(), TrainError> {
        let Some(p) = &self.parallel else {
            return Ok(());
        };
        let count = |n: usize| n as u64;
        let print = Fingerprint::new()
            .with(Entry::number(
                "the training data's samples",
                count(train.len()),
            ))
            .with(Entry::hash(
                "the training data (its samples, targets and lengths)",
                train.content_hash(),
            ))
            .with(Entry::number(
                "the validation data's samples",
                count(val.map_or(0, |v| v.len())),
            ))
            .with(Entry::hash(
                "the validation data",
                val.map_or(0, |v| v.content_hash()),
            ))
            .with(Entry::number("the fit's seed", options.seed.0))
            .with(Entry::number("the batch size", count(batch)))
            .with(Entry::number("the epochs", count(options.epochs)))
            .with(Entry::number(
                "the initial epoch",
                count(options.initial_epoch),
            ))
            .with(Entry::number(
                "the shards of a global batch",
                count(p.shards().count()),
            ))
            .with(Entry::hash("the model's layout", layout_hash::<M>()))
            .with(Entry::hash(
                "the optimizer (its rule, hyper-parameters and configuration)",
                self.optimizer_hash(),
            ))
            .with(Fingerprint::kernels());
        print.compare(p.communicator()).map_err(TrainError::Ranks)
    }

    /// A hash of the optimizer's rule, hyper-parameters and configuration (schedule,
    /// clipping, weight decay, EMA), what a checkpoint records of them.
    fn optimizer_hash(&self) -> u64 {
        let opt = self.step.optimizer();
        let mut h = Fnv::new();
        h.str(R::NAME);
        for name in R::HYPER {
            h.str(name);
            h.u64(u64::from(
                opt.rule().hyper(name).unwrap_or(f32::NAN).to_bits(),
            ));
        }
        h.str(&format!("{:?}", opt.config()));
        h.finish()
    }

    /// In a job of several processes, ends every one of them when this one's fit failed, so
    /// that none waits for it in a gather; otherwise returns `fitted`.
    pub(super) fn abort_job_on<T>(&self, fitted: Result<T, TrainError>) -> Result<T, TrainError> {
        match (&fitted, &self.parallel) {
            (Err(e), Some(p)) if p.communicator().size() > 1 => {
                let comm = p.communicator();
                std::eprintln!("rank {}: {e}; ending the job", comm.rank());
                comm.abort(1)
            }
            _ => fitted,
        }
    }
}
