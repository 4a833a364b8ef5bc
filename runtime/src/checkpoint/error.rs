//! [`CheckpointError`]: why a checkpoint could not be written or read.

use std::fmt;
use std::format;
use std::io;
use std::path::PathBuf;
use std::string::String;
use std::vec::Vec;

/// Why a checkpoint could not be written or loaded. Loading checks the whole file before it
/// changes anything, so after an error the model and the train step are as they were.
#[derive(Debug)]
#[non_exhaustive]
pub enum CheckpointError {
    /// Reading, writing, syncing or renaming a file failed.
    Io {
        /// The file (or directory) involved.
        path: PathBuf,
        /// What was being done (`write`, `sync`, `rename`...).
        action: &'static str,
        /// The error of the operating system.
        source: io::Error,
    },
    /// The file ends before the data its header describes (or goes on after it).
    Truncated {
        /// Length of the file, in bytes.
        len: usize,
    },
    /// The header is not a valid safetensors header.
    Header {
        /// What is wrong with it.
        reason: String,
    },
    /// A metadata entry is missing or has an unexpected value (not a fusegraph checkpoint, an
    /// unknown format version, a file without a training state, an unreadable number).
    Metadata {
        /// The metadata key.
        key: String,
        /// What was expected.
        expected: String,
        /// What the file holds, if anything.
        found: Option<String>,
    },
    /// The file was written for a model with another layer: the first layer (or loss, or
    /// graph) whose name or kind differs, each side as its name (`fc1`, `loss`, `graph`) and
    /// kind (`Dense 4->16 tanh`), or `None` past the last layer of that side.
    Layer {
        /// The file's layer.
        file: Option<(String, String)>,
        /// This model's layer.
        model: Option<(String, String)>,
    },
    /// The file was written for a model with another layout of tensors (their names and
    /// shapes, compared by a hash).
    Signature {
        /// The signature of the model being loaded into.
        expected: String,
        /// The signature in the file.
        found: String,
    },
    /// The file holds the state of another optimizer, or of one with other slots or carried
    /// scalars.
    Optimizer {
        /// What differs: `name`, `slots` or `carried scalars`.
        what: &'static str,
        /// This optimizer's.
        expected: String,
        /// The file's.
        found: String,
    },
    /// A tensor the model or optimizer needs is not in the file.
    MissingTensor {
        /// Its name.
        name: String,
        /// Its expected shape.
        shape: Vec<usize>,
    },
    /// The file holds a tensor that the model and optimizer do not have.
    UnexpectedTensor {
        /// Its name.
        name: String,
    },
    /// A tensor has another shape.
    Shape {
        /// Its name.
        name: String,
        /// The shape expected (PyTorch's layout).
        expected: Vec<usize>,
        /// The shape in the file.
        found: Vec<usize>,
    },
    /// A tensor has another element type.
    Dtype {
        /// Its name.
        name: String,
        /// The type expected (`F32`, `I64`).
        expected: String,
        /// The type in the file.
        found: String,
    },
    /// A tensor holds a value that cannot be restored (a negative step count).
    Value {
        /// Its name.
        name: String,
        /// The value.
        value: String,
        /// What was expected.
        expected: &'static str,
    },
    /// A tensor's bytes are not those that were saved: its checksum differs.
    Checksum {
        /// The damaged tensor.
        name: String,
        /// The CRC-32 stored in the metadata.
        stored: String,
        /// The CRC-32 of the bytes in the file.
        computed: String,
    },
    /// The metadata is not what was saved: its checksum differs (a hyper-parameter, the
    /// model's layers, a tensor's checksum or a caller's entry was changed).
    MetadataChecksum {
        /// The CRC-32 stored in `metadata_checksum`.
        stored: String,
        /// The CRC-32 of the metadata in the file.
        computed: String,
    },
    /// A floating-point tensor holds a NaN or an infinity (refused unless
    /// [`Loader::allow_non_finite`](super::Loader::allow_non_finite)).
    NonFinite {
        /// The tensor.
        name: String,
        /// The index of its first non-finite value, in the file's (PyTorch's) row-major order.
        index: usize,
        /// That value.
        value: f32,
    },
    /// Two tensors of a checkpoint would have the same name (a layer named `optimizer`, a
    /// slot named `ema` beside an EMA).
    Clash {
        /// The name.
        name: String,
    },
}

