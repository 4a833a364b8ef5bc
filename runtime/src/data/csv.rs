//! [`Csv`]: a loader of numeric CSV (RFC 4180).
//!
//! Fields are separated by one delimiter byte; a field may be quoted (`"1,5"`), and a quoted
//! field may hold the delimiter, line breaks and quotes written twice (`"a ""b"""`), as
//! spreadsheets and pandas write them. Every feature and target is a number (spaces around it
//! are ignored, inside quotes too). Lines end in `\n`, `\r\n` or a bare `\r` (as old spreadsheets
//! write), in any mix; empty lines at the end are
//! skipped, an empty line elsewhere is an error that names it; a UTF-8 byte order mark at the
//! start (as Excel writes) is skipped. A quote that is not closed, or text after a closing
//! quote (`"1"2`), or a quote in an unquoted field (`1"2`), is an error naming its line and
//! column, never a guess.
//!
//! Errors name the line and column of the field (a field after a quoted line break is on a
//! later line than its row's first field); a row's wrong number of fields names the line
//! where the row starts.

use super::error::{Column, Place};
use super::sequence::Sequence;
use super::{DataError, Dataset};
use std::borrow::{Cow, ToOwned};
use std::path::Path;
use std::string::{String, ToString};
use std::vec::Vec;
use std::{fs, vec};

/// How to read a CSV input: which columns are targets, whether there is a header, the
/// delimiter and the number of classes. Every other column is a feature.
///
/// By default: a header, `,` as delimiter, the first column as the target, any number of
/// classes.
///
/// ```
/// use fusegraph_runtime::data::Csv;
/// let text = "x1,label,x2\n0.5,1,2\n1.5,0,-3e-1\n";
/// let data = Csv::new().label_column("label").classes(2).parse_classes(text, "mem.csv")?;
/// assert_eq!((data.len(), data.features()), (2, 2));
/// assert_eq!(data.sample(1), (&[1.5, -0.3][..], &[0][..]));
///
/// let err = Csv::new().label_column("class").parse_classes(text, "mem.csv").unwrap_err();
/// assert_eq!(err.to_string(), r#"mem.csv: no column "class"; the header has: x1, label, x2"#);
///
/// let values = Csv::new().no_header().delimiter(b';').target_indices(&[2, 0]);
/// let data = values.parse_values("1;2;3\n4;5;6\n", "mem.csv")?;
/// assert_eq!(data.sample(1), (&[5.0][..], &[6.0, 4.0][..]));
/// # Ok::<(), fusegraph_runtime::data::DataError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Csv {
    targets: Vec<Column>,
    header: bool,
    delimiter: u8,
    classes: Option<u32>,
    sequence: Option<Sequence>,
}

impl Default for Csv {
    fn default() -> Self {
        Csv {
            targets: vec![Column::Index(0)],
            header: true,
            delimiter: b',',
            classes: None,
            sequence: None,
        }
    }
}

impl Csv {
    /// The default settings.
    pub fn new() -> Self {
        Self::default()
    }

    /// The label (or single target) is the column with this header name.
    pub fn label_column(self, name: &str) -> Self {
        self.target_columns(&[name])
    }

    /// The label (or single target) is the column at this 0-based index.
    pub fn label_index(self, index: usize) -> Self {
        self.target_indices(&[index])
    }

    /// The targets are the columns with these header names, in this order.
    pub fn target_columns(mut self, names: &[&str]) -> Self {
        self.targets = names
            .iter()
            .map(|n| Column::Name((*n).to_owned()))
            .collect();
        self
    }

    /// The targets are the columns at these 0-based indices, in this order.
    pub fn target_indices(mut self, indices: &[usize]) -> Self {
        self.targets = indices.iter().map(|&i| Column::Index(i)).collect();
        self
    }

    /// The first line is data, not a header (columns can then be selected by index only).
    pub fn no_header(mut self) -> Self {
        self.header = false;
        self
    }

    /// Fields are separated by `delimiter` instead of `,`.
    pub fn delimiter(mut self, delimiter: u8) -> Self {
        self.delimiter = delimiter;
        self
    }

    /// Class labels must be below `classes` (checked by the `*_classes` readers).
    pub fn classes(mut self, classes: u32) -> Self {
        self.classes = Some(classes);
        self
    }

