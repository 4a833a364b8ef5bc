//! [`Hook`] (user code at the end of each epoch) and [`TerminateOnNan`].

use super::{Callback, Control, FitState};
use crate::fit::error::TrainError;
use crate::fit::history::EpochLog;
use crate::optim::Rule;
use crate::train::Model;

/// User code run at the end of each epoch with the epoch's log and the model, step and
/// history; it returns whether to go on.
///
/// ```
/// use fusegraph_runtime::optim::Rule;
/// use fusegraph_runtime::fit::{Callback, Control, EpochLog, FitState, Hook};
/// use fusegraph_runtime::train::Model;
///
/// /// Stops a fit once the training loss is below `target`.
/// fn stop_below<M: Model, R: Rule, const B: usize>(target: f32) -> impl Callback<M, R, B> {
///     Hook::new(move |log: &EpochLog, _state: FitState<'_, M, R, B>| {
///         Ok(if log.train.loss < target { Control::Stop } else { Control::Continue })
///     })
/// }
/// ```
pub struct Hook<F> {
    f: F,
}

impl<F> Hook<F> {
    /// A hook calling `f(log, state)` after every epoch.
    pub fn new(f: F) -> Self {
        Hook { f }
    }
}

impl<M: Model, R: Rule, const B: usize, F> Callback<M, R, B> for Hook<F>
where
    F: FnMut(&EpochLog, FitState<'_, M, R, B>) -> Result<Control, TrainError>,
{
    fn on_epoch_end(
        &mut self,
        log: &EpochLog,
        state: FitState<'_, M, R, B>,
    ) -> Result<Control, TrainError> {
        (self.f)(log, state)
    }
}

/// Stops a fit at the first batch whose loss is NaN or infinite, as Keras' `TerminateOnNaN`;
/// the fit's [`History::stop`](crate::fit::History::stop) says where.
///
/// As in Keras (and as [`TrainStep::run`](crate::train::TrainStep::run) works: the loss is
/// known once the step is done), the update of that batch has been applied: the parameters it
/// touched and the optimizer's slots are then usually NaN, and the step counter counts the
/// batch; with [`FitOptions::skip_non_finite`](crate::fit::FitOptions::skip_non_finite) it
/// has not. Unlike Keras, the interrupted epoch is not logged and no `on_epoch_end` runs for it,
/// so [`ModelCheckpoint`](crate::fit::ModelCheckpoint) does not save the NaN weights;
/// `on_train_end` runs, so [`EarlyStopping`](crate::fit::EarlyStopping) with
/// `restore_best_weights` puts back the weights of its best epoch. Otherwise, resume from the
/// last checkpoint.
#[derive(Clone, Copy, Debug, Default)]
pub struct TerminateOnNan;

impl<M: Model, R: Rule, const B: usize> Callback<M, R, B> for TerminateOnNan {
    fn on_batch_end(&mut self, _: usize, _: usize, loss: f32) -> Control {
        if loss.is_finite() {
            Control::Continue
        } else {
            Control::Stop
        }
    }

    fn handles_non_finite(&self) -> bool {
        true
    }
}
