//! [`ModelCheckpoint`]: save the model and its training state after an epoch.

use super::{Callback, Control, FitState, Monitor};
use crate::fit::error::TrainError;
use crate::fit::history::{value, EpochLog};
use crate::optim::Rule;
use crate::train::Model;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::string::{String, ToString};

/// Saves a checkpoint (parameters, state, optimizer slots, step counter, seed and the epoch,
/// see [`checkpoint`](crate::checkpoint)) after every epoch, or only when `monitor` improves,
/// as Keras' `ModelCheckpoint`. Each save replaces the file atomically.
///
/// The path may hold placeholders, as Keras' `filepath`: `{epoch}` (counting from 1) or
/// `{epoch:02d}` (zero-padded to 2 digits), and a logged value, `{val_loss}` or
/// `{val_loss:.4f}` (any column of [`History::column`](crate::fit::History::column) but
/// `epoch`: `loss`, `accuracy`, `val_mae`, `lr`, ...). A placeholder it cannot fill is an
/// error when the fit starts; a value the epoch did not measure, when it ends. With
/// `save_best_only`, a NaN is never an improvement (as in Keras).
///
/// ```
/// use fusegraph_runtime::fit::{ModelCheckpoint, Monitor};
/// let _best = ModelCheckpoint::new("runs/best.safetensors").save_best_only(Monitor::ValLoss);
/// let each = ModelCheckpoint::new("runs/epoch-{epoch:03d}-{val_loss:.3f}.safetensors");
/// assert_eq!(each.path_for(7).to_str(), Some("runs/epoch-007-{val_loss:.3f}.safetensors"));
/// ```
#[derive(Clone, Debug)]
pub struct ModelCheckpoint {
    path: PathBuf,
    best_only: Option<Monitor>,
    best: f32,
    last_saved: Option<usize>,
    last_path: Option<PathBuf>,
}

impl ModelCheckpoint {
    /// Saves to `path` after every epoch.
    pub fn new(path: impl AsRef<Path>) -> Self {
        ModelCheckpoint {
            path: path.as_ref().to_path_buf(),
            best_only: None,
            best: f32::NAN,
            last_saved: None,
            last_path: None,
        }
    }

    /// Saves only when `monitor` is better than at every earlier save.
    #[must_use]
    pub fn save_best_only(mut self, monitor: Monitor) -> Self {
        self.best_only = Some(monitor);
        self.best = monitor.worst();
        self
    }

    /// The epoch of the last save.
    pub fn last_saved(&self) -> Option<usize> {
        self.last_saved
    }

    /// The file of the last save (with its placeholders filled).
    pub fn last_path(&self) -> Option<&Path> {
        self.last_path.as_deref()
    }

    /// The file for `epoch`: the path with `{epoch}` (and `{epoch:0Nd}`) filled, other
    /// placeholders left as they are.
    pub fn path_for(&self, epoch: usize) -> PathBuf {
        let p = self.path.to_string_lossy();
        match fill(&p, epoch, None) {
            Ok(s) => PathBuf::from(s),
            Err(_) => self.path.clone(),
        }
    }

    /// The file for the epoch of `log`, every placeholder filled.
    fn path_for_log(&self, log: &EpochLog) -> Result<PathBuf, TrainError> {
        fill(&self.path.to_string_lossy(), log.epoch, Some(log))
            .map(PathBuf::from)
            .map_err(TrainError::Config)
    }
}

/// `template` with its `{name}` and `{name:spec}` placeholders filled from `epoch` and `log`
/// (left as they are without `log`); `{{` and `}}` are braces.
fn fill(template: &str, epoch: usize, log: Option<&EpochLog>) -> Result<String, String> {
    let mut out = String::with_capacity(template.len() + 8);
    let mut rest = template;
    while let Some(i) = rest.find(['{', '}']) {
        out.push_str(&rest[..i]);
        let brace = &rest[i..];
        if brace.starts_with("{{") || brace.starts_with("}}") {
            out.push_str(&brace[..1]);
            rest = &brace[2..];
            continue;
        }
        let Some(end) = brace.find('}').filter(|_| brace.starts_with('{')) else {
            return Err(std::format!(
                "the checkpoint path `{template}` has an unmatched brace: write `{{{{` or \
                 `}}}}` for a literal one"
            ));
        };
        let inner = &brace[1..end];
        rest = &brace[end + 1..];
        let (name, spec) = inner.split_once(':').unwrap_or((inner, ""));
        if name == "epoch" {
            let width = spec
                .strip_suffix('d')
                .filter(|w| w.bytes().all(|b| b.is_ascii_digit()));
            let Some(width) = width.or((spec.is_empty()).then_some("")) else {
                return Err(bad_spec(template, inner));
            };
            let pad = width.parse::<usize>().unwrap_or(0);
            let _ = if width.starts_with('0') {
                write!(out, "{epoch:0pad$}")
            } else {
                write!(out, "{epoch:pad$}")
            };
            continue;
        }
        if !is_column(name) {
            return Err(std::format!(
                "the checkpoint path `{template}` has a placeholder `{{{inner}}}`: use \
                 `{{epoch}}`, `{{epoch:03d}}` or a logged value such as `{{val_loss:.4f}}`"
            ));
        }
        let digits = match spec {
            "" => None,
            s => match s
                .strip_prefix('.')
                .and_then(|s| s.strip_suffix('f'))
                .and_then(|d| d.parse::<usize>().ok())
            {
                Some(d) => Some(d),
                None => return Err(bad_spec(template, inner)),
            },
        };
        let Some(log) = log else {
            out.push_str(&brace[..end + 1]);
            continue;
        };
        let Some(v) = value(log, name) else {
            return Err(std::format!(
                "the checkpoint path `{template}` needs `{name}`, which epoch {epoch} did not \
                 measure: add validation data or the metric, or change the path"
            ));
        };
        let v = v as f32;
        let _ = match digits {
            Some(d) => write!(out, "{v:.d$}"),
            None => write!(out, "{v}"),
        };
    }
    out.push_str(rest);
    Ok(out)
}

