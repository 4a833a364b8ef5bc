//! [`ModelCheckpoint`]: save the model and its training state after an epoch.

use super::{Callback, Control, FitState, Monitor};
use crate::optim::Rule;
use crate::train::error::TrainError;
use crate::train::history::EpochLog;
use crate::train::model::Model;
use std::path::{Path, PathBuf};
use std::string::ToString;

/// Saves a checkpoint (parameters, state, optimizer slots, step counter, seed and the epoch,
/// see [`checkpoint`](crate::checkpoint)) after every epoch, or only when `monitor` improves,
/// as Keras' `ModelCheckpoint`. Each save replaces the file atomically. `{epoch}` in the path
/// is replaced by the epoch, to keep one file per epoch.
///
/// ```
/// use fusegraph_runtime::train::{ModelCheckpoint, Monitor};
/// let _best = ModelCheckpoint::new("runs/best.safetensors").save_best_only(Monitor::ValLoss);
/// let _each = ModelCheckpoint::new("runs/epoch-{epoch}.safetensors");
/// ```
#[derive(Clone, Debug)]
pub struct ModelCheckpoint {
    path: PathBuf,
    best_only: Option<Monitor>,
    best: f32,
    last_saved: Option<usize>,
}

impl ModelCheckpoint {
    /// Saves to `path` after every epoch.
    pub fn new(path: impl AsRef<Path>) -> Self {
        ModelCheckpoint {
            path: path.as_ref().to_path_buf(),
            best_only: None,
            best: f32::NAN,
            last_saved: None,
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

    /// The file for `epoch`.
    pub fn path_for(&self, epoch: usize) -> PathBuf {
        let p = self.path.to_string_lossy();
        if p.contains("{epoch}") {
            PathBuf::from(p.replace("{epoch}", &epoch.to_string()))
        } else {
            self.path.clone()
        }
    }
}

impl<M: Model, R: Rule, const B: usize> Callback<M, R, B> for ModelCheckpoint {
    fn on_train_begin(&mut self, _: FitState<'_, M, R, B>) -> Result<(), TrainError> {
        if let Some(m) = self.best_only {
            self.best = m.worst();
        }
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
        let epoch = log.epoch.to_string();
        crate::checkpoint::save_with(
            self.path_for(log.epoch),
            state.model,
            state.step,
            &[("epoch", &epoch)],
        )?;
        self.last_saved = Some(log.epoch);
        Ok(Control::Continue)
    }
}
