//! Callbacks: code that runs at the start and end of a fit, of each epoch and of each batch,
//! as Keras' `keras.callbacks`.

#[cfg(feature = "checkpoint")]
mod checkpoint;
mod early_stopping;
mod hook;
mod lr;
mod monitor;

#[cfg(feature = "checkpoint")]
pub use checkpoint::ModelCheckpoint;
pub use early_stopping::EarlyStopping;
pub use hook::{Hook, TerminateOnNan};
pub use lr::{LearningRateScheduler, ReduceLrOnPlateau};
pub use monitor::Monitor;

use super::error::TrainError;
use super::history::{EpochLog, History};
use crate::optim::Rule;
use crate::train::Model;
use crate::train::TrainStep;

/// Whether a fit goes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    /// Go on.
    Continue,
    /// Stop after this batch or epoch.
    Stop,
}

/// What a callback may read and change: the model, the train step (with the optimizer and
/// its hyper-parameters) and the history so far.
pub struct FitState<'a, M: Model, R: Rule, const B: usize> {
    /// The model being trained.
    pub model: &'a mut M,
    /// Its train step and optimizer.
    pub step: &'a mut TrainStep<M, R, B>,
    /// The epochs completed so far.
    pub history: &'a History,
    /// This process's rank in data-parallel training (0 otherwise): callbacks that write
    /// files write on rank 0 only.
    pub rank: usize,
}

/// Code called by [`Trainer::fit`](super::Trainer::fit). Every method has a default that does
/// nothing; an error stops the fit and is returned by it.
pub trait Callback<M: Model, R: Rule, const B: usize> {
    /// Before the first epoch.
    fn on_train_begin(&mut self, state: FitState<'_, M, R, B>) -> Result<(), TrainError> {
        let _ = state;
        Ok(())
    }

    /// Before epoch `epoch` (counting from 1).
    fn on_epoch_begin(
        &mut self,
        epoch: usize,
        state: FitState<'_, M, R, B>,
    ) -> Result<(), TrainError> {
        let _ = (epoch, state);
        Ok(())
    }

    /// After batch `batch` (counting from 1) of epoch `epoch`, with its loss. Keep it cheap:
    /// it runs after every step.
    fn on_batch_end(&mut self, epoch: usize, batch: usize, loss: f32) -> Control {
        let _ = (epoch, batch, loss);
        Control::Continue
    }

    /// Whether this callback acts on a NaN or infinite batch loss, as [`TerminateOnNan`]
    /// does: a fit with such a callback does not warn about one. `false` by default.
    fn handles_non_finite(&self) -> bool {
        false
    }

    /// After an epoch and its validation, with what it measured.
    fn on_epoch_end(
        &mut self,
        log: &EpochLog,
        state: FitState<'_, M, R, B>,
    ) -> Result<Control, TrainError> {
        let _ = (log, state);
        Ok(Control::Continue)
    }

    /// After the last epoch (also when a callback stopped the fit).
    fn on_train_end(&mut self, state: FitState<'_, M, R, B>) -> Result<(), TrainError> {
        let _ = state;
        Ok(())
    }
}
