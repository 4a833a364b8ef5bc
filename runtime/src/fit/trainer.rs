//! [`Trainer`]: fit, evaluate and predict over data sets, as Keras' `Model.fit`.

use super::callbacks::{Callback, Control, FitState};
use super::data_parallel::Parallel;
use super::error::TrainError;
use super::history::{EpochLog, History, Stop};
use super::metrics::{Accumulator, Metric, MetricSet, Metrics};
use super::options::{FitOptions, Validation};
use super::progress::{Progress, Verbose};
use crate::data::Dataset;
use crate::loss::{Loss, TargetValue};
use crate::optim::Rule;
use crate::rng::Rng;
use crate::train::{BatchError, Model, Target, TrainStep};
use std::time::Instant;
use std::vec::Vec;

/// The callbacks of a fit.
pub type Callbacks<'a, 'b, M, R, const B: usize> =
    &'a mut [&'b mut (dyn Callback<M, R, B> + Send)];

/// A model and its train step, with what a training loop needs around them: batching with
/// seeded shuffling into buffers allocated once, metrics, validation, callbacks, progress, and
/// (with `parallel`) one rayon pool that the whole loop runs in.
///
/// ```
/// use fusegraph_runtime::data::Dataset;
/// use fusegraph_runtime::fit::{FitOptions, Metric, Trainer, Verbose};
/// # use fusegraph_runtime::train::TrainStep;
/// # fn fit<M: fusegraph_runtime::train::Model<Loss = fusegraph_runtime::loss::SoftmaxCrossEntropy, Input = f32> + Send, R: fusegraph_runtime::optim::Rule>(model: M, step: TrainStep<M, R, 32>, data: Dataset<u32>) -> Result<(), fusegraph_runtime::fit::TrainError> {
/// let mut trainer = Trainer::new(model, step).metrics(&[Metric::Accuracy]).verbose(Verbose::Silent);
/// let history = trainer.fit(&data, &FitOptions::new(10).validation_split(0.2), &mut [])?;
/// println!("{}", history.to_csv());
/// # Ok(()) }
/// ```
pub struct Trainer<M: Model, R: Rule, const B: usize> {
    pub(super) model: M,
    pub(super) step: TrainStep<M, R, B>,
    metrics: Vec<Metric>,
    verbose: Verbose,
    #[cfg(feature = "parallel")]
    pool: Option<rayon::ThreadPool>,
    #[cfg(feature = "parallel")]
    threads: usize,
    pub(super) order: Vec<usize>,
    pub(super) bx: Vec<f32>,
    pub(super) by: Vec<Target<M>>,
    /// The data-parallel step, when the trainer runs on several processes or accumulates.
    pub(super) parallel: Option<Parallel<M, R, B>>,
}