    /// Samples are sequences of `steps` time steps of the named `features`, read time-major
    /// (`[steps, features]`: every feature of step 0, then of step 1, ...) from the columns
    /// named by `pattern`, whatever their order in the file. In the pattern, `{t}` stands for
    /// the step (0-based, in decimal; zeros before it are allowed, so `t07` is step 7) and `{f}`
    /// for the feature's name (it may be left out for a single feature).
    ///
    /// Every column that is not a target must be one step of one feature: a missing, repeated
    /// or other column is a [`DataError::Sequence`] naming it. Without a header, the columns
    /// that are not targets are read in file order, and there must be `steps` times as many as
    /// features. Scale such samples per feature with
    /// [`Standardize::fit_samples`](super::Standardize::fit_samples) over `features.len()`
    /// values (see the [module](super) documentation).
    ///
    /// ```
    /// use fusegraph_runtime::data::Csv;
    /// // Two steps of two features, with the columns in no particular order.
    /// let text = "t1_vib,y,t0_temp,t0_vib,t01_temp\n4,1,1,2,3\n40,0,10,20,30\n";
    /// let csv = Csv::new().label_column("y").sequence(2, &["temp", "vib"], "t{t}_{f}");
    /// let data = csv.parse_classes(text, "mem.csv")?;
    /// assert_eq!(data.features(), 4); // [2, 2]
    /// assert_eq!(data.sample(1), (&[10.0, 20.0, 30.0, 40.0][..], &[0][..]));
    ///
    /// let err = csv.parse_classes("y,t0_temp,t0_vib,t1_temp\n1,2,3,4\n", "mem.csv").unwrap_err();
    /// assert_eq!(
    ///     err.to_string(),
    ///     r#"mem.csv: no column is step 1 of feature "vib" (pattern "t{t}_{f}")"#
    /// );
    /// # Ok::<(), fusegraph_runtime::data::DataError>(())
    /// ```
    pub fn sequence(mut self, steps: usize, features: &[&str], pattern: &str) -> Self {
        self.sequence = Some(Sequence {
            steps,
            features: features.iter().map(|&f| f.to_owned()).collect(),
            pattern: pattern.to_owned(),
            in_order: false,
        });
        self
    }

    /// As [`sequence`](Self::sequence), for the wide layout: the columns that are not targets
    /// must already stand in time-major order (step 0's features in order, then step 1's,
    /// ...), and the first one out of place is an error naming it and what belongs there.
    ///
    /// ```
    /// use fusegraph_runtime::data::Csv;
    /// let csv = Csv::new().label_column("y").sequence_in_order(2, &["a", "b"], "{f}{t}");
    /// let data = csv.parse_classes("a0,b0,a1,b1,y\n1,2,3,4,0\n", "mem.csv")?;
    /// assert_eq!(data.x(), &[1.0, 2.0, 3.0, 4.0]);
    /// let err = csv.parse_classes("a0,a1,b0,b1,y\n1,3,2,4,0\n", "mem.csv").unwrap_err();
    /// assert_eq!(
    ///     err.to_string(),
    ///     r#"mem.csv: column 2 "a1" is out of order: step 0 of feature "b" belongs there (time-major, pattern "{f}{t}")"#
    /// );
    /// # Ok::<(), fusegraph_runtime::data::DataError>(())
    /// ```
    pub fn sequence_in_order(self, steps: usize, features: &[&str], pattern: &str) -> Self {
        let mut csv = self.sequence(steps, features, pattern);
        if let Some(sequence) = &mut csv.sequence {
            sequence.in_order = true;
        }
        csv
    }

    /// Reads a file whose targets are class labels (non-negative integers).
    pub fn read_classes(&self, path: impl AsRef<Path>) -> Result<Dataset<u32>, DataError> {
        let path = path.as_ref();
        self.parse_classes(read(path)?, &path.display().to_string())
    }

    /// Reads a file whose targets are real values.
    pub fn read_values(&self, path: impl AsRef<Path>) -> Result<Dataset<f32>, DataError> {
        let path = path.as_ref();
        self.parse_values(read(path)?, &path.display().to_string())
    }

    /// Parses text in memory whose targets are class labels; `source` names it in errors.
    pub fn parse_classes(
        &self,
        text: impl AsRef<[u8]>,
        source: &str,
    ) -> Result<Dataset<u32>, DataError> {
        self.parse(text.as_ref(), source, |field, line, column| {
            let label = parse_label(field, source, line, column)?;
            match self.classes {
                Some(classes) if label >= classes => Err(DataError::LabelOutOfRange {
                    source: source.to_owned(),
                    at: Place::Line(line),
                    label,
                    classes,
                }),
                _ => Ok(label),
            }
        })
    }

