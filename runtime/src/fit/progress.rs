//! What a fit prints: a progress bar on a terminal, a line per epoch otherwise.

use super::history::{EpochLog, Stop};
use super::metrics::Metrics;
use std::io::IsTerminal;
use std::string::String;
use std::time::Instant;

/// How much a fit prints, as Keras' `verbose`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Verbose {
    /// A progress bar when standard output is a terminal, one line per epoch otherwise.
    #[default]
    Auto,
    /// A progress bar per epoch (epoch, step, running loss, samples per second) that stays as
    /// the epoch's summary; nothing when standard output is not a terminal. Needs the
    /// `progress` feature; without it, a line per epoch.
    Bar,
    /// One line per epoch.
    Epochs,
    /// Nothing on standard output (the warning of a non-finite loss still goes to standard
    /// error).
    Silent,
}

/// How often the bar's message (running loss, throughput) is redrawn.
#[cfg(feature = "progress")]
const REDRAW_SECONDS: f64 = 0.1;

/// The progress of one fit.
pub(crate) struct Progress {
    lines: bool,
    #[cfg(feature = "progress")]
    bar: Option<indicatif::ProgressBar>,
    #[cfg(feature = "progress")]
    use_bar: bool,
    epochs: usize,
    #[cfg(feature = "progress")]
    last_draw: Option<Instant>,
}

impl Progress {
    pub(crate) fn new(verbose: Verbose, epochs: usize) -> Self {
        let terminal = std::io::stdout().is_terminal();
        let bar = cfg!(feature = "progress")
            && terminal
            && matches!(verbose, Verbose::Auto | Verbose::Bar);
        let lines = !bar
            && (verbose == Verbose::Epochs
                || (verbose == Verbose::Auto && !terminal)
                || (verbose == Verbose::Bar && !cfg!(feature = "progress")));
        Progress {
            lines,
            #[cfg(feature = "progress")]
            bar: None,
            #[cfg(feature = "progress")]
            use_bar: bar,
            epochs,
            #[cfg(feature = "progress")]
            last_draw: None,
        }
    }

    /// A new epoch of `batches` batches begins.
    #[cfg_attr(not(feature = "progress"), allow(unused_variables))]
    pub(crate) fn begin_epoch(&mut self, epoch: usize, batches: usize) {
        #[cfg(feature = "progress")]
        if self.use_bar {
            self.last_draw = None;
            let style = indicatif::ProgressStyle::with_template(
                "{prefix} [{bar:30.cyan/blue}] {pos}/{len} {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> ");
            let bar = indicatif::ProgressBar::with_draw_target(
                Some(batches as u64),
                indicatif::ProgressDrawTarget::stdout(),
            )
            .with_style(style)
            .with_prefix(std::format!("epoch {epoch}/{}", self.epochs));
            self.bar = Some(bar);
        }
    }

    /// A batch ended; `loss` gives the running mean of the epoch (asked for only when the bar
    /// is redrawn), `samples` seen so far.
    #[cfg_attr(not(feature = "progress"), allow(unused_variables))]
    pub(crate) fn batch(
        &mut self,
        done: usize,
        loss: impl FnOnce() -> f32,
        samples: usize,
        start: Instant,
    ) {
        #[cfg(feature = "progress")]
        if let Some(bar) = &self.bar {
            bar.set_position(done as u64);
            let now = Instant::now();
            let due = self
                .last_draw
                .is_none_or(|t| now.duration_since(t).as_secs_f64() >= REDRAW_SECONDS);
            if due {
                self.last_draw = Some(now);
                let rate = samples as f64 / now.duration_since(start).as_secs_f64().max(1e-9);
                bar.set_message(std::format!("loss {:.4} · {} samples/s", loss(), si(rate)));
            }
        }
    }

