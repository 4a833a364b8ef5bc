//! Learning-rate callbacks: a per-epoch schedule and reduction on a plateau.

use super::{Callback, Control, FitState, Monitor};
use crate::fit::error::TrainError;
use crate::fit::history::EpochLog;
use crate::optim::LearningRate;
use crate::train::Model;
use crate::train::TrainStep;

/// The rule's learning rate, or an error if a step schedule owns the learning rate.
fn learning_rate<M: Model, R: LearningRate, const B: usize>(
    step: &TrainStep<M, R, B>,
    who: &str,
) -> Result<f32, TrainError> {
    let opt = step.optimizer();
    if opt.config().schedule.is_some() {
        return Err(TrainError::Config(std::format!(
            "{who} sets the rule's `lr`, but the optimizer's config has a schedule, which decides \
             the learning rate: use one or the other"
        )));
    }
    Ok(opt.rule().lr())
}

fn set_learning_rate<M: Model, R: LearningRate, const B: usize>(
    step: &mut TrainStep<M, R, B>,
    lr: f32,
) {
    step.optimizer_mut().rule_mut().set_lr(lr);
}

/// Sets the learning rate before each epoch to `schedule(epoch, lr)`, where `epoch` counts
/// from 0 (as Keras passes it) and `lr` is the current rate, as Keras'
/// `LearningRateScheduler`. The new rate is the rule's `lr` hyper-parameter, which a
/// checkpoint saves; a rule without one ([`LearningRate`]) does not compile with it.
///
/// ```
/// use fusegraph_runtime::fit::LearningRateScheduler;
/// // Halve the rate every 10 epochs.
/// let _halve = LearningRateScheduler::new(|epoch, lr| if epoch > 0 && epoch % 10 == 0 { lr / 2.0 } else { lr });
/// ```
pub struct LearningRateScheduler<F> {
    schedule: F,
}

impl<F: FnMut(usize, f32) -> f32> LearningRateScheduler<F> {
    /// A scheduler calling `schedule(epoch, lr)`.
    pub fn new(schedule: F) -> Self {
        LearningRateScheduler { schedule }
    }
}

impl<M: Model, R: LearningRate, const B: usize, F: FnMut(usize, f32) -> f32> Callback<M, R, B>
    for LearningRateScheduler<F>
{
    fn on_epoch_begin(
        &mut self,
        epoch: usize,
        state: FitState<'_, M, R, B>,
    ) -> Result<(), TrainError> {
        let lr = learning_rate(state.step, "LearningRateScheduler")?;
        let next = (self.schedule)(epoch - 1, lr);
        if !next.is_finite() || next < 0.0 {
            return Err(TrainError::Config(std::format!(
                "the learning-rate schedule gave {next} for epoch {}",
                epoch - 1
            )));
        }
        set_learning_rate(state.step, next);
        Ok(())
    }
}

/// Multiplies the learning rate by `factor` when `monitor` has not improved for `patience`
/// epochs, then waits `cooldown` epochs, never going below `min_lr`, as Keras'
/// `ReduceLROnPlateau` (defaults: factor 0.1, patience 10, min delta 1e-4). It sets the rule's
/// `lr` hyper-parameter: a rule without one ([`LearningRate`]) does not compile with it.
///
/// ```
/// use fusegraph_runtime::fit::{Monitor, ReduceLrOnPlateau};
/// let _reduce = ReduceLrOnPlateau::new(Monitor::ValLoss).factor(0.5).patience(2).min_lr(1e-5);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct ReduceLrOnPlateau {
    monitor: Monitor,
    factor: f32,
    patience: usize,
    min_delta: f32,
    cooldown: usize,
    min_lr: f32,
    best: f32,
    wait: usize,
    cooldown_left: usize,
}

impl ReduceLrOnPlateau {
    /// Watches `monitor` with Keras' defaults.
    pub fn new(monitor: Monitor) -> Self {
        ReduceLrOnPlateau {
            monitor,
            factor: 0.1,
            patience: 10,
            min_delta: 1e-4,
            cooldown: 0,
            min_lr: 0.0,
            best: monitor.worst(),
            wait: 0,
            cooldown_left: 0,
        }
    }

    /// The factor the rate is multiplied by, in (0, 1).
    #[must_use]
    pub fn factor(mut self, factor: f32) -> Self {
        assert!(
            factor > 0.0 && factor < 1.0,
            "factor {factor} is not in (0, 1)"
        );
        self.factor = factor;
        self
    }

    /// Epochs without improvement before a reduction.
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

    /// Epochs to wait after a reduction before counting again.
    #[must_use]
    pub fn cooldown(mut self, epochs: usize) -> Self {
        self.cooldown = epochs;
        self
    }

    /// The lowest rate.
    #[must_use]
    pub fn min_lr(mut self, lr: f32) -> Self {
        self.min_lr = lr;
        self
    }
}

impl<M: Model, R: LearningRate, const B: usize> Callback<M, R, B> for ReduceLrOnPlateau {
    fn on_train_begin(&mut self, state: FitState<'_, M, R, B>) -> Result<(), TrainError> {
        learning_rate(state.step, "ReduceLrOnPlateau")?;
        self.best = self.monitor.worst();
        self.wait = 0;
        self.cooldown_left = 0;
        Ok(())
    }

    fn on_epoch_end(
        &mut self,
        log: &EpochLog,
        state: FitState<'_, M, R, B>,
    ) -> Result<Control, TrainError> {
        let value = self.monitor.require(log)?;
        if self.cooldown_left > 0 {
            self.cooldown_left -= 1;
            self.wait = 0;
        }
        if self.monitor.improves(value, self.best, self.min_delta) {
            self.best = value;
            self.wait = 0;
        } else if self.cooldown_left == 0 {
            self.wait += 1;
            if self.wait >= self.patience {
                let lr = learning_rate(state.step, "ReduceLrOnPlateau")?;
                if lr > self.min_lr {
                    set_learning_rate(state.step, (lr * self.factor).max(self.min_lr));
                    self.cooldown_left = self.cooldown;
                    self.wait = 0;
                }
            }
        }
        Ok(Control::Continue)
    }
}