    /// Parses text in memory whose targets are real values; `source` names it in errors.
    pub fn parse_values(
        &self,
        text: impl AsRef<[u8]>,
        source: &str,
    ) -> Result<Dataset<f32>, DataError> {
        self.parse(text.as_ref(), source, |field, line, column| {
            parse_number(field, source, line, column)
        })
    }

    /// Parses rows into features and targets, each target field through `target(field, line,
    /// column)`.
    fn parse<T: Copy>(
        &self,
        bytes: &[u8],
        source: &str,
        target: impl Fn(&[u8], usize, usize) -> Result<T, DataError>,
    ) -> Result<Dataset<T>, DataError> {
        let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
        let mut rows = Rows::new(bytes, self.delimiter, source);
        let mut fields = Vec::new();
        let first = rows.next(&mut fields)?.ok_or_else(|| empty(source))?;
        if fields.is_empty() {
            let what = if self.header { "header" } else { "first row" };
            return Err(DataError::Shape(std::format!(
                "{source}:{first}: an empty line where the {what} should be"
            )));
        }
        let (width, targets, features) = self.columns(&fields, source)?;
        let (mut x, mut y) = (Vec::new(), Vec::new());
        let mut push = |line: usize, fields: &[Field<'_>]| {
            if fields.len() != width {
                return Err(DataError::FieldCount {
                    source: source.to_owned(),
                    line,
                    expected: width,
                    got: fields.len(),
                });
            }
            for &j in &features {
                let field = &fields[j];
                x.push(parse_number(&field.value(), source, field.line, j + 1)?);
            }
            for &t in &targets {
                let field = &fields[t];
                y.push(target(&field.value(), field.line, t + 1)?);
            }
            Ok(())
        };
        if !self.header {
            push(first, &fields)?;
        }
        while let Some(line) = rows.next(&mut fields)? {
            push(line, &fields)?;
        }
        if y.is_empty() {
            return Err(empty(source));
        }
        Dataset::new(x, y, features.len())
    }

    /// The columns of rows like the first, `fields`: their number, the 0-based indices of the
    /// targets in order, and those of a sample's values in order; an error without values.
    fn columns(
        &self,
        fields: &[Field<'_>],
        source: &str,
    ) -> Result<(usize, Vec<usize>, Vec<usize>), DataError> {
        let width = fields.len();
        let header: Vec<String> = if self.header {
            fields
                .iter()
                .map(|f| String::from_utf8_lossy(&f.value()).into_owned())
                .collect()
        } else {
            Vec::new()
        };
        let targets = self.resolve(&header, width, source)?;
        let mut is_target = vec![false; width];
        for &t in &targets {
            is_target[t] = true;
        }
        if is_target.iter().all(|&t| t) {
            return Err(DataError::Shape(std::format!(
                "{source}: no feature columns: every column is a target"
            )));
        }
        let others: Vec<usize> = (0..width).filter(|&j| !is_target[j]).collect();
        let features = match &self.sequence {
            Some(sequence) => sequence.columns(&header, &others, source)?,
            None => others,
        };
        Ok((width, targets, features))
    }

    /// The 0-based indices of the target columns.
    fn resolve(
        &self,
        header: &[String],
        width: usize,
        source: &str,
    ) -> Result<Vec<usize>, DataError> {
        let unknown = |column: &Column| DataError::UnknownColumn {
            source: source.to_owned(),
            column: column.clone(),
            header: header.to_vec(),
            fields: width,
        };
        if self.targets.is_empty() {
            return Err(DataError::Shape(std::format!(
                "{source}: no target columns: select at least one"
            )));
        }
        self.targets
            .iter()
            .map(|column| match column {
                Column::Name(name) => header
                    .iter()
                    .position(|h| h == name)
                    .ok_or_else(|| unknown(column)),
                Column::Index(i) if *i < width => Ok(*i),
                Column::Index(_) => Err(unknown(column)),
            })
            .collect()
    }
}

/// The bytes of a file.
fn read(path: &Path) -> Result<Vec<u8>, DataError> {
    fs::read(path).map_err(|error| DataError::Io {
        path: path.to_owned(),
        error,
    })
}

/// [`DataError::Empty`] for `source`.
fn empty(source: &str) -> DataError {
    DataError::Empty {
        source: source.to_owned(),
    }
}

/// A field of a row: its text as written (inside the quotes of a quoted field, whose quotes
/// are still written twice: see [`unescape`]) and its line.
struct Field<'a> {
    text: &'a [u8],
    line: usize,
}

