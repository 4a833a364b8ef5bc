//! [`BatchError`]: a batch that does not fit a model and its train step, and the checks that
//! find it. The checked methods of a step (`try_run`, ...) return it, its unchecked methods
//! panic with its message, and the `Trainer` returns it for the same mistakes in a data set.

use super::input::InputValue;
use super::model::Model;
use super::step::Target;
use crate::layers::token::OutsideVocabulary;
use crate::layers::Lengths;
use crate::loss::{Loss, TargetValue, IGNORE};
use core::fmt;

/// A batch that does not fit a model and its train step. A checked method that returns it
/// has changed nothing.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BatchError {
    /// The input is not whole samples: its length is not a multiple of the model's input
    /// values per sample.
    InputLength {
        /// The input's length.
        len: usize,
        /// The model's input values per sample ([`Model::IN`]).
        per_sample: usize,
    },
    /// More samples than the train step's batch `B`.
    BatchSize {
        /// The samples given.
        samples: usize,
        /// The step's batch.
        max: usize,
    },
    /// Not as many targets as the samples need.
    TargetCount {
        /// The samples given.
        samples: usize,
        /// The targets they need ([`Loss::targets_per_sample`] each).
        expected: usize,
        /// The targets given.
        given: usize,
    },
    /// A class label the loss has no class for ([`Loss::classes`]) and that is not
    /// [`IGNORE`](crate::loss::IGNORE).
    Label {
        /// The sample, counting from 0.
        sample: usize,
        /// The label's position in the sample, for a loss with a label per position
        /// (`SequenceCrossEntropy`); `None` for one label per sample.
        position: Option<usize>,
        /// The label, as given.
        label: u32,
        /// The classes: labels are `0..classes`.
        classes: usize,
    },
    /// A token id outside the vocabulary of the layers that read the input
    /// ([`Model::VOCAB`]).
    TokenId {
        /// The sample, counting from 0.
        sample: usize,
        /// The id's position in the sample.
        position: usize,
        /// The id, as given.
        id: u32,
        /// The ids the model reads: `0..vocab`.
        vocab: usize,
    },
    /// A value of an `f32` input that is not a token id (not a whole number from 0 to
    /// `u32::MAX`: 2.5, -1, NaN) where the model's layers read ids ([`Model::VOCAB`] is not
    /// 0: an `Embedding` fed by the input). A whole number outside the vocabulary is a
    /// [`TokenId`](Self::TokenId).
    NotAnId {
        /// The sample, counting from 0.
        sample: usize,
        /// The value's position in the sample.
        position: usize,
        /// The value, as given.
        value: f32,
        /// The ids the model reads: `0..vocab`.
        vocab: usize,
    },
    /// Lengths ([`Padded`](super::Padded)) for a model none of whose layers honours them
    /// ([`Model::STEPS`] is 0).
    LengthsIgnored,
    /// Not one length per sample.
    LengthCount {
        /// The samples given.
        samples: usize,
        /// The lengths given.
        given: usize,
    },
    /// A length of no steps, or of more than the model's sequences have.
    Length {
        /// The sample, counting from 0.
        sample: usize,
        /// The length, as given.
        length: u32,
        /// The steps of the model's sequences ([`Model::STEPS`]): lengths are `1..=steps`.
        steps: usize,
    },
}

impl fmt::Display for BatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            BatchError::InputLength { len, per_sample } => write!(
                f,
                "input length {len} is not a multiple of {per_sample} (the model's inputs per sample)"
            ),
            BatchError::BatchSize { samples, max } => {
                write!(f, "batch of {samples} samples exceeds the maximum {max}")
            }
            BatchError::TargetCount {
                samples,
                expected,
                given,
            } => write!(f, "{samples} samples need {expected} targets, not {given}"),
            BatchError::Label {
                sample,
                position,
                label,
                classes,
            } => {
                write!(f, "sample {sample}")?;
                if let Some(position) = position {
                    write!(f, ", position {position}")?;
                }
                write!(f, ": label {label} is not a class of {classes} (write ")?;
                match classes {
                    1 => write!(f, "0)"),
                    2 => write!(f, "0 or 1)"),
                    _ => write!(f, "0 to {})", classes - 1),
                }
            }
            BatchError::TokenId {
                sample,
                position,
                id,
                vocab,
            } => OutsideVocabulary {
                sample,
                position,
                id,
                vocab,
            }
            .fmt(f),
            BatchError::NotAnId {
                sample,
                position,
                value,
                vocab,
            } => write!(
                f,
                "sample {sample}, position {position}: {value} is not a token id (the model \
                 reads ids as whole numbers from 0 to {})",
                vocab - 1
            ),
            BatchError::LengthsIgnored => f.write_str(
                "lengths were given, but no layer of the model honours them (a Gru, Lstm, \
                 CausalSelfAttention or MeanOverTime does): pass the input without `Padded`",
            ),
            BatchError::LengthCount { samples, given } => {
                write!(f, "{samples} samples need {samples} lengths, not {given}")
            }
            BatchError::Length {
                sample,
                length,
                steps,
            } => write!(
                f,
                "sample {sample}: length {length} is not a number of steps from 1 to {steps} \
                 (the model's sequence length)"
            ),
        }
    }
}

