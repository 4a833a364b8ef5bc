//! [`TorchImport`]: a model's parameters and state from a safetensors file that PyTorch wrote
//! (`safetensors.torch.save_file(model.state_dict(), path)`), without fusegraph's metadata.

use super::float::decode;
use super::format::{File, Stored};
use super::layout::{check_unique, for_each_permuted, model_entries, Entry, Source};
use super::{read, CheckpointError, Warning};
use crate::optim::PartMut;
use crate::train::{Model, NamedTensor, StatePart};
use std::collections::BTreeMap;
use std::fmt;
use std::format;
use std::path::Path;
use std::string::{String, ToString};
use std::vec;
use std::vec::Vec;

/// A rule of the key map, from a key of the file to a name of the model's tensors.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Rename {
    /// The key `from` becomes `to`.
    Key { from: String, to: String },
    /// A key that starts with `from` starts with `to` instead.
    Prefix { from: String, to: String },
}

impl Rename {
    /// The name `key` becomes, if this rule applies to it.
    fn apply(&self, key: &str) -> Option<String> {
        match self {
            Rename::Key { from, to } => (key == from).then(|| to.clone()),
            Rename::Prefix { from, to } => key
                .strip_prefix(from.as_str())
                .map(|rest| format!("{to}{rest}")),
        }
    }
}

/// Loads a model's parameters and state from a safetensors file written by PyTorch
/// (`safetensors.torch.save_file(model.state_dict(), path)`): PyTorch's `load_state_dict`,
/// with a key map in the manner of burn-store's remapping.
///
/// Each tensor of the model is known by the key PyTorch gives it in the equivalent module,
/// whose attributes are named as the model's fields: `fc1.weight`, `bn.running_mean`,
/// `attn.q.bias` (the table of the [module docs](super)), the names
/// [`save_model`](super::save_model) writes. Each key of the file goes through the renames
/// ([`prefix`](Self::prefix), [`rename`](Self::rename),
/// [`rename_prefix`](Self::rename_prefix)): the first that applies, in the order they were
/// given, maps it; a key none applies to stays as it is. The tensor is converted from
/// PyTorch's layout to fusegraph's (a Linear weight `[out, in]` is transposed, a Conv2d
/// weight goes from OIHW to HWIO, a Conv1d weight from `[out, in, k]` to `[k, in, out]`;
/// recurrent weights, biases, norms and embeddings are as they are).
///
/// By default the import is strict, as `load_state_dict(strict=True)`: a key that maps to no
/// tensor of the model, and a tensor of the model that no key sets, are an error
/// ([`CheckpointError::Unmatched`], naming all of them), unless
/// [`allow_unused`](Self::allow_unused) and [`allow_missing`](Self::allow_missing) accept
/// them (an unset tensor keeps its value). A BatchNorm's `num_batches_tracked` is read by no
/// one (as [`load_model`](super::load_model) ignores it) and may be absent. Two keys that map
/// to one tensor ([`CheckpointError::DuplicateMapping`]), a shape other than the model's in
/// PyTorch's layout ([`CheckpointError::ImportShape`], with both shapes), a type that is not
/// floating point ([`CheckpointError::ImportDtype`]) and a NaN or an infinity
/// ([`CheckpointError::NonFinite`], unless [`allow_non_finite`](Self::allow_non_finite)) are
/// errors too. The file is checked whole before anything is written: after an error the
/// model is as it was.
///
/// Values of type `F32` load as they are, `F16` and `BF16` exactly, `F64` rounded to the
/// nearest `f32` (as `tensor.float()` rounds; beyond `f32`'s range it is an infinity, refused
/// as non-finite). The metadata of the file is not read: a file of
/// [`save_model`](super::save_model) imports too (but [`load_model`](super::load_model)
/// checks more of it, the layers' kinds and the checksums).
///
/// ```ignore
/// // (Compiled and run as `torch_import::docs_example` in tests/checkpoint.rs: the macros
/// // live in the `fusegraph` crate.)
/// use fusegraph::checkpoint::TorchImport;
/// use fusegraph::prelude::*;
///
/// #[fusegraph::model(loss = SoftmaxCrossEntropy)]
/// pub struct Mlp {
///     fc1: Dense<8, 16, Relu>,
///     fc2: Dense<16, 4>,
/// }
///
/// // In PyTorch, a classifier holds the `Mlp` as `backbone` and a head of its own:
/// //     save_file(classifier.state_dict(), "classifier.safetensors")
/// // has `backbone.fc1.weight` [16, 8], `backbone.fc1.bias`, `backbone.fc2.weight` [4, 16],
/// // `backbone.fc2.bias`, `head.weight` and `head.bias`.
/// let mut model = Mlp::init(Seed(0));
/// let report = TorchImport::new()
///     .prefix("backbone.")
///     .allow_unused() // the head
///     .load_model("classifier.safetensors", &mut model)?;
/// assert_eq!(report.unused(), ["head.bias", "head.weight"]);
/// println!("{report}");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TorchImport {
    renames: Vec<Rename>,
    allow_unused: bool,
    allow_missing: bool,
    allow_non_finite: bool,
}