impl Field<'_> {
    /// The field's value: its text with each quote written twice made one.
    fn value(&self) -> Cow<'_, [u8]> {
        unescape(self.text)
    }
}

/// `text` with each `""` made `"` (a field's text holds quotes only in pairs).
fn unescape(text: &[u8]) -> Cow<'_, [u8]> {
    if !text.contains(&b'"') {
        return Cow::Borrowed(text);
    }
    let mut out = Vec::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.iter().position(|&b| b == b'"') {
        out.extend_from_slice(&rest[..=at]);
        rest = rest.get(at + 2..).unwrap_or_default();
    }
    out.extend_from_slice(rest);
    Cow::Owned(out)
}

/// The rows of a CSV input, read as RFC 4180 describes: fields separated by `delimiter`, rows
/// by `\n`, `\r\n` or a bare `\r`; a field in double quotes may hold the delimiter, line
/// breaks and quotes written twice. Spaces around a field are not part of it.
struct Rows<'a> {
    bytes: &'a [u8],
    at: usize,
    line: usize,
    delimiter: u8,
    source: &'a str,
}

impl<'a> Rows<'a> {
    fn new(bytes: &'a [u8], delimiter: u8, source: &'a str) -> Self {
        Rows {
            bytes,
            at: 0,
            line: 1,
            delimiter,
            source,
        }
    }

    /// Reads the next row with fields into `fields` and returns its line; `None` at the end,
    /// past empty lines. An empty line before a row is returned instead of the row, as a row
    /// without fields.
    fn next(&mut self, fields: &mut Vec<Field<'a>>) -> Result<Option<usize>, DataError> {
        let mut empty_line = None;
        while let Some(line) = self.row(fields)? {
            if !fields.is_empty() {
                if empty_line.is_some() {
                    fields.clear();
                }
                return Ok(Some(empty_line.unwrap_or(line)));
            }
            empty_line.get_or_insert(line);
        }
        Ok(None)
    }

    /// Reads one line's row into `fields` (none for an empty or blank line) and returns the
    /// line it starts on; `None` at the end of the input.
    fn row(&mut self, fields: &mut Vec<Field<'a>>) -> Result<Option<usize>, DataError> {
        fields.clear();
        if self.at >= self.bytes.len() {
            return Ok(None);
        }
        let start = self.line;
        loop {
            fields.push(self.field(fields.len() + 1)?);
            match self.bytes.get(self.at) {
                Some(&b) if b == self.delimiter => self.at += 1,
                Some(_) => {
                    // The line end that ends the row: a field stops at nothing else.
                    self.at += line_end(&self.bytes[self.at..]);
                    self.line += 1;
                    break;
                }
                None => break,
            }
        }
        if let [only] = fields.as_slice() {
            if only.text.trim_ascii().is_empty() {
                fields.clear();
            }
        }
        Ok(Some(start))
    }