impl CheckpointError {
    /// An I/O error with the path and action it came from.
    pub(crate) fn io(path: impl Into<PathBuf>, action: &'static str, source: io::Error) -> Self {
        CheckpointError::Io {
            path: path.into(),
            action,
            source,
        }
    }
}

impl From<crate::fs::WriteError> for CheckpointError {
    fn from(e: crate::fs::WriteError) -> Self {
        CheckpointError::Io {
            path: e.path,
            action: e.action,
            source: e.source,
        }
    }
}

impl fmt::Display for CheckpointError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckpointError::Io {
                path,
                action,
                source,
            } => write!(f, "checkpoint `{}`: {action} failed: {source}", path.display()),
            CheckpointError::Truncated { len } => write!(
                f,
                "checkpoint truncated: its {len} bytes do not end where its header says the data ends"
            ),
            CheckpointError::Header { reason } => {
                write!(f, "checkpoint header is corrupt: {reason}")
            }
            CheckpointError::Metadata {
                key,
                expected,
                found: Some(found),
            } => write!(
                f,
                "checkpoint metadata `{key}` is `{found}`, expected {expected}"
            ),
            CheckpointError::Metadata {
                key,
                expected,
                found: None,
            } => write!(
                f,
                "checkpoint metadata has no `{key}` (expected {expected})"
            ),
            CheckpointError::Layer { file, model } => layer_mismatch(f, file, model),
            CheckpointError::Signature { expected, found } => write!(
                f,
                "checkpoint is for another model: its layout signature is {found}, this model's is {expected}"
            ),
            CheckpointError::Optimizer {
                what,
                expected,
                found,
            } => write!(
                f,
                "checkpoint is for another optimizer: its {what} `{found}`, this optimizer's `{expected}`"
            ),
            CheckpointError::MissingTensor { name, shape } => write!(
                f,
                "checkpoint has no tensor `{name}` (expected shape {shape:?})"
            ),
            CheckpointError::UnexpectedTensor { name } => write!(
                f,
                "checkpoint has a tensor `{name}` that this model and optimizer do not have"
            ),
            CheckpointError::Shape {
                name,
                expected,
                found,
            } => write!(
                f,
                "checkpoint tensor `{name}` has shape {found:?}, expected {expected:?}"
            ),
            CheckpointError::Dtype {
                name,
                expected,
                found,
            } => write!(
                f,
                "checkpoint tensor `{name}` holds {found} values, expected {expected}"
            ),
            CheckpointError::Value {
                name,
                value,
                expected,
            } => write!(
                f,
                "checkpoint tensor `{name}` holds {value}, expected {expected}"
            ),
            CheckpointError::Checksum {
                name,
                stored,
                computed,
            } => write!(
                f,
                "checkpoint tensor `{name}` is damaged: its CRC-32 is {computed}, the file records {stored}"
            ),
            CheckpointError::MetadataChecksum { stored, computed } => write!(
                f,
                "checkpoint metadata is damaged: its CRC-32 is {computed}, the file records {stored}"
            ),
            CheckpointError::NonFinite { name, index, value } => write!(
                f,
                "checkpoint tensor `{name}` holds {value} at index {index}; \
                 load with `Loader::new().allow_non_finite()` to accept it"
            ),
            CheckpointError::Clash { name } => write!(
                f,
                "two tensors of the checkpoint would be named `{name}`: rename the layer or slot"
            ),
        }
    }
}

/// The message of [`CheckpointError::Layer`]: `fc1: Dense 4->16 tanh in the file, Dense
/// 4->24 tanh in this model` when the names agree, both names otherwise.
fn layer_mismatch(
    f: &mut fmt::Formatter<'_>,
    file: &Option<(String, String)>,
    model: &Option<(String, String)>,
) -> fmt::Result {
    f.write_str("checkpoint is for another model: ")?;
    if let (Some((name, in_file)), Some((same, in_model))) = (file, model) {
        if name == same {
            return write!(f, "{name}: {in_file} in the file, {in_model} in this model");
        }
    }
    let side = |layer: &Option<(String, String)>| match layer {
        Some((name, kind)) => format!("`{name}: {kind}`"),
        None => "no more layers".into(),
    };
    write!(
        f,
        "{} in the file, {} in this model",
        side(file),
        side(model)
    )
}

impl std::error::Error for CheckpointError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CheckpointError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