impl TorchImport {
    /// The strict import with no renames: every key of the file is a tensor of the model by
    /// its name, every tensor is set.
    pub fn new() -> Self {
        Self::default()
    }

    /// The file's keys start with `prefix` (`backbone.`: the model was saved as an attribute
    /// of a wrapper module), which the model's names do not have: the same as
    /// [`rename_prefix`](Self::rename_prefix)`(prefix, "")`.
    pub fn prefix(self, prefix: impl Into<String>) -> Self {
        self.rename_prefix(prefix, "")
    }

    /// The file's key `from` is the model's tensor `to` (`rename("classifier.weight",
    /// "fc2.weight")`).
    pub fn rename(mut self, from: impl Into<String>, to: impl Into<String>) -> Self {
        self.renames.push(Rename::Key {
            from: from.into(),
            to: to.into(),
        });
        self
    }

    /// The file's keys that start with `from` start with `to` in the model
    /// (`rename_prefix("encoder.0.", "fc1.")`).
    pub fn rename_prefix(mut self, from: impl Into<String>, to: impl Into<String>) -> Self {
        self.renames.push(Rename::Prefix {
            from: from.into(),
            to: to.into(),
        });
        self
    }

    /// Keys of the file that map to no tensor of the model are listed in
    /// [`ImportReport::unused`] instead of being an error.
    pub fn allow_unused(mut self) -> Self {
        self.allow_unused = true;
        self
    }

    /// Tensors of the model that no key of the file sets keep their values and are listed in
    /// [`ImportReport::unset`] instead of being an error.
    pub fn allow_missing(mut self) -> Self {
        self.allow_missing = true;
        self
    }

    /// Accepts NaNs and infinities, noting the first of each tensor in
    /// [`ImportReport::warnings`] ([`Warning::NonFinite`]).
    pub fn allow_non_finite(mut self) -> Self {
        self.allow_non_finite = true;
        self
    }

    /// The name of the model's tensor that the file's key `key` maps to.
    pub fn map_key(&self, key: &str) -> String {
        self.renames
            .iter()
            .find_map(|r| r.apply(key))
            .unwrap_or_else(|| key.to_string())
    }

    /// Loads the file at `path` into `model`; returns what was loaded and what was not.
    pub fn load_model<M: Model>(
        &self,
        path: impl AsRef<Path>,
        model: &mut M,
    ) -> Result<ImportReport, CheckpointError> {
        self.from_bytes(&read(path.as_ref())?, model)
    }

    /// [`load_model`](Self::load_model) from the bytes of a file.
    pub fn from_bytes<M: Model>(
        &self,
        bytes: &[u8],
        model: &mut M,
    ) -> Result<ImportReport, CheckpointError> {
        let file = File::parse(bytes)?;
        let entries = model_entries::<M>();
        check_unique(&entries)?;
        let stored = file.stored()?;
        let mut report = ImportReport::default();
        let matched = self.pair(&entries, &stored, &mut report)?;
        let values = matched
            .iter()
            .map(|m| self.values(m, &mut report.warnings))
            .collect::<Result<Vec<_>, _>>()?;
        for (m, values) in matched.iter().zip(&values) {
            if let Some(PartMut::Floats(v)) = m.part.of_model_mut(model) {
                v[m.at..][..values.len()].copy_from_slice(values);
            }
            report.loaded.push(Loaded {
                key: m.stored.name.clone(),
                tensor: m.name.to_string(),
                dtype: m.stored.dtype.to_string(),
            });
        }
        Ok(report)
    }

