//! [`History`]: what each epoch of a fit measured, as Keras' `History`, writable as CSV and as
//! an SVG training curve.

use super::error::TrainError;
use super::metrics::{Metric, Metrics};
use std::fmt::Write as _;
use std::string::String;
use std::vec::Vec;

/// What one epoch measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EpochLog {
    /// The epoch, counting from 1.
    pub epoch: usize,
    /// Loss and metrics on the training batches, averaged over the epoch as it went (each
    /// batch measured before its update), as Keras reports them; over the batches that were
    /// not [`skipped`](Self::skipped) (NaN if every one was).
    pub train: Metrics,
    /// Loss and metrics on the validation data after the epoch, if there is any.
    pub val: Option<Metrics>,
    /// The learning rate at the end of the epoch: what the next step will use (the value Keras
    /// logs as `learning_rate`).
    pub lr: Option<f32>,
    /// Optimizer steps taken so far, in all epochs.
    pub steps: u64,
    /// Wall-clock seconds the epoch took (training and validation).
    pub seconds: f64,
    /// Training samples per second.
    pub samples_per_second: f64,
    /// Batches whose update was skipped because their loss or a gradient was NaN or
    /// infinite ([`FitOptions::skip_non_finite`](super::FitOptions::skip_non_finite)).
    pub skipped: usize,
}

/// Why a fit ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Stop {
    /// Every epoch ran.
    #[default]
    Completed,
    /// A callback (early stopping, or user code) stopped it after this epoch.
    Callback {
        /// The last epoch that ran.
        epoch: usize,
    },
    /// A loss was NaN or infinite, in this epoch and batch (counting from 1): the fit stopped
    /// at once (with [`TerminateOnNan`](super::TerminateOnNan)), after that batch's update,
    /// without logging the epoch.
    NonFinite {
        /// The epoch.
        epoch: usize,
        /// The batch within the epoch.
        batch: usize,
    },
}

/// Every epoch's [`EpochLog`], in order, and why the fit ended.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct History {
    /// One log per epoch that completed.
    pub epochs: Vec<EpochLog>,
    /// Why the fit ended.
    pub stop: Stop,
    pub(crate) metrics: Vec<Metric>,
}

impl History {
    pub(crate) fn new(metrics: &[Metric], epochs: usize) -> Self {
        let mut m: Vec<Metric> = Vec::with_capacity(metrics.len());
        for &x in metrics {
            if !m.contains(&x) {
                m.push(x);
            }
        }
        History {
            epochs: Vec::with_capacity(epochs),
            stop: Stop::Completed,
            metrics: m,
        }
    }

    /// The metrics asked for, beside the loss.
    pub fn metrics(&self) -> &[Metric] {
        &self.metrics
    }

    /// The last epoch's log.
    pub fn last(&self) -> Option<&EpochLog> {
        self.epochs.last()
    }

    /// Batches skipped in all logged epochs ([`EpochLog::skipped`]).
    pub fn skipped(&self) -> usize {
        self.epochs.iter().map(|e| e.skipped).sum()
    }

    /// A column of values by its name in the CSV (`loss`, `accuracy`, `val_loss`,
    /// `val_mae`, `lr`, ...), one per epoch (`None` where an epoch has none), like
    /// `history.history["val_loss"]` in Keras.
    pub fn column(&self, name: &str) -> Vec<Option<f64>> {
        self.epochs.iter().map(|e| value(e, name)).collect()
    }

    fn columns(&self) -> Vec<String> {
        let mut names = std::vec![String::from("epoch"), String::from("loss")];
        names.extend(self.metrics.iter().map(|m| String::from(m.name())));
        if self.epochs.iter().any(|e| e.val.is_some()) {
            names.push(String::from("val_loss"));
            names.extend(
                self.metrics
                    .iter()
                    .map(|m| std::format!("val_{}", m.name())),
            );
        }
        for n in ["lr", "steps", "seconds", "samples_per_second"] {
            names.push(String::from(n));
        }
        if self.skipped() > 0 {
            names.push(String::from("skipped"));
        }
        names
    }

