//! [`TrainError`]: why a fit, an evaluation or a callback could not go on.

use std::boxed::Box;
use std::fmt;
use std::string::String;

/// Why training could not start or go on. Nothing is lost: the model and the optimizer keep
/// the state of the last completed step.
#[derive(Debug)]
pub enum TrainError {
    /// The data does not fit the model (features per sample, targets per sample).
    Shape(String),
    /// A class label the model has no output for.
    Label {
        /// The sample, counting from 0.
        sample: usize,
        /// Its label.
        label: u32,
        /// The number of classes (model outputs).
        classes: usize,
    },
    /// An option or callback that cannot work with this model, optimizer or data.
    Config(String),
    /// Writing a file (a history, a plot).
    Io(crate::fs::WriteError),
    /// Saving or loading a checkpoint.
    #[cfg(feature = "checkpoint")]
    Checkpoint(crate::checkpoint::CheckpointError),
    /// An error from user code in a callback.
    Callback(Box<dyn std::error::Error + Send + Sync>),
}

impl fmt::Display for TrainError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrainError::Shape(what) | TrainError::Config(what) => f.write_str(what),
            TrainError::Label {
                sample,
                label,
                classes,
            } => write!(
                f,
                "sample {sample} has label {label}, but the model has {classes} classes (0..{classes})"
            ),
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
            TrainError::Io(e) => Some(e),
            #[cfg(feature = "checkpoint")]
            TrainError::Checkpoint(e) => Some(e),
            TrainError::Callback(e) => Some(e.as_ref()),
            _ => None,
        }
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