    /// Pairs each of the `stored` tensors of the file with the entry of the model its key maps
    /// to; notes in `report` the keys that map to no entry, the BatchNorm counters and the
    /// entries left unset; fails on two keys for one entry and on what is not allowed.
    fn pair<'e, 's, 'a>(
        &self,
        entries: &'e [Entry],
        stored: &'s [Stored<'a>],
        report: &mut ImportReport,
    ) -> Result<Vec<Match<'e, 's, 'a>>, CheckpointError> {
        let by_name: BTreeMap<&str, &Entry> =
            entries.iter().map(|e| (e.name.as_str(), e)).collect();
        let mut claimed: BTreeMap<&str, &str> = BTreeMap::new();
        let mut matched = Vec::new();
        let mut unused = Vec::new();
        for s in stored {
            let mapped = self.map_key(&s.name);
            let Some(&e) = by_name.get(mapped.as_str()) else {
                unused.push((s.name.clone(), mapped));
                continue;
            };
            if let Some(first) = claimed.insert(&e.name, &s.name) {
                return Err(CheckpointError::DuplicateMapping {
                    tensor: e.name.clone(),
                    first: first.into(),
                    second: s.name.clone(),
                });
            }
            match e.source {
                Source::Tensor { part, tensor, at } => matched.push(Match {
                    name: &e.name,
                    shape: &e.shape,
                    part,
                    tensor,
                    at,
                    stored: s,
                }),
                Source::Counter | Source::Scalar(_) | Source::Values { .. } => {
                    report.ignored.push(s.name.clone())
                }
            }
        }
        let unset: Vec<(String, Vec<usize>)> = entries
            .iter()
            .filter(|e| matches!(e.source, Source::Tensor { .. }))
            .filter(|e| !claimed.contains_key(e.name.as_str()))
            .map(|e| (e.name.clone(), e.shape.clone()))
            .collect();
        self.check_unmatched(&unused, &unset)?;
        report.unused = unused.into_iter().map(|(key, _)| key).collect();
        report.unset = unset.into_iter().map(|(name, _)| name).collect();
        Ok(matched)
    }

    /// `Ok` unless keys of the file map to no tensor or tensors of the model are set by no
    /// key, which this import does not allow.
    fn check_unmatched(
        &self,
        unused: &[(String, String)],
        unset: &[(String, Vec<usize>)],
    ) -> Result<(), CheckpointError> {
        let unused = if self.allow_unused { &[][..] } else { unused };
        let unset = if self.allow_missing { &[][..] } else { unset };
        if unused.is_empty() && unset.is_empty() {
            return Ok(());
        }
        Err(CheckpointError::Unmatched {
            unused: unused.to_vec(),
            unset: unset.to_vec(),
        })
    }

    /// The values of a matched tensor of the file, checked and converted to `f32` in
    /// fusegraph's layout; a non-finite value is an error or a warning in `warnings`.
    fn values(
        &self,
        m: &Match<'_, '_, '_>,
        warnings: &mut Vec<Warning>,
    ) -> Result<Vec<f32>, CheckpointError> {
        let s = m.stored;
        let values = decode(s.dtype, s.data).ok_or_else(|| CheckpointError::ImportDtype {
            key: s.name.clone(),
            found: s.dtype.to_string(),
        })?;
        if s.shape != m.shape {
            return Err(CheckpointError::ImportShape {
                key: s.name.clone(),
                tensor: m.name.to_string(),
                file: s.shape.clone(),
                model: m.shape.to_vec(),
            });
        }
        if let Some(index) = values.iter().position(|v| !v.is_finite()) {
            if !self.allow_non_finite {
                return Err(CheckpointError::NonFinite {
                    name: s.name.clone(),
                    index,
                    value: values[index],
                });
            }
            warnings.push(Warning::NonFinite {
                name: s.name.clone(),
                index,
            });
        }
        Ok(stored_layout(m.tensor, &values))
    }
}

