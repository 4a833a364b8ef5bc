//! [`DataError`]: what can be wrong with data, saying where.

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::string::String;
use std::vec::Vec;

/// Data that cannot be used, with the place it came from.
///
/// `source` fields name the input: the path of a file, or the name given to text or bytes
/// parsed from memory. Lines and columns are 1-based, as editors count them.
#[derive(Debug)]
pub enum DataError {
    /// Features and targets that do not make whole samples.
    Shape(String),
    /// A file that cannot be read.
    Io {
        /// The file.
        path: PathBuf,
        /// Why it cannot be read.
        error: io::Error,
    },
    /// A CSV field that should be a number (a finite `f32`) but is not.
    NotANumber {
        /// The input.
        source: String,
        /// Its line.
        line: usize,
        /// Its column.
        column: usize,
        /// The field's text.
        field: String,
    },
    /// A quoted CSV field that is not closed, or has text after its closing quote.
    Quote {
        /// The input.
        source: String,
        /// The line of the opening quote (not closed) or of the text after the closing one.
        line: usize,
        /// The field's column.
        column: usize,
        /// What is wrong.
        problem: &'static str,
    },
    /// A CSV row whose number of fields differs from the header's (or the first row's).
    FieldCount {
        /// The input.
        source: String,
        /// The row's line.
        line: usize,
        /// Fields in the header or first row.
        expected: usize,
        /// Fields in this row (0 for an empty line).
        got: usize,
    },
    /// A label or target column that the input does not have.
    UnknownColumn {
        /// The input.
        source: String,
        /// The column asked for.
        column: Column,
        /// The header's names (empty without a header).
        header: Vec<String>,
        /// Fields per row.
        fields: usize,
    },
    /// A CSV field in a label column that is not a non-negative integer (fitting in `u32`).
    NotALabel {
        /// The input.
        source: String,
        /// Its line.
        line: usize,
        /// Its column.
        column: usize,
        /// The field's text.
        field: String,
    },
    /// A class label not below the number of classes.
    LabelOutOfRange {
        /// The input.
        source: String,
        /// Where in the input.
        at: Place,
        /// The label.
        label: u32,
        /// The number of classes.
        classes: u32,
    },
    /// CSV columns that do not make the `[steps, features]` samples asked for (see
    /// [`Csv::sequence`](super::Csv::sequence)).
    Sequence {
        /// The input.
        source: String,
        /// The columns' naming pattern.
        pattern: String,
        /// What is wrong.
        problem: SequenceProblem,
    },
    /// An input without samples: empty, blank, or only a header.
    Empty {
        /// The input.
        source: String,
    },
    /// Bytes that do not start as an IDX file does (`00 00 type ndims`).
    BadMagic {
        /// The input.
        source: String,
        /// Its first bytes (up to four).
        found: Vec<u8>,
    },
    /// An IDX element type code outside 0x08, 0x09, 0x0B, 0x0C, 0x0D, 0x0E.
    UnsupportedType {
        /// The input.
        source: String,
        /// The type byte.
        code: u8,
    },
    /// An IDX input shorter than its header says.
    Truncated {
        /// The input.
        source: String,
        /// Bytes the header describes; `None` if that number overflows a `u64`.
        expected: Option<u64>,
        /// Bytes present.
        present: u64,
    },
    /// An IDX input longer than its header says.
    Trailing {
        /// The input.
        source: String,
        /// Bytes the header describes.
        expected: u64,
        /// Bytes present.
        present: u64,
    },
    /// An IDX labels input that is not one-dimensional `u8`.
    NotLabels {
        /// The input.
        source: String,
        /// Its element type code.
        code: u8,
        /// Its dimensions.
        dims: Vec<usize>,
    },
    /// IDX images and labels that count different numbers of items.
    CountMismatch {
        /// The images' input.
        images: String,
        /// Number of images.
        image_count: usize,
        /// The labels' input.
        labels: String,
        /// Number of labels.
        label_count: usize,
    },
    /// A gzip IDX input whose header describes more bytes than its compressed bytes can
    /// decompress to (at most [`MAX_INFLATION`](super::idx::MAX_INFLATION) per byte), refused
    /// before decompressing past the header.
    Oversized {
        /// The input.
        source: String,
        /// The header's dimensions.
        dims: Vec<usize>,
        /// Bytes the header describes; `None` if that number overflows a `u64`.
        described: Option<u64>,
        /// Bytes of the compressed input.
        compressed: u64,
    },
    /// A gzip IDX input that decompresses to more bytes than its header describes: refused at
    /// the first byte beyond them, without decompressing the rest.
    Overlong {
        /// The input.
        source: String,
        /// Bytes the header describes.
        expected: u64,
    },
    /// A window, horizon, stride or context of 0, or no target channel (see
    /// [`Windows`](super::Windows) and [`NextTokens`](super::NextTokens)).
    ZeroWindowParameter {
        /// What is 0: `"window"`, `"horizon"`, `"stride"`, `"number of target channels"` or
        /// `"context"`.
        what: &'static str,
    },
    /// A target channel that a series lacks.
    NoChannel {
        /// The channel asked for (0-based).
        channel: usize,
        /// Channels of the series.
        channels: usize,
    },
    /// A series (or a text's ids) shorter than one window and its horizon.
    SeriesTooShort {
        /// Steps of the series.
        steps: usize,
        /// Steps of a window.
        window: usize,
        /// Steps of the horizon.
        horizon: usize,
    },
    /// A saved vocabulary whose characters are not in the order of their code points, each
    /// once (see [`Vocabulary::from_metadata`](super::Vocabulary::from_metadata)).
    Vocabulary {
        /// The 0-based position of the character out of order.
        position: usize,
        /// The character.
        found: char,
        /// The character before it.
        before: char,
    },
    /// A gzip stream that cannot be decompressed.
    Gzip {
        /// The input.
        source: String,
        /// What went wrong.
        error: io::Error,
    },
    /// A gzip input while the `gzip` feature is off.
    GzipDisabled {
        /// The input.
        source: String,
    },
}

