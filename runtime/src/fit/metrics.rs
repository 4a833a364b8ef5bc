//! Metrics reported during training and evaluation: loss, accuracy, MAE, MSE.

use crate::distributed::ShardOutcome;
use crate::loss::{batch_weight, Loss};

/// A metric to report beside the loss, as Keras' `compile(metrics=[...])`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// The fraction of samples predicted right: the arg-max equals the label (sparse
    /// categorical) or, for binary targets, the logit's sign agrees with the target.
    Accuracy,
    /// Mean absolute error between outputs and real-valued targets.
    Mae,
    /// Mean squared error between outputs and real-valued targets.
    Mse,
}

impl Metric {
    /// The metric's name in logs and CSV headers (`accuracy`, `mae`, `mse`).
    pub const fn name(self) -> &'static str {
        match self {
            Metric::Accuracy => "accuracy",
            Metric::Mae => "mae",
            Metric::Mse => "mse",
        }
    }
}

/// Loss and metrics over a set of samples; a metric that was not asked for is `None`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Metrics {
    /// Mean loss per sample (per counted target, where a loss ignores some:
    /// [`IGNORE`](crate::loss::IGNORE)).
    pub loss: f32,
    /// Fraction of samples predicted right.
    pub accuracy: Option<f32>,
    /// Mean absolute error per output value.
    pub mae: Option<f32>,
    /// Mean squared error per output value.
    pub mse: Option<f32>,
}

impl Metrics {
    /// The value of `metric`, if it was computed.
    pub fn get(&self, metric: Metric) -> Option<f32> {
        match metric {
            Metric::Accuracy => self.accuracy,
            Metric::Mae => self.mae,
            Metric::Mse => self.mse,
        }
    }
}

/// Which metrics to compute; a set, so that asking twice changes nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct MetricSet {
    accuracy: bool,
    mae: bool,
    mse: bool,
}

impl MetricSet {
    pub(crate) fn new(metrics: &[Metric]) -> Self {
        MetricSet {
            accuracy: metrics.contains(&Metric::Accuracy),
            mae: metrics.contains(&Metric::Mae),
            mse: metrics.contains(&Metric::Mse),
        }
    }

    /// Whether the set asks for a metric that needs real-valued targets.
    pub(crate) fn needs_values(self) -> bool {
        self.mae || self.mse
    }
}

/// Sums over batches, in `f64`, so that the order of batches barely matters; allocates nothing.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Accumulator {
    set: MetricSet,
    loss: f64,
    correct: usize,
    has_accuracy: bool,
    abs: f64,
    sq: f64,
    /// What the batches' losses weigh ([`batch_weight`]): the samples, when no target is
    /// ignored.
    weight: f64,
    /// What accuracy divides by: what the loss scores ([`Loss::scored`]: the samples, or the
    /// positions of a sequence loss, less the ignored targets).
    scored: usize,
    values: usize,
    /// Batches skipped, which the metrics leave out.
    skipped: usize,
}

impl Accumulator {
    pub(crate) fn new(set: MetricSet) -> Self {
        Accumulator {
            set,
            has_accuracy: true,
            ..Accumulator::default()
        }
    }

    /// Adds a batch: its mean loss, the model's outputs (`width` per sample) and targets.
    pub(crate) fn add<L: Loss>(&mut self, loss: f32, out: &[f32], y: &[L::Target], width: usize) {
        let what = (self.set.accuracy, self.set.needs_values());
        let outcome = ShardOutcome::measure_some::<L>(loss, out, y, width, what);
        self.add_outcome::<L>(&outcome, y, width);
    }

    /// Adds a batch, or a shard of a data-parallel step, by what it gave and its targets.
    pub(crate) fn add_outcome<L: Loss>(
        &mut self,
        outcome: &ShardOutcome,
        y: &[L::Target],
        width: usize,
    ) {
        let weight = batch_weight(y, outcome.samples);
        self.loss += f64::from(outcome.loss) * weight;
        self.weight += weight;
        if self.set.accuracy {
            self.scored += L::scored(y, width);
            match outcome.correct {
                Some(c) => self.correct += c,
                None => self.has_accuracy = false,
            }
        }
        if self.set.needs_values() {
            self.abs += outcome.absolute_error;
            self.sq += outcome.squared_error;
            self.values += (outcome.samples * width).min(y.len());
        }
    }