/// A key of the file paired with a tensor of the model.
struct Match<'e, 's, 'a> {
    /// The tensor's name (its default key).
    name: &'e str,
    /// Its shape in PyTorch's layout.
    shape: &'e [usize],
    /// The part of the model it is in.
    part: StatePart,
    /// Its layouts.
    tensor: &'static NamedTensor,
    /// Where its values start in the part.
    at: usize,
    /// The file's tensor.
    stored: &'s Stored<'a>,
}

/// `values` of tensor `t` in PyTorch's layout, in fusegraph's.
fn stored_layout(t: &NamedTensor, values: &[f32]) -> Vec<f32> {
    let mut out = vec![0.0; values.len()];
    for_each_permuted(t.tensor.shape, t.torch.axes, |i, j| out[j] = values[i]);
    out
}

/// One key of the file that set a tensor of the model.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Loaded {
    /// The file's key (`backbone.fc1.weight`).
    pub key: String,
    /// The model's tensor it set (`fc1.weight`).
    pub tensor: String,
    /// The element type in the file (`F32`, `F16`, `BF16`, `F64`).
    pub dtype: String,
}

/// What a [`TorchImport`] did: the keys that set the model's tensors, the keys it left
/// unused and the tensors it left unset (both only when allowed), the BatchNorm counters it
/// ignored, and its warnings. Displays as a few lines.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImportReport {
    loaded: Vec<Loaded>,
    unused: Vec<String>,
    unset: Vec<String>,
    ignored: Vec<String>,
    warnings: Vec<Warning>,
}

impl ImportReport {
    /// The keys that set a tensor of the model, in the order of the keys.
    pub fn loaded(&self) -> &[Loaded] {
        &self.loaded
    }

    /// The keys of the file that map to no tensor of the model (accepted by
    /// [`TorchImport::allow_unused`]), sorted.
    pub fn unused(&self) -> &[String] {
        &self.unused
    }

    /// The model's tensors that no key of the file set, which kept their values (accepted by
    /// [`TorchImport::allow_missing`]), in the model's order.
    pub fn unset(&self) -> &[String] {
        &self.unset
    }

    /// The keys of BatchNorm counters (`bn.num_batches_tracked`), which nothing reads.
    pub fn ignored(&self) -> &[String] {
        &self.ignored
    }

    /// NaNs and infinities accepted by [`TorchImport::allow_non_finite`].
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }
}

impl fmt::Display for ImportReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} tensors loaded", self.loaded.len())?;
        for (i, l) in self.loaded.iter().enumerate() {
            f.write_str(if i == 0 { ": " } else { ", " })?;
            write!(f, "`{}`", l.key)?;
            if l.key != l.tensor {
                write!(f, " as `{}`", l.tensor)?;
            }
            if l.dtype != "F32" {
                write!(f, " (from {})", l.dtype)?;
            }
        }
        let lists = [
            ("unused keys of the file", &self.unused),
            ("tensors of the model left as they were", &self.unset),
            ("ignored BatchNorm counters", &self.ignored),
        ];
        for (what, names) in lists.into_iter().filter(|(_, n)| !n.is_empty()) {
            write!(f, "\n{what}: ")?;
            for (i, name) in names.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "`{name}`")?;
            }
        }
        for w in &self.warnings {
            write!(f, "\nwarning: {w}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_rename_that_applies_maps_a_key() {
        let import = TorchImport::new()
            .rename("backbone.head.weight", "fc2.weight")
            .prefix("backbone.")
            .rename_prefix("encoder.0.", "fc1.")
            .rename_prefix("encoder.", "never.");
        assert_eq!(import.map_key("backbone.head.weight"), "fc2.weight");
        assert_eq!(import.map_key("backbone.fc1.bias"), "fc1.bias");
        assert_eq!(import.map_key("encoder.0.weight"), "fc1.weight");
        assert_eq!(import.map_key("encoder.1.weight"), "never.1.weight");
        assert_eq!(import.map_key("head.weight"), "head.weight");
        assert_eq!(import.map_key("backbone."), "");
        assert_eq!(TorchImport::new().map_key("fc1.weight"), "fc1.weight");
    }
}
