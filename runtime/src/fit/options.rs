//! [`FitOptions`]: epochs, batch size, validation, shuffling.

use crate::data::Dataset;
use crate::rng::Seed;

/// Where a fit's validation data comes from.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Validation<'a, T, X> {
    None,
    Data(&'a Dataset<T, X>),
    Split(f64),
}

/// How to fit, as the arguments of Keras' `fit`: epochs, batch size, validation data or
/// split, shuffling with a seed, the epoch to start from when resuming, and whether to skip
/// the update of a batch whose loss or gradients are not finite. `T` is the targets' type
/// and `X` the samples' values (`f32` features or `u32` token ids), those of the data sets the
/// fit takes.
///
/// ```
/// use fusegraph_runtime::rng::Seed;
/// use fusegraph_runtime::fit::FitOptions;
/// let options = FitOptions::<u32>::new(30).validation_split(0.1).seed(Seed(1));
/// assert_eq!(options.epochs(), 30);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct FitOptions<'a, T, X = f32> {
    pub(crate) epochs: usize,
    pub(crate) batch_size: Option<usize>,
    pub(crate) validation: Validation<'a, T, X>,
    pub(crate) shuffle: bool,
    pub(crate) seed: Seed,
    pub(crate) initial_epoch: usize,
    pub(crate) skip_non_finite: bool,
}

impl<'a, T, X> FitOptions<'a, T, X> {
    /// Train for `epochs` epochs, in batches of the train step's maximum, shuffled with seed 0,
    /// without validation.
    pub fn new(epochs: usize) -> Self {
        FitOptions {
            epochs,
            batch_size: None,
            validation: Validation::None,
            shuffle: true,
            seed: Seed(0),
            initial_epoch: 0,
            skip_non_finite: false,
        }
    }

    /// The number of epochs (including those before [`initial_epoch`](Self::initial_epoch)).
    pub fn epochs(&self) -> usize {
        self.epochs
    }

    /// Samples per batch, at most the train step's maximum `B` (the default); the last batch
    /// of an epoch may be smaller.
    #[must_use]
    pub fn batch_size(mut self, n: usize) -> Self {
        self.batch_size = Some(n);
        self
    }

    /// Evaluate on `data` after each epoch.
    #[must_use]
    pub fn validation_data(mut self, data: &'a Dataset<T, X>) -> Self {
        self.validation = Validation::Data(data);
        self
    }

    /// Hold out the last `fraction` of the training samples (before shuffling) and evaluate on
    /// them after each epoch, as Keras' `validation_split`: the first
    /// `floor(n * (1 - fraction))` samples train, the rest validate. A split of 0 is no
    /// validation; one that leaves no sample to train or to validate on is an error.
    #[must_use]
    pub fn validation_split(mut self, fraction: f64) -> Self {
        self.validation = Validation::Split(fraction);
        self
    }

    /// Whether to shuffle the training samples before each epoch (the default).
    #[must_use]
    pub fn shuffle(mut self, on: bool) -> Self {
        self.shuffle = on;
        self
    }

    /// The seed of the shuffling: epoch `e` draws its order from stream `e` of this seed, so
    /// a fit resumed at an epoch boundary sees the same batches.
    #[must_use]
    pub fn seed(mut self, seed: Seed) -> Self {
        self.seed = seed;
        self
    }

    /// Epochs already done (when resuming): the fit runs epochs `initial_epoch + 1..=epochs`.
    #[must_use]
    pub fn initial_epoch(mut self, epoch: usize) -> Self {
        self.initial_epoch = epoch;
        self
    }

    /// Whether to skip the update of a batch whose loss or any gradient is NaN or infinite
    /// ([`TrainStep::run_or_skip`](crate::train::Step::run_or_skip)): the parameters, the
    /// optimizer's slots and step counter and the running statistics stay as they were, and
    /// the fit goes on with the next batch, as a mixed-precision loss scaler skips an
    /// overflowing step. Each epoch's log counts them ([`EpochLog::skipped`]) and measures
    /// its training metrics over the other batches. Off by default: without it or
    /// [`TerminateOnNan`], a non-finite loss is trained on, with a warning.
    ///
    /// [`EpochLog::skipped`]: super::EpochLog::skipped
    /// [`TerminateOnNan`]: super::TerminateOnNan
    #[must_use]
    pub fn skip_non_finite(mut self, on: bool) -> Self {
        self.skip_non_finite = on;
        self
    }
}
