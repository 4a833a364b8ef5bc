//! [`Monitor`]: the quantity a callback watches.

use crate::fit::history::EpochLog;
use crate::fit::metrics::Metric;

/// A quantity of an [`EpochLog`] that a callback watches; losses and errors improve by going
/// down, accuracy by going up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Monitor {
    /// The training loss.
    Loss,
    /// The validation loss.
    ValLoss,
    /// A training metric.
    Metric(Metric),
    /// A validation metric.
    ValMetric(Metric),
}

impl Monitor {
    /// The value in `log`, if the epoch measured it.
    pub fn value(self, log: &EpochLog) -> Option<f32> {
        match self {
            Monitor::Loss => Some(log.train.loss),
            Monitor::ValLoss => log.val.map(|v| v.loss),
            Monitor::Metric(m) => log.train.get(m),
            Monitor::ValMetric(m) => log.val.and_then(|v| v.get(m)),
        }
    }

    /// Whether smaller values are better.
    pub fn minimizes(self) -> bool {
        !matches!(
            self,
            Monitor::Metric(Metric::Accuracy) | Monitor::ValMetric(Metric::Accuracy)
        )
    }

    /// Whether `value` improves on `best` by more than `min_delta`: Keras' `_is_improvement`,
    /// in `f64` (`value + min_delta < best` when minimizing); never for a NaN.
    pub fn improves(self, value: f32, best: f32, min_delta: f32) -> bool {
        let (v, b, d) = (f64::from(value), f64::from(best), f64::from(min_delta));
        if self.minimizes() {
            v + d < b
        } else {
            v - d > b
        }
    }

    /// The worst possible value, to start from.
    pub fn worst(self) -> f32 {
        if self.minimizes() {
            f32::INFINITY
        } else {
            f32::NEG_INFINITY
        }
    }

    /// The name in logs (`val_loss`, `accuracy`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Monitor::Loss => "loss",
            Monitor::ValLoss => "val_loss",
            Monitor::Metric(m) => m.name(),
            Monitor::ValMetric(Metric::Accuracy) => "val_accuracy",
            Monitor::ValMetric(Metric::Mae) => "val_mae",
            Monitor::ValMetric(Metric::Mse) => "val_mse",
        }
    }

    /// The value in `log`, or an error saying the fit does not measure it.
    pub(crate) fn require(self, log: &EpochLog) -> Result<f32, crate::fit::TrainError> {
        self.value(log).ok_or_else(|| {
            crate::fit::TrainError::Config(std::format!(
                "a callback monitors `{}`, which this fit does not measure: add validation \
                 data or the metric, or monitor another quantity",
                self.name()
            ))
        })
    }
}