    /// The history as CSV: a header (`epoch,loss,accuracy,val_loss,val_accuracy,lr,...`, and
    /// `skipped` last when a batch was skipped) and a
    /// row per epoch; a value an epoch does not have is an empty field (an epoch without
    /// validation, in a fit where others have it), a NaN is `NaN` and infinities are `inf` and
    /// `-inf`, which Python's `float`, pandas and Rust's `parse` read back.
    ///
    /// ```
    /// # use fusegraph_runtime::fit::History;
    /// let csv = History::default().to_csv();
    /// assert_eq!(csv, "epoch,loss,lr,steps,seconds,samples_per_second\n");
    /// ```
    pub fn to_csv(&self) -> String {
        let names = self.columns();
        let mut out = names.join(",");
        out.push('\n');
        for e in &self.epochs {
            for (i, n) in names.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                match (value(e, n), n.as_str()) {
                    (None, _) => {}
                    (Some(v), "epoch" | "steps" | "skipped") => {
                        let _ = write!(out, "{}", v as u64);
                    }
                    (Some(v), "seconds" | "samples_per_second") => {
                        let _ = write!(out, "{v}");
                    }
                    // Losses, metrics and the rate are `f32`: written as such, without the
                    // noise digits of their `f64` widening (0.1, not 0.10000000149011612).
                    (Some(v), _) => {
                        let _ = write!(out, "{}", v as f32);
                    }
                }
            }
            out.push('\n');
        }
        out
    }
}

impl History {
    /// Writes [`to_csv`](Self::to_csv) to `path`, atomically (a temporary file, then a rename).
    pub fn write_csv(&self, path: impl AsRef<std::path::Path>) -> Result<(), TrainError> {
        write_file(path.as_ref(), self.to_csv().as_bytes())
    }

    /// Writes [`to_svg`](Self::to_svg) to `path`, atomically.
    pub fn write_svg(
        &self,
        path: impl AsRef<std::path::Path>,
        title: &str,
    ) -> Result<(), TrainError> {
        write_file(path.as_ref(), self.to_svg(title).as_bytes())
    }
}

fn write_file(path: &std::path::Path, bytes: &[u8]) -> Result<(), TrainError> {
    crate::fs::write_atomic(path, bytes).map_err(TrainError::from)
}

/// The value of column `name` in epoch `e`.
pub(crate) fn value(e: &EpochLog, name: &str) -> Option<f64> {
    let metric = |m: &Metrics, n: &str| match n {
        "loss" => Some(m.loss),
        "accuracy" => m.accuracy,
        "mae" => m.mae,
        "mse" => m.mse,
        _ => None,
    };
    match name {
        "epoch" => Some(e.epoch as f64),
        "lr" => e.lr.map(f64::from),
        "steps" => Some(e.steps as f64),
        "skipped" => Some(e.skipped as f64),
        "seconds" => Some(e.seconds),
        "samples_per_second" => Some(e.samples_per_second),
        n => match n.strip_prefix("val_") {
            Some(v) => e.val.and_then(|m| metric(&m, v)).map(f64::from),
            None => metric(&e.train, n).map(f64::from),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(epoch: usize, loss: f32, val: Option<f32>) -> EpochLog {
        EpochLog {
            epoch,
            train: Metrics {
                loss,
                accuracy: Some(0.5),
                ..Metrics::default()
            },
            val: val.map(|l| Metrics {
                loss: l,
                accuracy: Some(0.25),
                ..Metrics::default()
            }),
            lr: Some(0.125),
            steps: 10 * epoch as u64,
            seconds: 0.5,
            samples_per_second: 100.0,
            skipped: 0,
        }
    }

    #[test]
    fn csv_has_a_column_per_metric_and_a_row_per_epoch() {
        let mut h = History::new(&[Metric::Accuracy, Metric::Accuracy], 2);
        h.epochs.push(log(1, 2.5, Some(3.0)));
        h.epochs.push(log(2, 1.5, None));
        let csv = h.to_csv();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(
            lines[0],
            "epoch,loss,accuracy,val_loss,val_accuracy,lr,steps,seconds,samples_per_second"
        );
        assert_eq!(lines[1], "1,2.5,0.5,3,0.25,0.125,10,0.5,100");
        assert_eq!(lines[2], "2,1.5,0.5,,,0.125,20,0.5,100");
        assert_eq!(h.column("val_loss"), [Some(3.0), None]);
        assert_eq!(h.column("nothing"), [None, None]);
    }

    #[test]
    fn csv_writes_f32_values_without_widening_noise_and_non_finite_values_readably() {
        let mut h = History::new(&[Metric::Accuracy], 2);
        let mut a = log(1, 0.1, Some(f32::INFINITY));
        a.lr = Some(1e-3);
        h.epochs.push(a);
        h.epochs.push(log(2, f32::NAN, Some(f32::NEG_INFINITY)));
        let csv = h.to_csv();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines[1], "1,0.1,0.5,inf,0.25,0.001,10,0.5,100");
        assert_eq!(lines[2], "2,NaN,0.5,-inf,0.25,0.125,20,0.5,100");
        for field in lines[2].split(',') {
            assert!(field.parse::<f64>().is_ok(), "{field}");
        }
    }
}
