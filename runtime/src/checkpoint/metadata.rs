//! The string map in a checkpoint's header: what the file is, the model's signature, the
//! optimizer's name, hyper-parameters and configuration, and the caller's own entries.

use super::checksum::{self, KEY_METADATA};
use super::layout::{first_difference, layers, signature};
use super::{CheckpointError, Warning};
use crate::optim::{Optimizer, Rule, Storage, UpdateMode};
use crate::train::Model;
use std::collections::BTreeMap;
use std::format;
use std::string::{String, ToString};
use std::vec::Vec;

/// `format`: always [`FORMAT`].
pub(crate) const KEY_FORMAT: &str = "format";
/// The value of `format`.
pub(crate) const FORMAT: &str = "fusegraph";
/// Where a file without fusegraph's `format` goes, most likely one of PyTorch.
const FROM_TORCH: &str = "; a file written by PyTorch's `safetensors.torch.save_file` loads \
                          with `checkpoint::TorchImport`";
/// `format_version`: the version of the layout of names and metadata.
pub(crate) const KEY_VERSION: &str = "format_version";
/// The current format version: 2 adds the checksums and the layers' kinds.
pub(crate) const VERSION: &str = "2";
/// The format version before checksums and layer kinds, still read (with warnings).
pub(crate) const LEGACY_VERSION: &str = "1";
/// `contents`: [`MODEL`] (from `save_model`) or [`TRAINING`] (from `save`).
pub(crate) const KEY_CONTENTS: &str = "contents";
/// Parameters and state only.
pub(crate) const MODEL: &str = "model";
/// The model, the optimizer's state, the step counter and the dropout seed.
pub(crate) const TRAINING: &str = "training";
/// `model_signature`: [`signature`](super::signature) of the model, 16 hex digits.
pub(crate) const KEY_SIGNATURE: &str = "model_signature";
/// `model_layers`: [`layers`](super::layers) of the model, a `name: kind` line per layer, the
/// graph and the loss.
pub(crate) const KEY_LAYERS: &str = "model_layers";
/// `optimizer`: the rule's name ([`Rule::NAME`]).
pub(crate) const KEY_OPTIMIZER: &str = "optimizer";
/// `optimizer.slots`: the slot names, comma-separated.
pub(crate) const KEY_SLOTS: &str = "optimizer.slots";
/// `optimizer.carried`: the carried scalars' names, comma-separated.
pub(crate) const KEY_CARRIED: &str = "optimizer.carried";
/// `optimizer.config`: the [`Config`](crate::optim::Config) (clipping, weight decay, EMA,
/// schedule), as Rust's `Debug` prints it. Informative: not checked on load.
pub(crate) const KEY_CONFIG: &str = "optimizer.config";
/// `optimizer.schedule`: the learning-rate schedule, as Rust's `Debug` prints it, or `none`.
pub(crate) const KEY_SCHEDULE: &str = "optimizer.schedule";
/// Prefix of the hyper-parameters: `optimizer.hyper.lr` holds `lr`, printed so that it parses
/// back to the same `f32`.
pub(crate) const HYPER: &str = "optimizer.hyper.";
/// Prefix of the caller's entries ([`save_with`](super::save_with)).
pub(crate) const USER: &str = "user.";

/// The metadata of a checkpoint that [`load`](super::load) or
/// [`load_model`](super::load_model) read.
///
/// ```
/// # use fusegraph_runtime::checkpoint::Metadata;
/// let meta: Metadata = [("user.epoch", "3"), ("format", "fusegraph")].into_iter().collect();
/// assert_eq!(meta.get("epoch"), Some("3"));
/// assert_eq!(meta.get("format"), Some("fusegraph"));
/// assert_eq!(meta.extra().collect::<Vec<_>>(), [("epoch", "3")]);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Metadata {
    entries: BTreeMap<String, String>,
    warnings: Vec<Warning>,
}