fn bad_spec(template: &str, inner: &str) -> String {
    std::format!(
        "the checkpoint path `{template}` formats `{{{inner}}}` in a way this does not know: \
         use `{{epoch}}`, `{{epoch:03d}}`, `{{val_loss}}` or `{{val_loss:.4f}}`"
    )
}

/// Whether `name` is a logged value (a column of the history other than the epoch).
fn is_column(name: &str) -> bool {
    let metric = |n: &str| matches!(n, "loss" | "accuracy" | "mae" | "mse");
    metric(name)
        || name.strip_prefix("val_").is_some_and(metric)
        || matches!(
            name,
            "lr" | "steps" | "seconds" | "samples_per_second" | "skipped"
        )
}

impl<M: Model, R: Rule, const B: usize> Callback<M, R, B> for ModelCheckpoint {
    fn on_train_begin(&mut self, _: FitState<'_, M, R, B>) -> Result<(), TrainError> {
        if let Some(m) = self.best_only {
            self.best = m.worst();
        }
        fill(&self.path.to_string_lossy(), 0, None).map_err(TrainError::Config)?;
        Ok(())
    }

    fn on_epoch_end(
        &mut self,
        log: &EpochLog,
        state: FitState<'_, M, R, B>,
    ) -> Result<Control, TrainError> {
        if let Some(m) = self.best_only {
            let value = m.require(log)?;
            if !m.improves(value, self.best, 0.0) {
                return Ok(Control::Continue);
            }
            self.best = value;
        }
        if state.rank != 0 {
            return Ok(Control::Continue);
        }
        let path = self.path_for_log(log)?;
        let epoch = log.epoch.to_string();
        crate::checkpoint::save_with(&path, state.model, state.step, &[("epoch", &epoch)])?;
        self.last_saved = Some(log.epoch);
        self.last_path = Some(path);
        Ok(Control::Continue)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fit::Metrics;

    fn log() -> EpochLog {
        EpochLog {
            epoch: 7,
            train: Metrics {
                loss: 0.5,
                ..Metrics::default()
            },
            val: Some(Metrics {
                loss: 0.123_456,
                ..Metrics::default()
            }),
            lr: Some(1e-3),
            steps: 70,
            seconds: 1.0,
            samples_per_second: 1.0,
            skipped: 0,
        }
    }

    #[test]
    fn placeholders_are_filled_as_keras_formats_them() {
        let f = |t: &str| fill(t, 7, Some(&log()));
        assert_eq!(f("e-{epoch}.st").unwrap(), "e-7.st");
        assert_eq!(f("e-{epoch:03d}.st").unwrap(), "e-007.st");
        assert_eq!(f("e-{epoch:3d}.st").unwrap(), "e-  7.st");
        assert_eq!(
            f("m.{epoch:02d}-{val_loss:.2f}.st").unwrap(),
            "m.07-0.12.st"
        );
        assert_eq!(f("{loss}-{lr}").unwrap(), "0.5-0.001");
        assert_eq!(f("{{epoch}}").unwrap(), "{epoch}");
        for bad in ["{epoch:x}", "{val_los}", "{loss:>5}", "a{epoch", "a}b"] {
            assert!(f(bad).is_err(), "{bad}");
        }
        let e = f("{val_acc:.2f}").unwrap_err();
        assert!(e.contains("`{val_acc:.2f}`"), "{e}");
        let e = f("{val_mae}").unwrap_err();
        assert!(e.contains("did not measure"), "{e}");
        let c = ModelCheckpoint::new("runs/{epoch:02d}-{val_loss:.2f}");
        assert_eq!(c.path_for(3), PathBuf::from("runs/03-{val_loss:.2f}"));
    }
}
