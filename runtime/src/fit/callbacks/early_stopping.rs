//! [`EarlyStopping`]: stop when a monitored quantity stops improving.

use super::{Callback, Control, FitState, Monitor};
use crate::fit::error::TrainError;
use crate::fit::history::EpochLog;
use crate::optim::Rule;
use crate::train::Model;
use std::vec::Vec;

/// Stops a fit when `monitor` has not improved by more than `min_delta` for `patience`
/// epochs, as Keras 3's `EarlyStopping`; with
/// [`restore_best_weights`](Self::restore_best_weights) the model gets back the parameters (and
/// normalization statistics) of its best epoch when the fit ends. The optimizer's state is not
/// rolled back (as in Keras).
///
/// The rules are Keras': a value improves on the best by more than `min_delta`, computed in
/// `f64` as Keras does (`value + min_delta < best` when minimizing); a NaN never improves (the
/// best stays what it was); an epoch that improves never stops the fit, but resets the
/// patience only if it also beats the [`baseline`](Self::baseline); the first epoch of a fit
/// (epoch 1) never stops it. When no epoch improved, `restore_best_weights` restores the
/// weights of the first epoch, as Keras does. Its state is not saved in checkpoints: a fit
/// resumed with [`FitOptions::initial_epoch`](crate::fit::FitOptions::initial_epoch) starts
/// counting again, as in Keras.
///
/// ```
/// use fusegraph_runtime::fit::{EarlyStopping, Monitor};
/// let stop = EarlyStopping::new(Monitor::ValLoss).patience(3).min_delta(1e-4).restore_best_weights();
/// assert_eq!(stop.best_epoch(), None);
/// ```
#[derive(Clone, Debug)]
pub struct EarlyStopping {
    monitor: Monitor,
    patience: usize,
    min_delta: f32,
    baseline: Option<f32>,
    restore: bool,
    best: f32,
    best_epoch: Option<usize>,
    saved_epoch: Option<usize>,
    wait: usize,
    stopped_epoch: Option<usize>,
    best_params: Vec<f32>,
    best_state: Vec<f32>,
}

impl EarlyStopping {
    /// Watches `monitor`, with patience 0 and no minimum change.
    pub fn new(monitor: Monitor) -> Self {
        EarlyStopping {
            monitor,
            patience: 0,
            min_delta: 0.0,
            baseline: None,
            restore: false,
            best: monitor.worst(),
            best_epoch: None,
            saved_epoch: None,
            wait: 0,
            stopped_epoch: None,
            best_params: Vec::new(),
            best_state: Vec::new(),
        }
    }

    /// Epochs without improvement to wait before stopping.
    #[must_use]
    pub fn patience(mut self, epochs: usize) -> Self {
        self.patience = epochs;
        self
    }

    /// The least change that counts as an improvement.
    #[must_use]
    pub fn min_delta(mut self, delta: f32) -> Self {
        self.min_delta = delta.abs();
        self
    }

    /// A value the monitored quantity must improve on (by more than `min_delta`): until it
    /// does, the patience is not reset by improving epochs, so the fit stops at the first
    /// epoch without improvement once `patience` epochs have passed without beating it.
    #[must_use]
    pub fn baseline(mut self, value: f32) -> Self {
        self.baseline = Some(value);
        self
    }

    /// Restore the best epoch's weights when the fit ends.
    #[must_use]
    pub fn restore_best_weights(mut self) -> Self {
        self.restore = true;
        self
    }

    /// The epoch with the best value so far (`None` while no epoch improved on the start,
    /// `+inf` or `-inf`: for instance when every value was NaN).
    pub fn best_epoch(&self) -> Option<usize> {
        self.best_epoch
    }

    /// The best value so far.
    pub fn best(&self) -> Option<f32> {
        self.best_epoch.map(|_| self.best)
    }

    /// The epoch after which it stopped the fit, if it did.
    pub fn stopped_epoch(&self) -> Option<usize> {
        self.stopped_epoch
    }

    /// The epoch whose weights `restore_best_weights` restores at the end of the fit: the
    /// best epoch, or the first if none improved.
    pub fn restored_epoch(&self) -> Option<usize> {
        self.saved_epoch.filter(|_| self.restore)
    }

    fn save<M: Model>(&mut self, model: &M, epoch: usize) {
        self.best_params.copy_from_slice(model.params());
        self.best_state.copy_from_slice(model.state());
        self.saved_epoch = Some(epoch);
    }
}

impl<M: Model, R: Rule, const B: usize> Callback<M, R, B> for EarlyStopping {
    fn on_train_begin(&mut self, _: FitState<'_, M, R, B>) -> Result<(), TrainError> {
        self.best = self.monitor.worst();
        self.best_epoch = None;
        self.saved_epoch = None;
        self.wait = 0;
        self.stopped_epoch = None;
        if self.restore {
            self.best_params.clear();
            self.best_params.resize(M::PARAMS, 0.0);
            self.best_state.clear();
            self.best_state.resize(M::STATE, 0.0);
        }
        Ok(())
    }

    fn on_epoch_end(
        &mut self,
        log: &EpochLog,
        state: FitState<'_, M, R, B>,
    ) -> Result<Control, TrainError> {
        let value = self.monitor.require(log)?;
        if self.restore && self.saved_epoch.is_none() {
            // Until an epoch improves, the first epoch's weights are the best (as in Keras).
            self.save(&*state.model, log.epoch);
        }
        self.wait += 1;
        if self.monitor.improves(value, self.best, self.min_delta) {
            self.best = value;
            self.best_epoch = Some(log.epoch);
            if self.restore {
                self.save(&*state.model, log.epoch);
            }
            // The patience restarts only when the value beats the baseline as well; an
            // improving epoch never stops the fit.
            if self
                .baseline
                .is_none_or(|b| self.monitor.improves(value, b, self.min_delta))
            {
                self.wait = 0;
            }
            return Ok(Control::Continue);
        }
        if self.wait >= self.patience && log.epoch > 1 {
            self.stopped_epoch = Some(log.epoch);
            return Ok(Control::Stop);
        }
        Ok(Control::Continue)
    }

    fn on_train_end(&mut self, state: FitState<'_, M, R, B>) -> Result<(), TrainError> {
        if self.restore && self.saved_epoch.is_some() {
            state.model.split_mut().1.copy_from_slice(&self.best_state);
            state.model.params_mut().copy_from_slice(&self.best_params);
        }
        Ok(())
    }
}