impl<M, R, const B: usize> Trainer<M, R, B>
where
    M: Model<Input = f32> + Send,
    R: Rule,
{
    /// A trainer for `model` with `step` (built for it), reporting the loss only, with
    /// [`Verbose::Auto`] and, with `parallel`, rayon's default number of threads.
    pub fn new(model: M, step: TrainStep<M, R, B>) -> Self {
        Trainer {
            model,
            step,
            metrics: Vec::new(),
            verbose: Verbose::Auto,
            #[cfg(feature = "parallel")]
            pool: None,
            #[cfg(feature = "parallel")]
            threads: 0,
            order: Vec::new(),
            bx: Vec::with_capacity(B * M::IN),
            by: Vec::with_capacity(B * <M::Loss as Loss>::targets_per_sample(M::OUT)),
            parallel: None,
        }
    }

    /// Metrics to report beside the loss, in training and validation.
    #[must_use]
    pub fn metrics(mut self, metrics: &[Metric]) -> Self {
        self.metrics = metrics.to_vec();
        self
    }

    /// How much [`fit`](Self::fit) prints.
    #[must_use]
    pub fn verbose(mut self, verbose: Verbose) -> Self {
        self.verbose = verbose;
        self
    }

    /// Runs the loop in a pool of `n` threads (0: rayon's default), built on the first fit.
    #[cfg(feature = "parallel")]
    #[must_use]
    pub fn threads(mut self, n: usize) -> Self {
        self.threads = n;
        self.pool = None;
        self
    }

    /// Runs the loop in `pool`.
    #[cfg(feature = "parallel")]
    #[must_use]
    pub fn pool(mut self, pool: rayon::ThreadPool) -> Self {
        self.pool = Some(pool);
        self
    }

    /// The model.
    pub fn model(&self) -> &M {
        &self.model
    }

    /// The model, writable.
    pub fn model_mut(&mut self) -> &mut M {
        &mut self.model
    }

    /// The train step (with the optimizer).
    pub fn step(&self) -> &TrainStep<M, R, B> {
        &self.step
    }

    /// The train step, writable.
    pub fn step_mut(&mut self) -> &mut TrainStep<M, R, B> {
        &mut self.step
    }

    /// The model and the train step, writable together.
    pub fn parts_mut(&mut self) -> (&mut M, &mut TrainStep<M, R, B>) {
        (&mut self.model, &mut self.step)
    }

    /// Gives back the model and the train step.
    pub fn into_parts(self) -> (M, TrainStep<M, R, B>) {
        (self.model, self.step)
    }

    /// Saves the model and the training state to `path` (see
    /// [`checkpoint`](crate::checkpoint)), recording that `epoch` epochs are done.
    ///
    /// In data-parallel training only rank 0 writes; the other ranks return `Ok` at once.
    #[cfg(feature = "checkpoint")]
    pub fn save_checkpoint(
        &self,
        path: impl AsRef<std::path::Path>,
        epoch: usize,
    ) -> Result<(), TrainError> {
        if self.rank() != 0 {
            return Ok(());
        }
        let epoch = std::string::ToString::to_string(&epoch);
        crate::checkpoint::save_with(path, &self.model, &self.step, &[("epoch", &epoch)])?;
        Ok(())
    }

    /// Loads a checkpoint of [`save_checkpoint`](Self::save_checkpoint) or
    /// [`ModelCheckpoint`](super::ModelCheckpoint) into the model and the train step; returns
    /// the epochs it records as done (0 if none), to pass to
    /// [`FitOptions::initial_epoch`]. Resuming a fit this way gives the same bits as never
    /// stopping it. In data-parallel training every rank loads the same file, and the next fit
    /// broadcasts rank 0's state. The load's warnings (a file of format version 1) are not returned:
    /// [`checkpoint::load`](crate::checkpoint::load) gives them in
    /// [`Metadata::warnings`](crate::checkpoint::Metadata::warnings).
    #[cfg(feature = "checkpoint")]
    pub fn resume(&mut self, path: impl AsRef<std::path::Path>) -> Result<usize, TrainError> {
        let meta = crate::checkpoint::load(path, &mut self.model, &mut self.step)?;
        match meta.get("epoch") {
            None => Ok(0),
            Some(e) => e.parse().map_err(|_| {
                TrainError::Config(std::format!("the checkpoint's epoch `{e}` is not a number"))
            }),
        }
    }

    /// Runs `f` in the trainer's pool (with `parallel`), so that no step hands work into a
    /// pool from outside it.
    fn in_pool<T: Send>(&mut self, f: impl FnOnce(&mut Self) -> T + Send) -> T {
        #[cfg(feature = "parallel")]
        {
            let pool = match self.pool.take() {
                Some(p) => p,
                None => rayon::ThreadPoolBuilder::new()
                    .num_threads(self.threads)
                    .build()
                    .expect("building the trainer's thread pool"),
            };
            let out = pool.install(|| f(self));
            self.pool = Some(pool);
            out
        }
        #[cfg(not(feature = "parallel"))]
        f(self)
    }

    /// Trains for `options.epochs()` epochs on `train`, calling `callbacks`; returns the
    /// history. Batches are gathered from a seeded permutation into buffers allocated once:
    /// after the first epoch the loop allocates nothing (without printing and file-writing
    /// callbacks).
    pub fn fit(
        &mut self,
        train: &Dataset<Target<M>>,
        options: &FitOptions<'_, Target<M>>,
        callbacks: Callbacks<'_, '_, M, R, B>,
    ) -> Result<History, TrainError> {
        let split;
        let (train, val) = match options.validation {
            Validation::None => (train, None),
            Validation::Data(v) => {
                if v.is_empty() {
                    return Err(TrainError::Shape(std::string::String::from(
                        "the validation data has no samples: pass data or no validation",
                    )));
                }
                (train, Some(v))
            }
            // As Keras: a split of 0 is no validation.
            Validation::Split(0.0) => (train, None),
            Validation::Split(f) => {
                split = split_tail(train, f)?;
                (&split.0, Some(&split.1))
            }
        };
        check_data::<M>(train, "training")?;
        if let Some(v) = val {
            check_data::<M>(v, "validation")?;
        }
        let set = MetricSet::new(&self.metrics);
        if set.needs_values() && train.y().first().is_some_and(|t| t.value().is_none()) {
            return Err(TrainError::Config(std::string::String::from(
                "MAE and MSE compare outputs with real-valued targets; this model's targets are \
                 class labels",
            )));
        }
        let batch = options.batch_size.unwrap_or(B);
        if batch == 0 {
            return Err(TrainError::Config(std::string::String::from(
                "batch size 0: a batch has at least one sample",
            )));
        }
        if batch > B {
            return Err(TrainError::Batch(BatchError::BatchSize {
                samples: batch,
                max: B,
            }));
        }
        if train.is_empty() {
            return Err(TrainError::Shape(std::string::String::from(
                "the training data has no samples",
            )));
        }
        self.plan_shards(batch)?;
        let fitted = self.in_pool(|t| t.fit_loop(train, val, options, batch, set, callbacks));
        self.abort_job_on(fitted)
    }

    fn fit_loop(
        &mut self,
        train: &Dataset<Target<M>>,
        val: Option<&Dataset<Target<M>>>,
        options: &FitOptions<'_, Target<M>>,
        batch: usize,
        set: MetricSet,
        callbacks: Callbacks<'_, '_, M, R, B>,
    ) -> Result<History, TrainError> {
        let mut history = History::new(&self.metrics, options.epochs);
        let verbose = if self.rank() == 0 {
            self.verbose
        } else {
            Verbose::Silent
        };
        let mut progress = Progress::new(verbose, options.epochs);
        for cb in callbacks.iter_mut() {
            cb.on_train_begin(self.state(&history))?;
        }
        self.broadcast_state();
        self.order.clear();
        self.order.extend(0..train.len());
        let global = self.global_batch(batch);
        let batches = train.len().div_ceil(global);
        let mut warn = self.rank() == 0
            && !options.skip_non_finite
            && !callbacks.iter().any(|cb| cb.handles_non_finite());
        for epoch in options.initial_epoch + 1..=options.epochs {
            for cb in callbacks.iter_mut() {
                cb.on_epoch_begin(epoch, self.state(&history))?;
            }
            let start = Instant::now();
            for (i, o) in self.order.iter_mut().enumerate() {
                *o = i;
            }
            if options.shuffle {
                Rng::with_stream(options.seed, epoch as u64).shuffle(&mut self.order);
            }
            progress.begin_epoch(epoch, batches);
            let mut acc = Accumulator::new(set);
            let mut stop = None;
            for b in 0..batches {
                let seen = ((b + 1) * global).min(train.len());
                let at = b * global..seen;
                let loss = self.train_batch(train, at, &mut acc, options.skip_non_finite);
                if warn && !loss.is_finite() {
                    progress.warn(&non_finite_warning(epoch, b + 1, loss));
                    warn = false;
                }
                progress.batch(b + 1, || acc.metrics().loss, seen, start);
                for cb in callbacks.iter_mut() {
                    if cb.on_batch_end(epoch, b + 1, loss) == Control::Stop {
                        stop = Some(if loss.is_finite() {
                            Stop::Callback { epoch }
                        } else {
                            Stop::NonFinite {
                                epoch,
                                batch: b + 1,
                            }
                        });
                    }
                }
                if stop.is_some() {
                    break;
                }
            }
            if let Some(s) = stop {
                progress.stopped(&s, acc.metrics().loss);
                history.stop = s;
                break;
            }
            let train_seconds = start.elapsed().as_secs_f64();
            let val_metrics = val.map(|v| self.evaluate_now(v, set));
            let log = EpochLog {
                epoch,
                train: acc.metrics(),
                val: val_metrics,
                lr: self.step.optimizer().current_learning_rate(),
                steps: self.step.optimizer().iterations(),
                seconds: start.elapsed().as_secs_f64(),
                samples_per_second: train.len() as f64 / train_seconds.max(1e-12),
                skipped: acc.skipped(),
            };
            history.epochs.push(log);
            progress.end_epoch(&log);
            let mut control = Control::Continue;
            for cb in callbacks.iter_mut() {
                if cb.on_epoch_end(&log, self.state(&history))? == Control::Stop {
                    control = Control::Stop;
                }
            }
            if control == Control::Stop {
                history.stop = Stop::Callback { epoch };
                break;
            }
        }
        for cb in callbacks.iter_mut() {
            cb.on_train_end(self.state(&history))?;
        }
        Ok(history)
    }

    fn state<'a>(&'a mut self, history: &'a History) -> FitState<'a, M, R, B> {
        let rank = self.rank();
        FitState {
            model: &mut self.model,
            step: &mut self.step,
            history,
            rank,
        }
    }

    /// Loss and the trainer's metrics on `data`, in inference mode, `B` samples at a time.
    pub fn evaluate(&mut self, data: &Dataset<Target<M>>) -> Result<Metrics, TrainError> {
        check_data::<M>(data, "evaluation")?;
        if data.is_empty() {
            return Err(TrainError::Shape(std::string::String::from(
                "the evaluation data has no samples",
            )));
        }
        let set = MetricSet::new(&self.metrics);
        Ok(self.in_pool(|t| t.evaluate_now(data, set)))
    }

    fn evaluate_now(&mut self, data: &Dataset<Target<M>>, set: MetricSet) -> Metrics {
        let per = data.targets_per_sample();
        let mut acc = Accumulator::new(set);
        for (xs, ys) in data.x().chunks(B * M::IN).zip(data.y().chunks(B * per)) {
            let out = self.step.predict(&self.model, xs);
            let loss = <M::Loss as Loss>::loss(out, ys, M::OUT);
            acc.add::<M::Loss>(loss, out, ys, M::OUT);
        }
        acc.metrics()
    }

    /// The model's outputs (`M::OUT` per sample) for any number of samples of `x`, in
    /// inference mode, written into `out`.
    ///
    /// # Panics
    /// If `x` is not whole samples or `out` does not hold their outputs.
    pub fn predict_into(&mut self, x: &[f32], out: &mut [f32]) {
        assert!(
            x.len().is_multiple_of(M::IN),
            "input length {} is not a multiple of {}",
            x.len(),
            M::IN
        );
        assert_eq!(out.len(), x.len() / M::IN * M::OUT, "output length");
        self.in_pool(|t| {
            for (xs, os) in x.chunks(B * M::IN).zip(out.chunks_mut(B * M::OUT)) {
                os.copy_from_slice(t.step.predict(&t.model, xs));
            }
        });
    }

    /// The model's outputs for any number of samples of `x`, in inference mode.
    ///
    /// # Panics
    /// If `x` is not whole samples.
    pub fn predict(&mut self, x: &[f32]) -> Vec<f32> {
        let mut out = std::vec![0.0; x.len() / M::IN.max(1) * M::OUT];
        self.predict_into(x, &mut out);
        out
    }
}

