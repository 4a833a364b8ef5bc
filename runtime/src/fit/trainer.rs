//! [`Trainer`]: fit, evaluate and predict over data sets, as Keras' `Model.fit`.

use super::callbacks::{Callback, Control, FitState};
use super::data_parallel::Parallel;
use super::error::TrainError;
use super::history::{EpochLog, History, Stop};
use super::metrics::{Accumulator, Metric, MetricSet, Metrics};
use super::options::{FitOptions, Validation};
use super::progress::{Progress, Verbose};
use crate::data::Dataset;
use crate::layers::Lengths;
use crate::loss::{Loss, TargetValue};
use crate::optim::{Rule, EVAL_VIEW};
use crate::rng::Rng;
use crate::train::{batch, BatchError, Inputs, Model, Padded, Target, TrainStep};
use std::time::Instant;
use std::vec::Vec;

/// The callbacks of a fit.
pub type Callbacks<'a, 'b, M, R, const B: usize> =
    &'a mut [&'b mut (dyn Callback<M, R, B> + Send)];

/// The data a trainer of model `M` takes: samples of the model's input values (`f32`
/// features, or `u32` token ids for a model with `input = u32`), with the targets of its loss,
/// and their lengths if they are padded sequences.
pub type DatasetOf<M> = Dataset<Target<M>, <M as Model>::Input>;

/// A model and its train step, with what a training loop needs around them: batching with
/// seeded shuffling into buffers allocated once, metrics, validation, callbacks, progress, and
/// (with `parallel`) one rayon pool that the whole loop runs in.
///
/// It takes every model: `f32` features or `u32` token ids (a [`Dataset`] of the model's
/// [`Input`](Model::Input) values), and padded sequences with their lengths
/// ([`Dataset::with_lengths`]), which each batch carries to the layers that honour them
/// ([`Padded`]). Before the first step it checks the whole data set as a train step checks a
/// batch, and returns what does not fit as a [`TrainError`] (nothing trained): the values per
/// sample (named as the model's `[T, F]` when its layers read sequences), the targets, the
/// class labels, the token ids (`u32` ids, or `f32` values that the model's `Embedding` reads
/// as ids: whole numbers in the vocabulary), and the lengths (only for a model whose layers
/// honour them, from 1 to its [`Model::STEPS`]). A sample's place in the error counts from the
/// first of the data set that holds it (the training data, before a validation split, or the
/// validation data). So no step of a fit panics on the data.
///
/// With a rule that has the view [`EVAL_VIEW`] (schedule-free AdamW's `eval_params`, the
/// average of its iterates), validation, [`evaluate`](Self::evaluate) and
/// [`predict`](Self::predict) run at that view, as optax's `schedule_free_eval_params` and
/// PyTorch's `optimizer.eval()` have them: the model's trainable tensors take the view's
/// values for the evaluation and their training values back after it, bit for bit, through
/// one copy of the parameters kept with the trainer.
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
    pub(super) bx: Vec<M::Input>,
    pub(super) by: Vec<Target<M>>,
    /// The lengths of the batch in `bx`, empty for data without lengths.
    pub(super) blengths: Vec<u32>,
    /// The data-parallel step, when the trainer runs on several processes or accumulates.
    pub(super) parallel: Option<Parallel<M, R, B>>,
    /// The training values of the parameters while an evaluation runs at the rule's
    /// [`EVAL_VIEW`]; empty for a rule without one.
    kept: Vec<f32>,
}