impl core::error::Error for BatchError {}

/// The value of a check whose failure is the caller's bug (an unchecked method): panics with
/// the error's message.
#[track_caller]
pub(crate) fn expect<T>(checked: Result<T, BatchError>) -> T {
    match checked {
        Ok(v) => v,
        Err(e) => panic!("{e}"),
    }
}

/// The samples in `x` for model `M`, if `x` is whole samples and at most `max` of them.
pub(crate) fn samples<M: Model>(x: &[M::Input], max: usize) -> Result<usize, BatchError> {
    if M::IN == 0 || !x.len().is_multiple_of(M::IN) {
        return Err(BatchError::InputLength {
            len: x.len(),
            per_sample: M::IN,
        });
    }
    let samples = x.len() / M::IN;
    if samples > max {
        return Err(BatchError::BatchSize { samples, max });
    }
    Ok(samples)
}

/// Checks that `y` holds the targets of `samples` samples of model `M`.
pub(crate) fn target_count<M: Model>(samples: usize, y: &[Target<M>]) -> Result<(), BatchError> {
    let expected = samples * <M::Loss as Loss>::targets_per_sample(M::OUT);
    if y.len() == expected {
        Ok(())
    } else {
        Err(BatchError::TargetCount {
            samples,
            expected,
            given: y.len(),
        })
    }
}

/// Checks that every class label in `y` names one of the classes of model `M`'s loss or is
/// [`IGNORE`], which the losses of class labels leave out.
pub(crate) fn labels<M: Model>(y: &[Target<M>]) -> Result<(), BatchError> {
    let Some(classes) = <M::Loss as Loss>::classes(M::OUT) else {
        return Ok(());
    };
    let past = |t: Target<M>| t.class().filter(|&c| c != IGNORE && c as usize >= classes);
    match y.iter().enumerate().find_map(|(i, &t)| Some((i, past(t)?))) {
        None => Ok(()),
        Some((i, label)) => {
            let per_sample = <M::Loss as Loss>::targets_per_sample(M::OUT).max(1);
            Err(BatchError::Label {
                sample: i / per_sample,
                position: (per_sample > 1).then_some(i % per_sample),
                label,
                classes,
            })
        }
    }
}

/// Checks that every token id in `x` is in model `M`'s vocabulary: `u32` ids, or `f32` values
/// that the model's layers read as ids (nothing for `f32` features, whose `VOCAB` is 0).
pub(crate) fn token_ids<M: Model>(x: &[M::Input]) -> Result<(), BatchError> {
    if M::VOCAB == 0 {
        return Ok(());
    }
    let outside = |v: &M::Input| !v.id().is_ok_and(|id| (id as usize) < M::VOCAB);
    let Some(i) = x.iter().position(outside) else {
        return Ok(());
    };
    let (sample, position, vocab) = (i / M::IN, i % M::IN, M::VOCAB);
    Err(match x[i].id() {
        Ok(id) => BatchError::TokenId {
            sample,
            position,
            id,
            vocab,
        },
        Err(value) => BatchError::NotAnId {
            sample,
            position,
            value,
            vocab,
        },
    })
}

/// Checks the lengths of `samples` samples of model `M`: none, or one each from 1 to
/// [`Model::STEPS`] for a model whose layers honour them.
pub(crate) fn lengths<M: Model>(lengths: Lengths<'_>, samples: usize) -> Result<(), BatchError> {
    let Some(given) = lengths.get() else {
        return Ok(());
    };
    if M::STEPS == 0 {
        return Err(BatchError::LengthsIgnored);
    }
    if given.len() != samples {
        return Err(BatchError::LengthCount {
            samples,
            given: given.len(),
        });
    }
    let outside = |&l: &u32| l == 0 || l as usize > M::STEPS;
    match given.iter().position(outside) {
        None => Ok(()),
        Some(sample) => Err(BatchError::Length {
            sample,
            length: given[sample],
            steps: M::STEPS,
        }),
    }
}

/// Checks an input for model `M`: whole samples, at most `max`, token ids in the vocabulary,
/// lengths that fit; returns the samples.
pub(crate) fn input<M: Model>(
    x: &[M::Input],
    lengths: Lengths<'_>,
    max: usize,
) -> Result<usize, BatchError> {
    let n = samples::<M>(x, max)?;
    token_ids::<M>(x)?;
    self::lengths::<M>(lengths, n)?;
    Ok(n)
}

/// Checks an input and its targets for model `M` ([`input`], then their count and class
/// labels); returns the samples.
pub(crate) fn labelled<M: Model>(
    x: &[M::Input],
    lengths: Lengths<'_>,
    y: &[Target<M>],
    max: usize,
) -> Result<usize, BatchError> {
    let n = input::<M>(x, lengths, max)?;
    target_count::<M>(n, y)?;
    labels::<M>(y)?;
    Ok(n)
}
