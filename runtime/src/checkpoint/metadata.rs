//! The string map in a checkpoint's header: what the file is, the model's signature, the
//! optimizer's name, hyper-parameters and configuration, and the caller's own entries.

use super::layout::signature;
use super::CheckpointError;
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
/// `format_version`: the version of the layout of names and metadata.
pub(crate) const KEY_VERSION: &str = "format_version";
/// The current format version.
pub(crate) const VERSION: &str = "1";
/// `contents`: [`MODEL`] (from `save_model`) or [`TRAINING`] (from `save`).
pub(crate) const KEY_CONTENTS: &str = "contents";
/// Parameters and state only.
pub(crate) const MODEL: &str = "model";
/// The model, the optimizer's state, the step counter and the dropout seed.
pub(crate) const TRAINING: &str = "training";
/// `model_signature`: [`signature`](super::signature) of the model, 16 hex digits.
pub(crate) const KEY_SIGNATURE: &str = "model_signature";
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

    /// The entry stored under exactly `key`.
    pub(crate) fn raw(&self, key: &str) -> Option<&str> {
        self.entries.get(key).map(String::as_str)
    }

    fn insert(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.entries.insert(key.into(), value.into());
    }

    /// The standard entries of a model file, and `extra` under `user.`.
    pub(crate) fn for_model<M: Model>(contents: &str, extra: &[(&str, &str)]) -> Self {
        let mut m = Metadata::default();
        m.insert(KEY_FORMAT, FORMAT);
        m.insert(KEY_VERSION, VERSION);
        m.insert(KEY_CONTENTS, contents);
        m.insert(KEY_SIGNATURE, signature::<M>());
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
        match self.raw(key) {
            Some(v) if v == expected => Ok(()),
            found => Err(CheckpointError::Metadata {
                key: key.into(),
                expected: format!("`{expected}`"),
                found: found.map(Into::into),
            }),
        }
    }

    /// Checks that this is a fusegraph checkpoint of this format version for model `M`,
    /// holding `contents` (a training checkpoint holds a model too).
    pub(crate) fn check_model<M: Model>(&self, contents: &str) -> Result<(), CheckpointError> {
        self.expect(KEY_FORMAT, FORMAT)?;
        self.expect(KEY_VERSION, VERSION)?;
        if contents == TRAINING || self.raw(KEY_CONTENTS) != Some(TRAINING) {
            self.expect(KEY_CONTENTS, contents)?;
        }
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
        }
    }
}