    /// Counts a batch whose update was skipped, leaving it out of the metrics.
    pub(crate) fn skip(&mut self) {
        self.skipped += 1;
    }

    /// The batches counted by [`skip`](Self::skip).
    pub(crate) fn skipped(&self) -> usize {
        self.skipped
    }

    /// The metrics of the batches added so far: NaN before the first (nothing measured).
    pub(crate) fn metrics(&self) -> Metrics {
        let per_value = |s: f64| (s / self.values as f64) as f32;
        Metrics {
            loss: (self.loss / self.weight) as f32,
            accuracy: (self.set.accuracy && self.has_accuracy)
                .then(|| (self.correct as f64 / self.scored as f64) as f32),
            mae: self.set.mae.then(|| per_value(self.abs)),
            mse: self.set.mse.then(|| per_value(self.sq)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loss::{Mse, SoftmaxCrossEntropy};

    #[test]
    fn accumulates_per_sample_and_per_value() {
        let mut acc = Accumulator::new(MetricSet::new(&[Metric::Mae, Metric::Mse]));
        acc.add::<Mse>(2.0, &[1.0, 2.0, 3.0, 4.0], &[0.0, 2.0, 3.0, 6.0], 2);
        acc.add::<Mse>(5.0, &[0.0, 0.0], &[1.0, 0.0], 2);
        let m = acc.metrics();
        assert!((m.loss - 3.0).abs() < 1e-6, "(2*2 + 5*1) / 3 samples");
        assert_eq!(m.mae, Some(4.0 / 6.0));
        assert_eq!(m.mse, Some(6.0 / 6.0));
        assert_eq!(m.accuracy, None);
    }

    #[test]
    fn accuracy_counts_arg_max() {
        let mut acc = Accumulator::new(MetricSet::new(&[Metric::Accuracy, Metric::Accuracy]));
        let out = [0.1, 0.9, 0.8, 0.2, 0.3, 0.7];
        acc.add::<SoftmaxCrossEntropy>(1.0, &out, &[1, 1, 1], 2);
        assert_eq!(acc.metrics().accuracy, Some(2.0 / 3.0));
        assert_eq!(Metric::Accuracy.name(), "accuracy");
    }

    #[test]
    fn sequence_accuracy_is_per_position() {
        use crate::loss::SequenceCrossEntropy;
        let mut acc = Accumulator::new(MetricSet::new(&[Metric::Accuracy]));
        // One sample of three positions of two classes: positions 0 and 2 are right.
        let out = [0.1, 0.9, 0.8, 0.2, 0.3, 0.7];
        acc.add::<SequenceCrossEntropy<2>>(1.0, &out, &[1, 1, 1], 6);
        let m = acc.metrics();
        assert_eq!(m.accuracy, Some(2.0 / 3.0));
        assert_eq!(m.loss, 1.0, "the loss is per sample");
    }

    #[test]
    fn ignored_targets_are_neither_scored_nor_weighed() {
        use crate::loss::{SequenceCrossEntropy, IGNORE};
        let mut acc = Accumulator::new(MetricSet::new(&[Metric::Accuracy]));
        let out = [0.1, 0.9, 0.8, 0.2, 0.3, 0.7];
        // Positions 0 and 2 count, both right; a mean loss of 1 over them sums to 2.
        acc.add::<SequenceCrossEntropy<2>>(1.0, &out, &[1, IGNORE, 1], 6);
        // All three count, position 1 alone right; a mean of 4 sums to 12.
        acc.add::<SequenceCrossEntropy<2>>(4.0, &out, &[0, 0, 0], 6);
        let m = acc.metrics();
        assert_eq!(m.accuracy, Some(3.0 / 5.0));
        assert!((m.loss - 14.0 / 5.0).abs() < 1e-6, "{}", m.loss);
    }
}
