//! [`Csv`]: a loader of plain numeric CSV.
//!
//! Plain means: fields separated by one delimiter byte, no quoting, no escapes, no comments.
//! Every field is a number (spaces around it are ignored); a field that starts with a quote is
//! an error saying that quoting is not supported. Lines end in `\n` or `\r\n`; empty lines at
//! the end are skipped, an empty line elsewhere is an error that names it; a UTF-8 byte
//! order mark at the start (as Excel writes) is skipped. This is what numeric data sets
//! exported by pandas, NumPy or R look like, and it needs no CSV crate.

use super::error::{Column, Place};
use super::{DataError, Dataset};
use std::borrow::ToOwned;
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
}

impl Default for Csv {
    fn default() -> Self {
        Csv {
            targets: vec![Column::Index(0)],
            header: true,
            delimiter: b',',
            classes: None,
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
        let mut lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').map(strip_cr).collect();
        while lines.last().is_some_and(|l| l.trim_ascii().is_empty()) {
            lines.pop();
        }
        let first = *lines.first().ok_or_else(|| empty(source))?;
        if first.trim_ascii().is_empty() {
            let what = if self.header { "header" } else { "first row" };
            return Err(DataError::Shape(std::format!(
                "{source}:1: an empty line where the {what} should be"
            )));
        }
        let mut fields = Vec::new();
        split_fields(first, self.delimiter, source, 1, &mut fields)?;
        let width = fields.len();
        let header: Vec<String> = if self.header {
            fields
                .iter()
                .map(|f| String::from_utf8_lossy(f).into_owned())
                .collect()
        } else {
            Vec::new()
        };
        let targets = self.resolve(&header, width, source)?;
        let mut is_target = vec![false; width];
        for &t in &targets {
            is_target[t] = true;
        }
        let features = is_target.iter().filter(|&&t| !t).count();
        if features == 0 {
            return Err(DataError::Shape(std::format!(
                "{source}: no feature columns: every column is a target"
            )));
        }
        let skip = usize::from(self.header);
        if lines.len() == skip {
            return Err(empty(source));
        }
        // Reserved for every row, but never more values than the input has bytes: a short
        // input of many empty lines under a wide header must not reserve rows x columns.
        let rows = lines.len() - skip;
        let reserve = |per_row: usize| rows.saturating_mul(per_row).min(bytes.len());
        let mut x = Vec::with_capacity(reserve(features));
        let mut y = Vec::with_capacity(reserve(targets.len()));
        for (i, row) in lines.iter().enumerate().skip(skip) {
            let line = i + 1;
            if row.trim_ascii().is_empty() {
                fields.clear();
            } else {
                split_fields(row, self.delimiter, source, line, &mut fields)?;
            }
            if fields.len() != width {
                return Err(DataError::FieldCount {
                    source: source.to_owned(),
                    line,
                    expected: width,
                    got: fields.len(),
                });
            }
            for (j, field) in fields.iter().enumerate() {
                if !is_target[j] {
                    x.push(parse_number(field, source, line, j + 1)?);
                }
            }
            for &t in &targets {
                y.push(target(fields[t], line, t + 1)?);
            }
        }
        Dataset::new(x, y, features)
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

/// A line without its `\r` before the `\n`.
fn strip_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// Splits `line` into trimmed fields (replacing what `fields` held); a quoted field is an error.
fn split_fields<'a>(
    line: &'a [u8],
    delimiter: u8,
    source: &str,
    line_number: usize,
    fields: &mut Vec<&'a [u8]>,
) -> Result<(), DataError> {
    fields.clear();
    for (j, field) in line.split(|&b| b == delimiter).enumerate() {
        let field = field.trim_ascii();
        if field.first() == Some(&b'"') {
            return Err(DataError::Quoted {
                source: source.to_owned(),
                line: line_number,
                column: j + 1,
            });
        }
        fields.push(field);
    }
    Ok(())
}

/// A feature or real target: a finite `f32`.
fn parse_number(field: &[u8], source: &str, line: usize, column: usize) -> Result<f32, DataError> {
    std::str::from_utf8(field)
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
    std::str::from_utf8(field)
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
    fn quoting_is_refused() {
        let err = message(classes("y,\"a\"\n1,2\n"));
        assert_eq!(
            err,
            "t.csv:1:2: quoted fields are not supported (plain numeric CSV only)"
        );
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