    /// Reads field `column`, quoted or not, up to its delimiter, line end or the end.
    fn field(&mut self, column: usize) -> Result<Field<'a>, DataError> {
        self.skip_spaces();
        let line = self.line;
        let text = if self.bytes.get(self.at) == Some(&b'"') {
            self.quoted(column)?
        } else {
            self.unquoted(column)?
        };
        Ok(Field { text, line })
    }

    /// An unquoted field, without the spaces around it; a quote in it is an error.
    fn unquoted(&mut self, column: usize) -> Result<&'a [u8], DataError> {
        let rest = &self.bytes[self.at..];
        let len = rest
            .iter()
            .position(|&b| b == self.delimiter || is_line_end(b))
            .unwrap_or(rest.len());
        self.at += len;
        let text = rest[..len].trim_ascii();
        if text.contains(&b'"') {
            return Err(self.quote_error(self.line, column, IN_UNQUOTED));
        }
        Ok(text)
    }

    /// A quoted field, from its opening quote: the text inside its quotes, with the line
    /// breaks in it counted. Only spaces may follow its closing quote before the delimiter or
    /// the line end.
    fn quoted(&mut self, column: usize) -> Result<&'a [u8], DataError> {
        let (line, start) = (self.line, self.at + 1);
        self.at = start;
        loop {
            let rest = &self.bytes[self.at..];
            let Some(quote) = rest.iter().position(|&b| b == b'"') else {
                return Err(self.quote_error(line, column, UNCLOSED));
            };
            self.line += line_ends(&rest[..=quote]);
            self.at += quote + 1;
            if self.bytes.get(self.at) != Some(&b'"') {
                break;
            }
            self.at += 1;
        }
        let text = &self.bytes[start..self.at - 1];
        self.skip_spaces();
        match self.bytes.get(self.at) {
            None => Ok(text),
            Some(&b) if is_line_end(b) => Ok(text),
            Some(&b) if b == self.delimiter => Ok(text),
            Some(_) => Err(self.quote_error(self.line, column, AFTER_QUOTE)),
        }
    }

    /// Skips spaces and tabs (but not the delimiter, which may be one of them, nor line ends).
    fn skip_spaces(&mut self) {
        while let Some(&b) = self.bytes.get(self.at) {
            if b == self.delimiter || is_line_end(b) || !b.is_ascii_whitespace() {
                break;
            }
            self.at += 1;
        }
    }

    /// [`DataError::Quote`] at `line` and `column`.
    fn quote_error(&self, line: usize, column: usize, problem: &'static str) -> DataError {
        DataError::Quote {
            source: self.source.to_owned(),
            line,
            column,
            problem,
        }
    }
}

/// Whether `b` ends a line (alone, or `\r` with the `\n` after it).
fn is_line_end(b: u8) -> bool {
    b == b'\n' || b == b'\r'
}

/// The length of the line end that `bytes` starts with: 2 for `\r\n`, else 1.
fn line_end(bytes: &[u8]) -> usize {
    if bytes.starts_with(b"\r\n") {
        2
    } else {
        1
    }
}

/// The line ends (`\n`, `\r\n` and bare `\r`) in `text`, whose last byte is no line end.
fn line_ends(text: &[u8]) -> usize {
    text.iter()
        .enumerate()
        .filter(|&(i, &b)| b == b'\n' || (b == b'\r' && text.get(i + 1) != Some(&b'\n')))
        .count()
}

/// The problem of a quoted field whose closing quote is missing.
const UNCLOSED: &str = "a quoted field is not closed before the end of the input";
/// The problem of a quote in an unquoted field.
const IN_UNQUOTED: &str =
    "a quote inside an unquoted field (quote the field and write the quote twice)";
/// The problem of text after a closing quote.
const AFTER_QUOTE: &str =
    "text after the closing quote of a field (a quote inside a quoted field is written twice)";

/// A feature or real target: a finite `f32`.
fn parse_number(field: &[u8], source: &str, line: usize, column: usize) -> Result<f32, DataError> {
    std::str::from_utf8(field.trim_ascii())
        .ok()
        .and_then(|s| s.parse::<f32>().ok())
        .filter(|v| v.is_finite())
        .ok_or_else(|| DataError::NotANumber {
            source: source.to_owned(),
            line,
            column,
            field: String::from_utf8_lossy(field).into_owned(),
        })
}

