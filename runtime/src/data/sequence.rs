//! [`Sequence`]: CSV columns that make `[steps, features]` samples, found by a naming pattern.

use super::error::SequenceProblem;
use super::DataError;
use std::borrow::ToOwned;
use std::string::String;
use std::vec::Vec;
use std::{format, vec};

/// Samples of `steps` time steps of `features` each, read time-major (`[steps, features]`)
/// from the columns named by `pattern`: `{t}` is the step (0-based, in decimal, zeros before it
/// allowed: `t07` is step 7) and `{f}` the feature's name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Sequence {
    /// Time steps per sample.
    pub(super) steps: usize,
    /// The features' names, in the order of a step's values.
    pub(super) features: Vec<String>,
    /// The columns' names, with `{t}` and `{f}`.
    pub(super) pattern: String,
    /// Whether the columns must already stand in time-major order (the wide layout).
    pub(super) in_order: bool,
}

impl Sequence {
    /// The columns (0-based) of the samples' values in time-major order, among the non-target
    /// columns `candidates` (in file order) of a header `header` (empty without a header).
    pub(super) fn columns(
        &self,
        header: &[String],
        candidates: &[usize],
        source: &str,
    ) -> Result<Vec<usize>, DataError> {
        self.check_pattern(source)?;
        let width = self.steps * self.features.len();
        if header.is_empty() {
            if candidates.len() != width {
                return Err(DataError::Shape(format!(
                    "{source}: {} feature columns do not make {} steps of {} features",
                    candidates.len(),
                    self.steps,
                    self.features.len()
                )));
            }
            return Ok(candidates.to_vec());
        }
        let mut slots: Vec<Option<usize>> = vec![None; width];
        for (k, &j) in candidates.iter().enumerate() {
            let Some((step, feature)) = self.step_of(&header[j]) else {
                return Err(self.error(source, self.extra(j, header)));
            };
            let slot = step * self.features.len() + feature;
            if self.in_order && slot != k {
                return Err(self.error(source, self.out_of_order(j, k, header)));
            }
            if let Some(first) = slots[slot].replace(j) {
                let problem = SequenceProblem::Duplicated {
                    step,
                    feature: self.features[feature].clone(),
                    columns: [first + 1, j + 1],
                };
                return Err(self.error(source, problem));
            }
        }
        slots
            .iter()
            .enumerate()
            .map(|(slot, column)| {
                column.ok_or_else(|| {
                    let problem = SequenceProblem::Missing {
                        step: slot / self.features.len(),
                        feature: self.features[slot % self.features.len()].clone(),
                    };
                    self.error(source, problem)
                })
            })
            .collect()
    }

    /// The step and the feature (its index) of a column named `name`, if the name follows the
    /// pattern with a step below `steps` (the first feature that fits, if several do).
    fn step_of(&self, name: &str) -> Option<(usize, usize)> {
        self.features.iter().enumerate().find_map(|(i, feature)| {
            let pattern = self.pattern.replace("{f}", feature);
            let (before, after) = pattern.split_once("{t}")?;
            let digits = name.strip_prefix(before)?.strip_suffix(after)?;
            let step = Some(digits)
                .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))?
                .parse::<usize>()
                .ok()
                .filter(|&t| t < self.steps)?;
            Some((step, i))
        })
    }

    /// A non-target column `j` that is no step of a feature.
    fn extra(&self, j: usize, header: &[String]) -> SequenceProblem {
        SequenceProblem::Extra {
            column: j + 1,
            name: header[j].clone(),
            steps: self.steps,
        }
    }

    /// Column `j`, the `k`-th non-target one, where another step or feature belongs.
    fn out_of_order(&self, j: usize, k: usize, header: &[String]) -> SequenceProblem {
        SequenceProblem::OutOfOrder {
            column: j + 1,
            name: header[j].clone(),
            step: k / self.features.len(),
            feature: self.features[k % self.features.len()].clone(),
        }
    }

    /// [`DataError::Sequence`] of `problem`.
    fn error(&self, source: &str, problem: SequenceProblem) -> DataError {
        DataError::Sequence {
            source: source.to_owned(),
            pattern: self.pattern.clone(),
            problem,
        }
    }

    /// An error unless there are steps and distinct features, and the pattern holds `{t}` once
    /// and `{f}` once (or not at all, for a single feature).
    fn check_pattern(&self, source: &str) -> Result<(), DataError> {
        let count = |p: &str| self.pattern.matches(p).count();
        let features = self.features.len();
        let problem = if self.steps == 0 || features == 0 {
            "a sequence needs at least one step and one feature"
        } else if (1..features).any(|i| self.features[..i].contains(&self.features[i])) {
            "the features' names must differ"
        } else if count("{t}") != 1 {
            "the pattern must hold `{t}` (the step) once"
        } else if count("{f}") > 1 || (count("{f}") == 0 && features > 1) {
            "the pattern must hold `{f}` (the feature's name) once"
        } else {
            return Ok(());
        };
        Err(DataError::Shape(format!(
            "{source}: sequence pattern {:?}: {problem}",
            self.pattern
        )))
    }
}
