//! [`Warning`]: what a load noticed but accepted.

use std::fmt;
use std::string::String;

/// Something a load accepted that the caller may want to know about, listed by
/// [`Metadata::warnings`](super::Metadata::warnings).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Warning {
    /// The file was written before checkpoints held checksums (format version 1): damage to
    /// its tensors or metadata cannot be detected.
    NoChecksums,
    /// The file was written before checkpoints recorded each layer's kind (format version 1):
    /// only the names and shapes of the tensors were checked, so a model with another
    /// activation, loss or layer option would have loaded too.
    LayersUnchecked,
    /// A tensor holds a NaN or an infinity, accepted by
    /// [`Loader::allow_non_finite`](super::Loader::allow_non_finite).
    NonFinite {
        /// The tensor.
        name: String,
        /// The index of its first non-finite value, in the file's (PyTorch's) row-major order.
        index: usize,
    },
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::NoChecksums => f.write_str(
                "checkpoint of format version 1 has no checksums: damage to it cannot be detected",
            ),
            Warning::LayersUnchecked => f.write_str(
                "checkpoint of format version 1 records no layer kinds: only tensor names and \
                 shapes were checked, not activations, losses or layer options",
            ),
            Warning::NonFinite { name, index } => write!(
                f,
                "checkpoint tensor `{name}` holds a NaN or an infinity at index {index}"
            ),
        }
    }
}