/// What a fit prints (once) at the first NaN or infinite loss when nothing acts on it.
fn non_finite_warning(epoch: usize, batch: usize, loss: f32) -> std::string::String {
    std::format!(
        "the loss of epoch {epoch}, batch {batch} is {loss}; training goes on with it. Stop \
         the fit there with the callback `TerminateOnNan`, or skip such batches with \
         `FitOptions::skip_non_finite(true)`"
    )
}

/// Splits off the last `fraction` of `data` for validation, as Keras' `validation_split`: the
/// training part is the first `floor(n * (1 - fraction))` samples, and neither part may be
/// empty.
fn split_tail<T: Copy>(
    data: &Dataset<T>,
    fraction: f64,
) -> Result<(Dataset<T>, Dataset<T>), TrainError> {
    if !(0.0..1.0).contains(&fraction) {
        return Err(TrainError::Config(std::format!(
            "validation split {fraction} is not in [0, 1)"
        )));
    }
    let n = data.len();
    let (train, val) = data.split_tail(fraction);
    if train.is_empty() || val.is_empty() {
        return Err(TrainError::Config(std::format!(
            "validation split {fraction} of {n} samples leaves {} for training and {} for \
             validation; each needs at least one: use more data or another split",
            train.len(),
            val.len()
        )));
    }
    Ok((train, val))
}

/// Checks that `data` has the model's features and targets per sample, and labels in range.
fn check_data<M: Model>(data: &Dataset<Target<M>>, what: &str) -> Result<(), TrainError> {
    if data.features() != M::IN {
        return Err(TrainError::Shape(std::format!(
            "the {what} data has {} features per sample, the model takes {}",
            data.features(),
            M::IN
        )));
    }
    let per = <M::Loss as Loss>::targets_per_sample(M::OUT);
    if !data.is_empty() && data.targets_per_sample() != per {
        return Err(TrainError::Shape(std::format!(
            "the {what} data has {} targets per sample, the model's loss needs {per}",
            data.targets_per_sample()
        )));
    }
    crate::train::batch::labels::<M>(data.y())?;
    Ok(())
}