impl<M, R, const B: usize> Trainer<M, R, B>
where
    M: Model + Send,
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
            blengths: Vec::with_capacity(if M::STEPS > 0 { B } else { 0 }),
            parallel: None,
            kept: std::vec![0.0; if eval_view::<R>().is_some() { M::PARAMS } else { 0 }],
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
        train: &DatasetOf<M>,
        options: &FitOptions<'_, Target<M>, M::Input>,
        callbacks: Callbacks<'_, '_, M, R, B>,
    ) -> Result<History, TrainError> {
        let fitted = self.checked_fit(train, options, callbacks);
        self.abort_job_on(fitted)
    }

    /// [`fit`](Self::fit), before a failure on one process ends the job: the checks of the
    /// data and options, the processes' agreement on them, and the loop.
    fn checked_fit(
        &mut self,
        train: &DatasetOf<M>,
        options: &FitOptions<'_, Target<M>, M::Input>,
        callbacks: Callbacks<'_, '_, M, R, B>,
    ) -> Result<History, TrainError> {
        check_data::<M>(train, "training")?;
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
                split = split_tail::<M>(train, f)?;
                (&split.0, Some(&split.1))
            }
        };
        if let Validation::Data(v) = options.validation {
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
        self.agree_on(train, val, options, batch)?;
        self.in_pool(|t| t.fit_loop(train, val, options, batch, set, callbacks))
    }

    fn fit_loop(
        &mut self,
        train: &DatasetOf<M>,
        val: Option<&DatasetOf<M>>,
        options: &FitOptions<'_, Target<M>, M::Input>,
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
    pub fn evaluate(&mut self, data: &DatasetOf<M>) -> Result<Metrics, TrainError> {
        check_data::<M>(data, "evaluation")?;
        if data.is_empty() {
            return Err(TrainError::Shape(std::string::String::from(
                "the evaluation data has no samples",
            )));
        }
        let set = MetricSet::new(&self.metrics);
        Ok(self.in_pool(|t| t.evaluate_now(data, set)))
    }

    /// Runs `f` with the model's trainable tensors at the rule's [`EVAL_VIEW`], when it has
    /// one, and their training values back afterwards.
    fn at_eval_view<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        let Some(view) = eval_view::<R>() else {
            return f(self);
        };
        self.kept.copy_from_slice(self.model.params());
        let params = self.model.params_mut();
        for (i, t) in M::TRAINABLE_TENSORS.iter().enumerate() {
            let r = t.offset..t.offset + t.tensor.len();
            let training = &self.kept[r.clone()];
            self.step
                .optimizer()
                .view_tensor(view, i, training, &mut params[r]);
        }
        let out = f(self);
        self.model.params_mut().copy_from_slice(&self.kept);
        out
    }

    /// Loss and metrics on `data`, at the rule's [`EVAL_VIEW`] when it has one.
    fn evaluate_now(&mut self, data: &DatasetOf<M>, set: MetricSet) -> Metrics {
        self.at_eval_view(|t| t.evaluate_at_params(data, set))
    }

    /// Loss and metrics on `data` at the model's parameters as they are.
    fn evaluate_at_params(&mut self, data: &DatasetOf<M>, set: MetricSet) -> Metrics {
        let per = data.targets_per_sample();
        let x = Padded::with(data.x(), Lengths::given(data.lengths()));
        let mut acc = Accumulator::new(set);
        for (c, ys) in data.y().chunks(B * per).enumerate() {
            let at = c * B..(c * B + B).min(data.len());
            let out = self.step.predict(&self.model, &x.samples(at, M::IN));
            let loss = <M::Loss as Loss>::loss(out, ys, M::OUT);
            acc.add::<M::Loss>(loss, out, ys, M::OUT);
        }
        acc.metrics()
    }

    /// The model's outputs (`M::OUT` per sample) for any number of samples of `x` (a slice,
    /// an array, a `Vec` or a [`Padded`] batch with lengths), in inference mode, written into
    /// `out`.
    ///
    /// # Panics
    /// If `x` is not whole samples, `out` does not hold their outputs, or `x` does not fit the
    /// model as [`TrainStep::predict`](crate::train::Step::predict) says.
    pub fn predict_into<X: ?Sized + Inputs<M::Input>>(&mut self, x: &X, out: &mut [f32]) {
        let x = Padded::with(x.values(), x.lengths());
        let len = x.values().len();
        assert!(
            len.is_multiple_of(M::IN),
            "input length {len} is not a multiple of {}",
            M::IN
        );
        let n = len / M::IN;
        assert_eq!(out.len(), n * M::OUT, "output length");
        batch::expect(batch::lengths::<M>(x.lengths(), n));
        self.in_pool(|t| {
            t.at_eval_view(|t| {
                for (c, os) in out.chunks_mut(B * M::OUT).enumerate() {
                    let at = c * B..(c * B + B).min(n);
                    os.copy_from_slice(t.step.predict(&t.model, &x.samples(at, M::IN)));
                }
            })
        });
    }

    /// The model's outputs for any number of samples of `x` (as
    /// [`predict_into`](Self::predict_into) takes them), in inference mode.
    ///
    /// # Panics
    /// As [`predict_into`](Self::predict_into).
    pub fn predict<X: ?Sized + Inputs<M::Input>>(&mut self, x: &X) -> Vec<f32> {
        let mut out = std::vec![0.0; x.values().len() / M::IN.max(1) * M::OUT];
        self.predict_into(x, &mut out);
        out
    }
}

/// The index of [`EVAL_VIEW`] among `R`'s views, if it has it.
fn eval_view<R: Rule>() -> Option<usize> {
    R::VIEWS.iter().position(|v| *v == EVAL_VIEW)
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
fn split_tail<M: Model>(
    data: &DatasetOf<M>,
    fraction: f64,
) -> Result<(DatasetOf<M>, DatasetOf<M>), TrainError> {
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

/// Checks `data` for model `M` as a train step checks a batch, over the whole data set: the
/// values and targets per sample, the class labels, the token ids and the lengths.
fn check_data<M: Model>(data: &DatasetOf<M>, what: &str) -> Result<(), TrainError> {
    if data.features() != M::IN {
        return Err(TrainError::Shape(std::format!(
            "the {what} data has {} values per sample, the model takes {}",
            data.features(),
            model_input::<M>()
        )));
    }
    let per = <M::Loss as Loss>::targets_per_sample(M::OUT);
    if !data.is_empty() && data.targets_per_sample() != per {
        return Err(TrainError::Shape(std::format!(
            "the {what} data has {} targets per sample, the model's loss needs {per}",
            data.targets_per_sample()
        )));
    }
    batch::labels::<M>(data.y())?;
    batch::token_ids::<M>(data.x())?;
    batch::lengths::<M>(Lengths::given(data.lengths()), data.len())?;
    Ok(())
}

/// What a sample of model `M` is, in words: `[T, F] = [16, 3] = 48 values` when its layers
/// read sequences of `T =` [`Model::STEPS`] steps of `F` values (`IN = T * F`), `48 values`
/// otherwise; ids instead of values for a model that reads token ids.
fn model_input<M: Model>() -> std::string::String {
    let values = if M::VOCAB > 0 { "token ids" } else { "values" };
    let (n, t) = (M::IN, M::STEPS);
    if t > 0 && n.is_multiple_of(t) {
        std::format!("[T, F] = [{t}, {}] = {n} {values} per sample", n / t)
    } else {
        std::format!("{n} {values} per sample")
    }
}
