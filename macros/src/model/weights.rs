//! `#[frozen(torch = "file.safetensors")]`: the header of a file saved by PyTorch, read when
//! the crate compiles. The macro checks what it can see here (the file, the layer's keys, their
//! element type); the layer's shapes are checked where they are known, by the constant that
//! builds the `static` (`from_torch`).

use crate::errors;
use safetensors::{Dtype, SafeTensors};
use std::path::PathBuf;

/// One tensor of a layer in the file.
pub struct Entry {
    /// Its key after the layer's prefix and a dot: PyTorch's name of it within the layer.
    pub name: String,
    /// Its shape (PyTorch's layout).
    pub shape: Vec<usize>,
    /// The offset of its first byte in the file.
    pub start: usize,
}

/// A layer's tensors in a file.
pub struct Weights {
    /// The file, absolute, for `include_bytes!`.
    pub path: String,
    /// The prefix of the layer's keys (`fc1`).
    pub prefix: String,
    /// The layer's tensors, in the file's order.
    pub entries: Vec<Entry>,
}

/// The tensors of `file` (relative to the crate's manifest) whose keys start with `prefix.`;
/// an error at `file` when the file cannot be read, is not safetensors, has none, or holds one
/// that is not `F32`.
pub fn load(file: &syn::LitStr, prefix: &str) -> syn::Result<Weights> {
    let err = |message: String| syn::Error::new(file.span(), message);
    let relative = file.value();
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let path = PathBuf::from(manifest).join(&relative);
    let bytes = std::fs::read(&path).map_err(|e| err(errors::weights_unreadable(&relative, &e)))?;
    let tensors = SafeTensors::deserialize(&bytes)
        .map_err(|e| err(errors::weights_not_safetensors(&relative, &e)))?;
    let data_start = 8 + header_len(&bytes);
    let dot = format!("{prefix}.");
    let mut entries = Vec::new();
    let mut names: Vec<String> = tensors.names().into_iter().map(str::to_string).collect();
    names.sort_unstable();
    for key in &names {
        let Some(name) = key.strip_prefix(&dot) else {
            continue;
        };
        let view = tensors.tensor(key).map_err(|e| err(e.to_string()))?;
        if view.dtype() != Dtype::F32 {
            return Err(err(errors::weights_dtype(
                key,
                &format!("{:?}", view.dtype()),
            )));
        }
        let start = view.data().as_ptr() as usize - bytes.as_ptr() as usize;
        debug_assert!(start >= data_start);
        entries.push(Entry {
            name: name.to_string(),
            shape: view.shape().to_vec(),
            start,
        });
    }
    if entries.is_empty() {
        return Err(err(errors::weights_no_layer(&relative, prefix, &names)));
    }
    Ok(Weights {
        path: path.to_string_lossy().into_owned(),
        prefix: prefix.to_string(),
        entries,
    })
}

/// The length of the JSON header, from the file's first eight bytes (which `deserialize`
/// has checked).
fn header_len(bytes: &[u8]) -> usize {
    let mut n = [0u8; 8];
    n.copy_from_slice(&bytes[..8]);
    u64::from_le_bytes(n) as usize
}