/// What is wrong with the columns of `[steps, features]` samples ([`DataError::Sequence`]).
/// Columns are 1-based, steps 0-based.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SequenceProblem {
    /// No column is this step of this feature.
    Missing {
        /// The step.
        step: usize,
        /// The feature.
        feature: String,
    },
    /// Two columns are this step of this feature (`t1_f0` and `t01_f0`).
    Duplicated {
        /// The step.
        step: usize,
        /// The feature.
        feature: String,
        /// The two columns.
        columns: [usize; 2],
    },
    /// A column that is no target and no step (below `steps`) of a feature.
    Extra {
        /// The column.
        column: usize,
        /// Its name.
        name: String,
        /// Steps per sample.
        steps: usize,
    },
    /// In the wide layout, a column where another step or feature belongs (time-major: every
    /// feature of step 0, then of step 1, ...).
    OutOfOrder {
        /// The column.
        column: usize,
        /// Its name.
        name: String,
        /// The step that belongs there.
        step: usize,
        /// The feature that belongs there.
        feature: String,
    },
}

/// A column of a CSV input, by header name or by 0-based index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Column {
    /// The column with this header name.
    Name(String),
    /// The column at this 0-based index.
    Index(usize),
}

/// Where in an input a value was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// A 1-based line of a text input.
    Line(usize),
    /// A 0-based item of a binary input.
    Item(usize),
}

impl fmt::Display for Place {
    /// Written after the source: `:17` or `: item 17`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::Line(line) => write!(f, ":{line}"),
            Place::Item(item) => write!(f, ": item {item}"),
        }
    }
}