/// A class label: a non-negative integer that fits in `u32`.
fn parse_label(field: &[u8], source: &str, line: usize, column: usize) -> Result<u32, DataError> {
    std::str::from_utf8(field.trim_ascii())
        .ok()
        .filter(|s| s.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|s| s.parse::<u32>().ok())
        .ok_or_else(|| DataError::NotALabel {
            source: source.to_owned(),
            line,
            column,
            field: String::from_utf8_lossy(field).into_owned(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::SequenceProblem;
    use std::string::ToString;

    fn classes(text: &str) -> Result<Dataset<u32>, DataError> {
        Csv::new().parse_classes(text, "t.csv")
    }

    fn message(r: Result<Dataset<u32>, DataError>) -> String {
        r.unwrap_err().to_string()
    }

    #[test]
    fn numbers_in_every_spelling() {
        let text = "y,a,b,c\r\n3, 1 ,-2.5,1e3\r\n0,+4,.5,-7E-2\r\n\r\n\n  \n";
        let d = classes(text).unwrap();
        assert_eq!(d.x(), &[1.0, -2.5, 1000.0, 4.0, 0.5, -0.07]);
        assert_eq!(d.y(), &[3, 0]);
    }

    #[test]
    fn a_byte_order_mark_is_skipped() {
        let d = Csv::new()
            .label_column("y")
            .parse_classes("\u{feff}y,a\n1,2\n", "t");
        assert_eq!(d.unwrap().y(), &[1]);
    }

    #[test]
    fn non_finite_and_junk_are_not_numbers() {
        for bad in ["nan", "inf", "1e39", "1,5", "", "0x10", "1 2"] {
            let text = std::format!("y;a\n1;{bad}\n");
            let err = Csv::new().delimiter(b';').parse_classes(&text, "t.csv");
            assert!(
                matches!(
                    err,
                    Err(DataError::NotANumber {
                        line: 2,
                        column: 2,
                        ..
                    })
                ),
                "{bad}: {err:?}"
            );
        }
    }

    #[test]
    fn labels_are_non_negative_integers() {
        for bad in ["-1", "1.0", "+2", "4294967296", "x", ""] {
            let text = std::format!("a,y\n1,{bad}\n");
            let err = message(Csv::new().label_index(1).parse_classes(&text, "t.csv"));
            assert_eq!(
                err,
                std::format!("t.csv:2:2: {bad:?} is not a class label (a non-negative integer)")
            );
        }
        let d = Csv::new()
            .no_header()
            .parse_classes("4294967295,1\n", "t")
            .unwrap();
        assert_eq!(d.y(), &[u32::MAX]);
    }

    #[test]
    fn rows_must_have_the_header_width() {
        assert_eq!(
            message(classes("y,a\n1,2\n\n1,2\n")),
            "t.csv:3: expected 2 fields, got 0"
        );
        assert_eq!(
            message(classes("y,a\n1,2,3\n")),
            "t.csv:2: expected 2 fields, got 3"
        );
    }

    #[test]
    fn quoted_fields_hold_delimiters_quotes_and_line_breaks() {
        let text = "\"y\",\"a,b\",\"say \"\"hi\"\"\"\n\"1\", \"2.5\" ,\"3\n\"\n";
        let header = Csv::new().label_column("z").parse_classes(text, "t.csv");
        assert_eq!(
            message(header),
            "t.csv: no column \"z\"; the header has: y, a,b, say \"hi\""
        );
        let d = classes(text).unwrap();
        assert_eq!((d.x(), d.y()), (&[2.5, 3.0][..], &[1][..]));
        let d = Csv::new()
            .delimiter(b'\t')
            .parse_classes("y\ta\n\"1\"\t\"\t2\"\n", "t");
        assert_eq!(d.unwrap().x(), &[2.0]);
    }

    /// Fields after a quoted line break are on their own line; broken quoting is an error
    /// that says where.
    #[test]
    fn quoting_errors_name_the_line_of_their_field() {
        let cases = [
            ("y,a,b\n1,\"2\n\",z\n", "t.csv:3:3: \"z\" is not a number"),
            (
                "y,a\n1,\"2\n\n\"\n0,\"x\"\n",
                "t.csv:5:2: \"x\" is not a number",
            ),
            ("y,a\n1,\"2\n\",3\n", "t.csv:2: expected 2 fields, got 3"),
            (
                "y,a\n1,2\n1,\"2\n3,4\n",
                "t.csv:3:2: a quoted field is not closed before the end of the input",
            ),
            (
                "y,a\n1,\"2\"3\n",
                "t.csv:2:2: text after the closing quote of a field \
                 (a quote inside a quoted field is written twice)",
            ),
            (
                "y,a\n1,2\"3\n",
                "t.csv:2:2: a quote inside an unquoted field \
                 (quote the field and write the quote twice)",
            ),
            ("y,a\n1,\"\"\n", "t.csv:2:2: \"\" is not a number"),
            ("y,a\n\"\"\n", "t.csv: no samples"),
        ];
        for (text, says) in cases {
            assert_eq!(message(classes(text)), says, "{text:?}");
        }
    }

    #[test]
    fn columns_are_resolved_or_refused() {
        let no_header = Csv::new().no_header().label_column("y");
        assert_eq!(
            message(no_header.parse_classes("1,2\n", "t")),
            "t: no column \"y\": without a header, select columns by index"
        );
        assert_eq!(
            message(Csv::new().label_index(2).parse_classes("y,a\n1,2\n", "t")),
            "t: no column 2 (0-based): rows have 2 fields"
        );
        let all = Csv::new()
            .target_indices(&[0, 1])
            .parse_values("a,b\n1,2\n", "t");
        assert!(matches!(all, Err(DataError::Shape(_))));
    }

    #[test]
    fn a_blank_first_line_is_named() {
        assert_eq!(
            message(classes("\r\ny,a\r\n1,2\r\n")),
            "t.csv:1: an empty line where the header should be"
        );
        let no_header = Csv::new().no_header().parse_classes(" \n1,2\n", "t");
        assert_eq!(
            message(no_header),
            "t:1: an empty line where the first row should be"
        );
    }

    #[test]
    fn crlf_lines_and_blank_lines_are_counted_exactly() {
        let text = "\u{feff}y,a\r\n1,2\r\n0,x\r\n";
        assert_eq!(message(classes(text)), "t.csv:3:2: \"x\" is not a number");
        let text = "y,a\r\n1,2\r\n\r\n3,4\r\n";
        assert_eq!(message(classes(text)), "t.csv:3: expected 2 fields, got 0");
        let long = std::format!("y,a\n1,{}x\n", "9".repeat(100_000));
        assert!(message(classes(&long)).starts_with("t.csv:2:2: \"999"));
    }

    #[test]
    fn bare_cr_line_ends_are_line_ends() {
        let lf = "y,\"a\nq\",b\n1,2,3\n0, 4 ,\"5\"\n\n";
        let expected = classes(lf).unwrap();
        assert_eq!(
            (expected.x(), expected.y()),
            (&[2.0, 3.0, 4.0, 5.0][..], &[1, 0][..])
        );
        let cr = lf.replace('\n', "\r");
        let crlf = lf.replace('\n', "\r\n");
        let mixed = "y,\"a\r\nq\",b\r1,2,3\n0, 4 ,\"5\"\r\n\r";
        for text in [&cr[..], &crlf, mixed] {
            assert_eq!(classes(text).unwrap(), expected, "{text:?}");
        }
        let cr_error = "y,\"a\r\rq\"\r1,2\r0,z\r";
        assert_eq!(
            message(classes(cr_error)),
            "t.csv:5:2: \"z\" is not a number"
        );
        let blank = "y,a\r1,2\r\r\n3,4\r";
        assert_eq!(message(classes(blank)), "t.csv:3: expected 2 fields, got 0");
        assert_eq!(message(classes("y,a\r\r")), "t.csv: no samples");
    }

    /// The header `names` over one row whose value in each column is `value(name)`, with the
    /// label 1 first.
    fn one_row(names: &[String], value: impl Fn(&str) -> f32) -> String {
        let values: Vec<String> = names.iter().map(|n| value(n).to_string()).collect();
        std::format!("y,{}\n1,{}\n", names.join(","), values.join(","))
    }

    /// 16 steps of 3 features named `t00_f0 ... t15_f2`, the columns shuffled: read
    /// time-major, each value where its name puts it.
    #[test]
    fn sequence_columns_are_read_time_major_whatever_their_order() {
        let mut names: Vec<String> = (0..16)
            .flat_map(|t| (0..3).map(move |f| std::format!("t{t:02}_f{f}")))
            .collect();
        let mut rng = crate::rng::Rng::new(crate::rng::Seed(3));
        rng.shuffle(&mut names);
        let value =
            |n: &str| (n[1..3].parse::<f32>().unwrap() * 10.0) + f32::from(n.as_bytes()[5] - b'0');
        let text = one_row(&names, value);
        let features = ["f0", "f1", "f2"];
        let data = Csv::new()
            .label_column("y")
            .sequence(16, &features, "t{t}_{f}")
            .parse_classes(&text, "t")
            .unwrap();
        let expected: Vec<f32> = (0..48).map(|i| (i / 3 * 10 + i % 3) as f32).collect();
        assert_eq!((data.x(), data.y()), (&expected[..], &[1][..]));
        let wrong = Csv::new()
            .label_column("y")
            .sequence(16, &features, "t{t}_f{f}");
        let err = wrong.parse_classes(&text, "t").unwrap_err();
        assert!(matches!(
            err,
            DataError::Sequence {
                problem: SequenceProblem::Extra { .. },
                ..
            }
        ));
        let in_order = Csv::new()
            .label_column("y")
            .sequence_in_order(16, &features, "t{t}_{f}");
        assert!(in_order.parse_classes(&text, "t").is_err());
        names.sort();
        let sorted = one_row(&names, value);
        assert_eq!(in_order.parse_classes(&sorted, "t").unwrap(), data);
    }

    #[test]
    fn sequence_columns_missing_repeated_or_extra_are_named() {
        let csv = Csv::new()
            .label_column("y")
            .sequence(2, &["a", "b"], "{f}_{t}");
        let cases = [
            (
                "y,a_0,b_0,a_1\n",
                "t: no column is step 1 of feature \"b\" (pattern \"{f}_{t}\")",
            ),
            (
                "y,a_0,b_0,a_1,b_1,a_01\n",
                "t: columns 4 and 6 are both step 1 of feature \"a\" (pattern \"{f}_{t}\")",
            ),
            (
                "y,a_0,b_0,a_1,b_1,a_2\n",
                "t: column 6 \"a_2\" is neither a target nor one of 2 steps of a feature \
                 (pattern \"{f}_{t}\")",
            ),
            (
                "y,a_0,id,b_0,a_1,b_1\n",
                "t: column 3 \"id\" is neither a target nor one of 2 steps of a feature \
                 (pattern \"{f}_{t}\")",
            ),
            (
                "y,a_0,b_0,a_1,b_-1\n",
                "t: column 5 \"b_-1\" is neither a target nor one of 2 steps of a feature \
                 (pattern \"{f}_{t}\")",
            ),
        ];
        for (header, says) in cases {
            let text = std::format!("{header}1{}\n", ",0".repeat(header.matches(',').count()));
            assert_eq!(message(csv.parse_classes(&text, "t")), says, "{header}");
        }
        let single = Csv::new().label_column("y").sequence(3, &["x"], "lag{t}");
        let d = single
            .parse_classes("lag2,y,lag0,lag1\n3,0,1,2\n", "t")
            .unwrap();
        assert_eq!(d.x(), &[1.0, 2.0, 3.0]);
    }

    #[test]
    fn sequences_without_a_header_are_counted_and_patterns_checked() {
        let csv = Csv::new().no_header().sequence(2, &["a", "b"], "{f}{t}");
        let d = csv.parse_classes("1,2,3,4,5\n", "t").unwrap();
        assert_eq!((d.x(), d.y()), (&[2.0, 3.0, 4.0, 5.0][..], &[1][..]));
        assert_eq!(
            message(csv.parse_classes("1,2,3,4\n", "t")),
            "t: 3 feature columns do not make 2 steps of 2 features"
        );
        let text = "y,a0\n1,2\n";
        for (steps, features, pattern, says) in [
            (
                0,
                &["a"][..],
                "{f}{t}",
                "a sequence needs at least one step and one feature",
            ),
            (
                1,
                &[],
                "{t}",
                "a sequence needs at least one step and one feature",
            ),
            (1, &["a", "a"], "{f}{t}", "the features' names must differ"),
            (
                1,
                &["a"],
                "{f}",
                "the pattern must hold `{t}` (the step) once",
            ),
            (
                1,
                &["a"],
                "{f}{t}{t}",
                "the pattern must hold `{t}` (the step) once",
            ),
            (
                1,
                &["a", "b"],
                "x{t}",
                "the pattern must hold `{f}` (the feature's name) once",
            ),
        ] {
            let csv = Csv::new().sequence(steps, features, pattern);
            let says = std::format!("t: sequence pattern {pattern:?}: {says}");
            assert_eq!(message(csv.parse_classes(text, "t")), says);
        }
    }

    #[test]
    fn labels_are_trimmed_but_not_converted() {
        assert_eq!(classes("y,a\n 7 ,2\n").unwrap().y(), &[7]);
        for bad in ["3.0", "-1", "1e2"] {
            let err = message(classes(&std::format!("y,a\n{bad},2\n")));
            assert_eq!(
                err,
                std::format!("t.csv:2:1: {bad:?} is not a class label (a non-negative integer)")
            );
        }
    }

    #[test]
    fn targets_must_be_selected() {
        let none = Csv::new()
            .target_indices(&[])
            .parse_values("a,b\n1,2\n", "t");
        assert_eq!(
            none.unwrap_err().to_string(),
            "t: no target columns: select at least one"
        );
    }

    #[test]
    fn empty_inputs() {
        for text in ["", "\n\n", "y,a\n", "y,a\r\n \r\n"] {
            assert_eq!(message(classes(text)), "t.csv: no samples", "{text:?}");
        }
    }

    #[test]
    fn classes_bound_labels() {
        let err = message(Csv::new().classes(3).parse_classes("y,a\n2,0\n3,0\n", "t"));
        assert_eq!(err, "t:3: label 3 is out of range for 3 classes");
    }
}
