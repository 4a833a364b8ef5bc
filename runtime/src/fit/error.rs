//! [`TrainError`]: why a fit, an evaluation or a callback could not go on.

use crate::train::BatchError;
use std::boxed::Box;
use std::fmt;
use std::string::String;

/// Why training could not start or go on. Nothing is lost: the model and the optimizer keep
/// the state of the last completed step.
#[derive(Debug)]
pub enum TrainError {
    /// The data set does not fit the model (features per sample, targets per sample).
    Shape(String),
    /// Data that a train step's checked methods refuse as well: a class label outside the
    /// loss's classes (its sample counts from the data set's first), or a batch size larger
    /// than the step's `B`.
    Batch(BatchError),
    /// An option or callback that cannot work with this model, optimizer or data.
    Config(String),
    /// Writing a file (a history, a plot).
    Io(crate::fs::WriteError),
    /// Saving or loading a checkpoint.
    #[cfg(feature = "checkpoint")]
    Checkpoint(crate::checkpoint::CheckpointError),
    /// The processes of a data-parallel fit differ in what they must share (the data, the
    /// options, the model, the optimizer, the kernels): every process gets this error.
    Ranks(crate::distributed::Mismatch),
    /// An error from user code in a callback.
    Callback(Box<dyn std::error::Error + Send + Sync>),
}

impl fmt::Display for TrainError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrainError::Shape(what) | TrainError::Config(what) => f.write_str(what),
            TrainError::Batch(e) => write!(f, "{e}"),
            TrainError::Ranks(e) => write!(f, "{e}"),
            TrainError::Io(e) => write!(f, "{e}"),
            #[cfg(feature = "checkpoint")]
            TrainError::Checkpoint(e) => write!(f, "{e}"),
            TrainError::Callback(e) => write!(f, "callback: {e}"),
        }
    }
}

impl std::error::Error for TrainError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TrainError::Batch(e) => Some(e),
            TrainError::Ranks(e) => Some(e),
            TrainError::Io(e) => Some(e),
            #[cfg(feature = "checkpoint")]
            TrainError::Checkpoint(e) => Some(e),
            TrainError::Callback(e) => Some(e.as_ref()),
            _ => None,
        }
    }
}

impl From<BatchError> for TrainError {
    fn from(e: BatchError) -> Self {
        TrainError::Batch(e)
    }
}

impl From<crate::fs::WriteError> for TrainError {
    fn from(e: crate::fs::WriteError) -> Self {
        TrainError::Io(e)
    }
}

#[cfg(feature = "checkpoint")]
impl From<crate::checkpoint::CheckpointError> for TrainError {
    fn from(e: crate::checkpoint::CheckpointError) -> Self {
        TrainError::Checkpoint(e)
    }
}
