//! [`EarlyStopping`]: stop when a monitored quantity stops improving.

use super::{Callback, Control, FitState, Monitor};
use crate::optim::Rule;
use crate::train::error::TrainError;
use crate::train::history::EpochLog;
use crate::train::model::Model;
use std::vec::Vec;

/// Stops a fit when `monitor` has not improved by more than `min_delta` for `patience`
/// epochs, as Keras' `EarlyStopping`; with [`restore_best_weights`](Self::restore_best_weights)
/// the model gets back the parameters (and normalization statistics) of its best epoch when
/// the fit ends. The optimizer's state is not rolled back (as in Keras).
///
/// ```
/// use fusegraph_runtime::train::{EarlyStopping, Monitor};
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

    /// A value the monitored quantity must improve on: until it does, the patience runs down.
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

    /// The epoch with the best value so far.
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
}

impl<M: Model, R: Rule, const B: usize> Callback<M, R, B> for EarlyStopping {
    fn on_train_begin(&mut self, _: FitState<'_, M, R, B>) -> Result<(), TrainError> {
        self.best = self.monitor.worst();
        self.best_epoch = None;
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
        self.wait += 1;
        if self.monitor.improves(value, self.best, self.min_delta) || self.best_epoch.is_none() {
            self.best = value;
            self.best_epoch = Some(log.epoch);
            if self.restore {
                self.best_params.copy_from_slice(state.model.params());
                self.best_state.copy_from_slice(state.model.state());
            }
            let beats_baseline = self
                .baseline
                .is_none_or(|b| self.monitor.improves(value, b, self.min_delta));
            if beats_baseline {
                self.wait = 0;
                return Ok(Control::Continue);
            }
        }
        if self.wait >= self.patience && log.epoch > 1 {
            self.stopped_epoch = Some(log.epoch);
            return Ok(Control::Stop);
        }
        Ok(Control::Continue)
    }

    fn on_train_end(&mut self, state: FitState<'_, M, R, B>) -> Result<(), TrainError> {
        if self.restore && self.best_epoch.is_some() {
            state.model.split_mut().1.copy_from_slice(&self.best_state);
            state.model.params_mut().copy_from_slice(&self.best_params);
        }
        Ok(())
    }
}