    /// The epoch ended with `log`.
    pub(crate) fn end_epoch(&mut self, log: &EpochLog) {
        #[cfg(feature = "progress")]
        if let Some(bar) = self.bar.take() {
            bar.finish_with_message(summary(log));
        }
        if self.lines {
            std::println!("epoch {}/{}: {}", log.epoch, self.epochs, summary(log));
        }
    }
}

impl Progress {
    /// Prints `warning` on standard error, above the bar if one is drawn.
    pub(crate) fn warn(&self, warning: &str) {
        let print = || std::eprintln!("warning: {warning}");
        #[cfg(feature = "progress")]
        if let Some(bar) = &self.bar {
            bar.suspend(print);
            return;
        }
        print();
    }

    /// A callback stopped the fit within an epoch (`loss`: the epoch's running mean).
    pub(crate) fn stopped(&mut self, stop: &Stop, loss: f32) {
        let (epoch, what) = match *stop {
            Stop::NonFinite { epoch, batch } => (
                epoch,
                std::format!("stopped at batch {batch}: the loss is {loss}"),
            ),
            Stop::Callback { epoch } => (
                epoch,
                String::from("stopped by a callback within the epoch"),
            ),
            Stop::Completed => return,
        };
        #[cfg(feature = "progress")]
        if let Some(bar) = self.bar.take() {
            bar.abandon_with_message(what);
            return;
        }
        if self.lines {
            std::println!("epoch {epoch}/{}: {what}", self.epochs);
        }
    }
}

/// `loss 0.1234 - accuracy 0.9612 - val_loss ... - 0.21 s - 45.1k samples/s`.
pub(crate) fn summary(log: &EpochLog) -> String {
    let mut s = metrics_text(&log.train, "");
    if let Some(v) = &log.val {
        s.push_str(" - ");
        s.push_str(&metrics_text(v, "val_"));
    }
    s.push_str(&std::format!(
        " - {} - {} samples/s",
        duration(log.seconds),
        si(log.samples_per_second)
    ));
    match log.skipped {
        0 => {}
        1 => s.push_str(" - 1 batch skipped"),
        n => s.push_str(&std::format!(" - {n} batches skipped")),
    }
    s
}

fn metrics_text(m: &Metrics, prefix: &str) -> String {
    let mut s = std::format!("{prefix}loss {:.4}", m.loss);
    for (name, v) in [("accuracy", m.accuracy), ("mae", m.mae), ("mse", m.mse)] {
        if let Some(v) = v {
            s.push_str(&std::format!(" - {prefix}{name} {v:.4}"));
        }
    }
    s
}

/// Seconds as `1.50 s`, or `12 ms` below a second.
fn duration(seconds: f64) -> String {
    if seconds >= 1.0 {
        std::format!("{seconds:.2} s")
    } else {
        std::format!("{:.0} ms", seconds * 1e3)
    }
}

/// `1234567.0` as `1.23M`.
fn si(v: f64) -> String {
    match v {
        v if v >= 1e9 => std::format!("{:.2}G", v / 1e9),
        v if v >= 1e6 => std::format!("{:.2}M", v / 1e6),
        v if v >= 1e3 => std::format!("{:.1}k", v / 1e3),
        v => std::format!("{v:.0}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_names_each_metric() {
        let log = EpochLog {
            epoch: 2,
            train: Metrics {
                loss: 0.5,
                accuracy: Some(0.875),
                ..Metrics::default()
            },
            val: Some(Metrics {
                loss: 0.25,
                mae: Some(0.125),
                ..Metrics::default()
            }),
            lr: None,
            steps: 4,
            seconds: 1.5,
            samples_per_second: 12_345.0,
            skipped: 0,
        };
        assert_eq!(
            summary(&log),
            "loss 0.5000 - accuracy 0.8750 - val_loss 0.2500 - val_mae 0.1250 - 1.50 s - 12.3k samples/s"
        );
        assert_eq!(si(2.5e6), "2.50M");
        assert_eq!(duration(0.0123), "12 ms");
        assert_eq!(si(12.0), "12");
    }
}