/// The format versions a checkpoint can have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Version {
    /// Version 1: no checksums, no layer kinds.
    Legacy,
    /// [`VERSION`]: checksums and layer kinds.
    Current,
}

impl Metadata {
    /// The caller's entry `key` (saved by [`save_with`](super::save_with)), or else the
    /// standard entry of that name (`format_version`, `optimizer.hyper.lr`, ...).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries
            .get(&format!("{USER}{key}"))
            .or_else(|| self.entries.get(key))
            .map(String::as_str)
    }

    /// The caller's entries, by their keys without the `user.` prefix.
    pub fn extra(&self) -> impl Iterator<Item = (&str, &str)> {
        self.iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(USER)?, v)))
    }

    /// Every entry, as stored (the caller's with their `user.` prefix), in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// What loading accepted but the caller may want to know: a file of format version 1
    /// (without checksums and layer kinds), NaNs accepted by
    /// [`Loader::allow_non_finite`](super::Loader::allow_non_finite). Empty for a file of the
    /// current format with finite values.
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }

    /// Notes `warning` for [`warnings`](Self::warnings).
    pub(crate) fn warn(&mut self, warning: Warning) {
        self.warnings.push(warning);
    }

    /// The entry stored under exactly `key`.
    pub(crate) fn raw(&self, key: &str) -> Option<&str> {
        self.entries.get(key).map(String::as_str)
    }

    pub(crate) fn insert(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.entries.insert(key.into(), value.into());
    }

    /// The standard entries of a model file, and `extra` under `user.`.
    pub(crate) fn for_model<M: Model>(contents: &str, extra: &[(&str, &str)]) -> Self {
        let mut m = Metadata::default();
        m.insert(KEY_FORMAT, FORMAT);
        m.insert(KEY_VERSION, VERSION);
        m.insert(KEY_CONTENTS, contents);
        m.insert(KEY_SIGNATURE, signature::<M>());
        m.insert(KEY_LAYERS, layers::<M>());
        for (k, v) in extra {
            m.insert(format!("{USER}{k}"), *v);
        }
        m
    }

    /// Adds the optimizer's name, slots, carried scalars, hyper-parameters and configuration.
    pub(crate) fn add_optimizer<R: Rule, U: UpdateMode, S: Storage>(
        &mut self,
        opt: &Optimizer<R, U, S>,
    ) {
        self.insert(KEY_OPTIMIZER, R::NAME);
        self.insert(KEY_SLOTS, R::SLOTS.join(","));
        self.insert(KEY_CARRIED, R::CARRIED.join(","));
        for name in R::HYPER {
            let v = opt.rule().hyper(name).unwrap_or(f32::NAN);
            self.insert(format!("{HYPER}{name}"), v.to_string());
        }
        let config = opt.config();
        self.insert(KEY_CONFIG, format!("{config:?}"));
        let schedule = config
            .schedule
            .map_or_else(|| "none".into(), |s| format!("{s:?}"));
        self.insert(KEY_SCHEDULE, schedule);
    }

    /// `Ok` when entry `key` is `expected`.
    fn expect(&self, key: &str, expected: &str) -> Result<(), CheckpointError> {
        self.expect_or(key, expected, "")
    }

    /// `Ok` when entry `key` is `expected`; otherwise an error whose expectation ends with
    /// `note`.
    fn expect_or(&self, key: &str, expected: &str, note: &str) -> Result<(), CheckpointError> {
        match self.raw(key) {
            Some(v) if v == expected => Ok(()),
            found => Err(CheckpointError::Metadata {
                key: key.into(),
                expected: format!("`{expected}`{note}"),
                found: found.map(Into::into),
            }),
        }
    }

    /// Checks that this is a fusegraph checkpoint for model `M` holding `contents` (a training
    /// checkpoint holds a model too), of the current format version, whose metadata is intact,
    /// or of the legacy one, which it notes in the warnings; returns the version.
    pub(crate) fn check_model<M: Model>(
        &mut self,
        contents: &str,
    ) -> Result<Version, CheckpointError> {
        self.expect_or(KEY_FORMAT, FORMAT, FROM_TORCH)?;
        let version = self.version()?;
        if version == Version::Current {
            checksum::verify(
                self,
                KEY_METADATA,
                checksum::of_metadata(self),
                |stored, computed| CheckpointError::MetadataChecksum { stored, computed },
            )?;
        }
        if contents == TRAINING || self.raw(KEY_CONTENTS) != Some(TRAINING) {
            self.expect(KEY_CONTENTS, contents)?;
        }
        match version {
            Version::Current => self.check_layers::<M>()?,
            Version::Legacy => {
                self.warn(Warning::NoChecksums);
                self.warn(Warning::LayersUnchecked);
            }
        }
        self.check_signature::<M>()?;
        Ok(version)
    }

    /// The format version: the current one or the legacy one.
    fn version(&self) -> Result<Version, CheckpointError> {
        match self.raw(KEY_VERSION) {
            Some(VERSION) => Ok(Version::Current),
            Some(LEGACY_VERSION) => Ok(Version::Legacy),
            found => Err(CheckpointError::Metadata {
                key: KEY_VERSION.into(),
                expected: format!("`{VERSION}` (or `{LEGACY_VERSION}`, read with warnings)"),
                found: found.map(Into::into),
            }),
        }
    }

    /// `Ok` when the file's layers are `M`'s, kind for kind; otherwise the first that differs.
    fn check_layers<M: Model>(&self) -> Result<(), CheckpointError> {
        let expected = layers::<M>();
        let found = self
            .raw(KEY_LAYERS)
            .ok_or_else(|| CheckpointError::Metadata {
                key: KEY_LAYERS.into(),
                expected: format!("`{expected}`"),
                found: None,
            })?;
        match first_difference(found, &expected) {
            None => Ok(()),
            Some((file, model)) => Err(CheckpointError::Layer { file, model }),
        }
    }

    /// `Ok` when the file's signature of the tensors' names and shapes is `M`'s.
    fn check_signature<M: Model>(&self) -> Result<(), CheckpointError> {
        let expected = signature::<M>();
        match self.raw(KEY_SIGNATURE) {
            Some(found) if found == expected => Ok(()),
            Some(found) => Err(CheckpointError::Signature {
                expected,
                found: found.into(),
            }),
            None => Err(CheckpointError::Metadata {
                key: KEY_SIGNATURE.into(),
                expected: format!("`{expected}`"),
                found: None,
            }),
        }
    }

    /// Checks the optimizer's name, slots and carried scalars, and returns the hyper-parameters
    /// to restore, in [`Rule::HYPER`] order.
    pub(crate) fn check_optimizer<R: Rule>(&self) -> Result<Vec<f32>, CheckpointError> {
        let lists = [
            ("name", KEY_OPTIMIZER, R::NAME.into()),
            ("slots", KEY_SLOTS, R::SLOTS.join(",")),
            ("carried scalars", KEY_CARRIED, R::CARRIED.join(",")),
        ];
        for (what, key, expected) in lists {
            let found = self.raw(key).ok_or_else(|| CheckpointError::Metadata {
                key: key.into(),
                expected: format!("`{expected}`"),
                found: None,
            })?;
            if found != expected {
                return Err(CheckpointError::Optimizer {
                    what,
                    expected,
                    found: found.into(),
                });
            }
        }
        R::HYPER
            .iter()
            .map(|name| {
                let key = format!("{HYPER}{name}");
                let found = self.raw(&key);
                found
                    .and_then(|v| v.parse::<f32>().ok())
                    .ok_or_else(|| CheckpointError::Metadata {
                        key,
                        expected: "a number".into(),
                        found: found.map(Into::into),
                    })
            })
            .collect()
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Metadata {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        Metadata {
            entries: iter
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
            warnings: Vec::new(),
        }
    }
}