impl fmt::Display for DataError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use DataError::*;
        match self {
            Shape(what) => write!(f, "{what}"),
            Io { path, error } => write!(f, "{}: {error}", path.display()),
            NotANumber {
                source,
                line,
                column,
                field,
            } => write!(f, "{source}:{line}:{column}: {field:?} is not a number"),
            Quote {
                source,
                line,
                column,
                problem,
            } => write!(f, "{source}:{line}:{column}: {problem}"),
            FieldCount {
                source,
                line,
                expected,
                got,
            } => write!(f, "{source}:{line}: expected {expected} fields, got {got}"),
            UnknownColumn {
                source,
                column,
                header,
                fields,
            } => unknown_column(f, source, column, header, *fields),
            NotALabel {
                source,
                line,
                column,
                field,
            } => write!(
                f,
                "{source}:{line}:{column}: {field:?} is not a class label (a non-negative integer)"
            ),
            LabelOutOfRange {
                source,
                at,
                label,
                classes,
            } => write!(
                f,
                "{source}{at}: label {label} is out of range for {classes} classes"
            ),
            Sequence {
                source,
                pattern,
                problem,
            } => sequence(f, source, pattern, problem),
            Empty { source } => write!(f, "{source}: no samples"),
            BadMagic { source, found } => {
                write!(f, "{source}: not an IDX file (starts with")?;
                for b in found {
                    write!(f, " {b:02x}")?;
                }
                write!(f, ", expected 00 00 <type> <dims>)")
            }
            UnsupportedType { source, code } => write!(
                f,
                "{source}: unsupported IDX element type 0x{code:02x} \
                 (known: 08 u8, 09 i8, 0b i16, 0c i32, 0d f32, 0e f64)"
            ),
            Truncated {
                source,
                expected: Some(expected),
                present,
            } => write!(
                f,
                "{source}: truncated: the header describes {expected} bytes, {present} are present"
            ),
            Truncated {
                source,
                expected: None,
                present,
            } => write!(
                f,
                "{source}: truncated: the header describes more bytes than a u64 counts, \
                 {present} are present"
            ),
            Trailing {
                source,
                expected,
                present,
            } => write!(
                f,
                "{source}: trailing bytes: the header describes {expected} bytes, \
                 {present} are present"
            ),
            NotLabels { source, code, dims } => write!(
                f,
                "{source}: labels must be one-dimensional u8 (type 0x08), \
                 not type 0x{code:02x} with dims {dims:?}"
            ),
            CountMismatch {
                images,
                image_count,
                labels,
                label_count,
            } => write!(
                f,
                "{images} has {image_count} images but {labels} has {label_count} labels"
            ),
            Oversized {
                source,
                dims,
                described: Some(described),
                compressed,
            } => write!(
                f,
                "{source}: the header's dims {dims:?} describe {described} bytes, more than \
                 {compressed} gzip bytes can decompress to (at most {})",
                compressed.saturating_mul(super::idx::MAX_INFLATION)
            ),
            Oversized {
                source,
                dims,
                described: None,
                ..
            } => write!(
                f,
                "{source}: the header's dims {dims:?} describe more bytes than a u64 counts"
            ),
            Overlong { source, expected } => write!(
                f,
                "{source}: gzip: decompresses to more bytes than the header's {expected}"
            ),
            ZeroWindowParameter { what } => write!(f, "the {what} must be at least 1"),
            NoChannel { channel, channels } => {
                write!(
                    f,
                    "no channel {channel}: the series has {channels} channels"
                )
            }
            SeriesTooShort {
                steps,
                window,
                horizon,
            } => write!(
                f,
                "a series of {steps} steps is shorter than a window of {window} steps and its \
                 horizon of {horizon}"
            ),
            Vocabulary {
                position,
                found,
                before,
            } => write!(
                f,
                "vocabulary: character {found:?} at {position} is not after {before:?} \
                 (the characters must be in the order of code points, each once)"
            ),
            Gzip { source, error } => write!(f, "{source}: gzip: {error}"),
            GzipDisabled { source } => write!(
                f,
                "{source}: gzip-compressed, but fusegraph was built without the `gzip` feature"
            ),
        }
    }
}

/// The message of [`DataError::Sequence`].
fn sequence(
    f: &mut fmt::Formatter<'_>,
    source: &str,
    pattern: &str,
    problem: &SequenceProblem,
) -> fmt::Result {
    match problem {
        SequenceProblem::Missing { step, feature } => write!(
            f,
            "{source}: no column is step {step} of feature {feature:?} (pattern {pattern:?})"
        ),
        SequenceProblem::Duplicated {
            step,
            feature,
            columns: [a, b],
        } => write!(
            f,
            "{source}: columns {a} and {b} are both step {step} of feature {feature:?} \
             (pattern {pattern:?})"
        ),
        SequenceProblem::Extra {
            column,
            name,
            steps,
        } => write!(
            f,
            "{source}: column {column} {name:?} is neither a target nor one of {steps} steps \
             of a feature (pattern {pattern:?})"
        ),
        SequenceProblem::OutOfOrder {
            column,
            name,
            step,
            feature,
        } => write!(
            f,
            "{source}: column {column} {name:?} is out of order: step {step} of feature \
             {feature:?} belongs there (time-major, pattern {pattern:?})"
        ),
    }
}

/// The message of [`DataError::UnknownColumn`].
fn unknown_column(
    f: &mut fmt::Formatter<'_>,
    source: &str,
    column: &Column,
    header: &[String],
    fields: usize,
) -> fmt::Result {
    match column {
        Column::Name(name) if header.is_empty() => write!(
            f,
            "{source}: no column {name:?}: without a header, select columns by index"
        ),
        Column::Name(name) => write!(
            f,
            "{source}: no column {name:?}; the header has: {}",
            header.join(", ")
        ),
        Column::Index(i) => write!(
            f,
            "{source}: no column {i} (0-based): rows have {fields} fields"
        ),
    }
}

impl std::error::Error for DataError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DataError::Io { error, .. } | DataError::Gzip { error, .. } => Some(error),
            _ => None,
        }
    }
}
