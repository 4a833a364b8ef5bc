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
    /// The file is not a safetensors file but one that `torch.save` writes.
    NotSafetensors {
        /// What it is instead (`a zip archive, as torch.save writes`).
        found: &'static str,
    },
    /// Keys of a PyTorch file and tensors of the model that the
    /// [`TorchImport`](super::TorchImport) pairs with nothing, when it does not allow them.
    Unmatched {
        /// The file's keys that map to no tensor of the model, each with the name it maps to
        /// (itself unless renamed).
        unused: Vec<(String, String)>,
        /// The model's tensors that no key of the file sets, each with its shape (PyTorch's
        /// layout).
        unset: Vec<(String, Vec<usize>)>,
    },
    /// Two keys of a PyTorch file map to the same tensor of the model.
    DuplicateMapping {
        /// The model's tensor.
        tensor: String,
        /// The first key (in sorted order) that maps to it.
        first: String,
        /// The second.
        second: String,
    },
    /// A key of a PyTorch file holds a tensor of another shape than the model's tensor it
    /// maps to.
    ImportShape {
        /// The file's key.
        key: String,
        /// The model's tensor it maps to.
        tensor: String,
        /// The shape in the file.
        file: Vec<usize>,
        /// The model tensor's shape, in PyTorch's layout.
        model: Vec<usize>,
    },
    /// A key of a PyTorch file holds values of a type that the import does not read (it reads
    /// `F32`, `F16`, `BF16` and `F64`).
    ImportDtype {
        /// The file's key.
        key: String,
        /// The type in the file.
        found: String,
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
                 load with `Loader::new().allow_non_finite()` (a PyTorch file: \
                 `TorchImport::new().allow_non_finite()`) to accept it"
            ),
            CheckpointError::Clash { name } => write!(
                f,
                "two tensors of the checkpoint would be named `{name}`: rename the layer or slot"
            ),
            CheckpointError::NotSafetensors { found } => write!(
                f,
                "checkpoint is not a safetensors file but {found}; write it in PyTorch with \
                 `safetensors.torch.save_file(model.state_dict(), path)`"
            ),
            CheckpointError::Unmatched { unused, unset } => unmatched(f, unused, unset),
            CheckpointError::DuplicateMapping {
                tensor,
                first,
                second,
            } => write!(
                f,
                "the PyTorch file's keys `{first}` and `{second}` both map to the model's \
                 tensor `{tensor}`"
            ),
            CheckpointError::ImportShape {
                key,
                tensor,
                file,
                model,
            } => {
                key_of(f, key, tensor)?;
                write!(
                    f,
                    ": the file's shape {file:?} is not the model's {model:?} (PyTorch layout)"
                )
            }
            CheckpointError::ImportDtype { key, found } => write!(
                f,
                "`{key}` holds {found} values; the import reads {}: convert the tensor with \
                 `.float()` before saving it",
                super::float::READ
            ),
        }
    }
}

/// How many names an error lists before it counts the rest.
const LISTED: usize = 8;

/// `` `key` ``, and `` (the model's `tensor`) `` when the key was renamed.
fn key_of(f: &mut fmt::Formatter<'_>, key: &str, tensor: &str) -> fmt::Result {
    write!(f, "`{key}`")?;
    if key != tensor {
        write!(f, " (the model's `{tensor}`)")?;
    }
    Ok(())
}

/// The message of [`CheckpointError::Unmatched`]: each side that is not empty, its first
/// [`LISTED`] names and how many more.
fn unmatched(
    f: &mut fmt::Formatter<'_>,
    unused: &[(String, String)],
    unset: &[(String, Vec<usize>)],
) -> fmt::Result {
    f.write_str("the PyTorch file does not match the model: ")?;
    if !unused.is_empty() {
        f.write_str("its keys ")?;
        for (i, (key, mapped)) in unused.iter().take(LISTED).enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "`{key}`")?;
            if key != mapped {
                write!(f, " (read as `{mapped}`)")?;
            }
        }
        more(f, unused.len())?;
        f.write_str(
            " map to no tensor of the model (map them with `TorchImport::rename`, or allow \
             them with `allow_unused`)",
        )?;
    }
    if !unset.is_empty() {
        if !unused.is_empty() {
            f.write_str("; ")?;
        }
        f.write_str("the model's tensors ")?;
        for (i, (name, shape)) in unset.iter().take(LISTED).enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "`{name}` {shape:?}")?;
        }
        more(f, unset.len())?;
        f.write_str(
            " are set by no key of the file (keep their values with \
             `TorchImport::allow_missing`)",
        )?;
    }
    Ok(())
}

/// ` and 3 more` after the first [`LISTED`] of `len` names.
fn more(f: &mut fmt::Formatter<'_>, len: usize) -> fmt::Result {
    match len.checked_sub(LISTED) {
        Some(rest) if rest > 0 => write!(f, " and {rest} more"),
        _ => Ok(()),
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
