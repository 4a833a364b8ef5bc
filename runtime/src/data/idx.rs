//! IDX files, the format of MNIST and Fashion-MNIST, plain or gzip-compressed.
//!
//! An IDX file is a header, `00 00 <type> <ndims>` then `ndims` big-endian `u32` dimensions,
//! followed by the values in big-endian row-major order. The types are 0x08 `u8`, 0x09 `i8`,
//! 0x0B `i16`, 0x0C `i32`, 0x0D `f32` and 0x0E `f64`; all are read as `f32` (an `i32` beyond
//! 2^24 or an `f64` rounds). An input that starts with the gzip magic `1f 8b` is decompressed
//! first (with the `gzip` feature; without it, that is an error).
//!
//! The header is checked against the bytes present before anything is allocated: a file whose
//! dimensions describe more (or fewer) bytes than it holds is an error. A gzip stream is never
//! inflated before it is checked: its header is read from the first decompressed bytes, and the
//! size it describes (computed without overflow) is refused at once if the compressed input
//! cannot hold it. Deflate expands a compressed byte to at most 1032 bytes (a match of 258
//! bytes coded in two bits), and gzip's framing adds bytes that expand to nothing, so a gzip
//! input of `n` bytes decompresses to at most `1032 n` bytes ([`DataError::Oversized`] beyond
//! that). The rest is decompressed in bounded chunks into a buffer that never grows beyond the
//! described size, and decompression stops at the first byte past it
//! ([`DataError::Overlong`]): a small file cannot fill the memory. Bytes after the last gzip
//! member are an error.
//!
//! ```
//! use fusegraph_runtime::data::idx;
//! // Two 2x2 images of u8, and their labels.
//! let images = [0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2, 0, 1, 2, 3, 4, 5, 6, 255];
//! let labels = [0, 0, 8, 1, 0, 0, 0, 2, 7, 1];
//! let images = idx::parse(&images, "images.idx")?;
//! assert_eq!(images.dims(), &[2, 2, 2]);
//! let data = idx::dataset(images, idx::parse(&labels, "labels.idx")?, Some(10))?;
//! assert_eq!((data.len(), data.features()), (2, 4));
//! assert_eq!(data.sample(1), (&[4.0, 5.0, 6.0, 255.0][..], &[1][..]));
//! # Ok::<(), fusegraph_runtime::data::DataError>(())
//! ```

use super::error::Place;
use super::{DataError, Dataset};
use std::borrow::ToOwned;
use std::path::Path;
use std::string::{String, ToString};
use std::vec::Vec;
use std::{format, fs};

/// The first two bytes of a gzip stream.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// The type code of `u8` values (the only type of label files).
const U8: u8 = 0x08;

/// The contents of an IDX file: its dimensions and its values as `f32`.
#[derive(Clone, Debug, PartialEq)]
pub struct Idx {
    source: String,
    code: u8,
    dims: Vec<usize>,
    values: Vec<f32>,
}

impl Idx {
    /// The name of the input (a path, or the name given to [`parse`]).
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The element type code (0x08 for `u8`, ..., 0x0E for `f64`).
    pub fn code(&self) -> u8 {
        self.code
    }

    /// The dimensions; the first counts the items (images, labels).
    pub fn dims(&self) -> &[usize] {
        &self.dims
    }

    /// All values, row-major.
    pub fn values(&self) -> &[f32] {
        &self.values
    }

    /// All values, row-major, without copying them.
    pub fn into_values(self) -> Vec<f32> {
        self.values
    }
}

/// Reads an IDX file, plain or gzip-compressed.
pub fn read(path: impl AsRef<Path>) -> Result<Idx, DataError> {
    let path = path.as_ref();
    let bytes = fs::read(path).map_err(|error| DataError::Io {
        path: path.to_owned(),
        error,
    })?;
    parse(&bytes, &path.display().to_string())
}

/// Parses IDX bytes in memory, plain or gzip-compressed; `source` names them in errors.
pub fn parse(bytes: &[u8], source: &str) -> Result<Idx, DataError> {
    if bytes.starts_with(&GZIP_MAGIC) {
        parse_plain(&gunzip(bytes, source)?, source)
    } else {
        parse_plain(bytes, source)
    }
}

/// Reads images and their labels (a one-dimensional `u8` file) into a data set: each image,
/// whatever its dimensions, becomes a sample of their product features. With `classes`,
/// every label must be below it.
pub fn load(
    images: impl AsRef<Path>,
    labels: impl AsRef<Path>,
    classes: Option<u32>,
) -> Result<Dataset<u32>, DataError> {
    dataset(read(images)?, read(labels)?, classes)
}

/// Images and their labels, already parsed, as a data set (see [`load`]).
pub fn dataset(images: Idx, labels: Idx, classes: Option<u32>) -> Result<Dataset<u32>, DataError> {
    if labels.code != U8 || labels.dims.len() != 1 {
        return Err(DataError::NotLabels {
            source: labels.source,
            code: labels.code,
            dims: labels.dims,
        });
    }
    let Some((&count, item)) = images.dims.split_first() else {
        return Err(DataError::Shape(format!(
            "{}: images need at least one dimension (the count)",
            images.source
        )));
    };
    if count != labels.dims[0] {
        return Err(DataError::CountMismatch {
            images: images.source,
            image_count: count,
            labels: labels.source,
            label_count: labels.dims[0],
        });
    }
    let features = item.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
    let Some(features) = features.filter(|&f| f > 0) else {
        return Err(DataError::Shape(format!(
            "{}: images of dims {item:?} do not make samples",
            images.source
        )));
    };
    let y: Vec<u32> = labels.values.iter().map(|&v| v as u32).collect();
    if let Some(classes) = classes {
        if let Some(i) = y.iter().position(|&label| label >= classes) {
            return Err(DataError::LabelOutOfRange {
                source: labels.source,
                at: Place::Item(i),
                label: y[i],
                classes,
            });
        }
    }
    Dataset::new(images.values, y, features)
}

/// The most bytes deflate expands one compressed byte to: a match of 258 bytes coded in two
/// bits, `258 * 8 / 2`.
pub const MAX_INFLATION: u64 = 1032;

/// Bytes by which the buffer of a gzip input's decompressed bytes grows at least (it grows by
/// its own length beyond that, never past the size the header describes).
#[cfg(feature = "gzip")]
const CHUNK: usize = 64 << 10;

/// Decompresses a gzip stream (of one or more members, and nothing after them) as far as its
/// IDX header describes, checking the header first: a size that overflows or that the
/// compressed bytes cannot hold is refused before decompressing further, and a byte beyond the
/// described size stops decompression with an error.
#[cfg(feature = "gzip")]
fn gunzip(bytes: &[u8], source: &str) -> Result<Vec<u8>, DataError> {
    use std::io::Read;
    let fail = |error| DataError::Gzip {
        source: source.to_owned(),
        error,
    };
    let mut stream = Members {
        rest: bytes,
        member: None,
    };
    let mut out = Vec::new();
    read_up_to(&mut stream, &mut out, 4).map_err(fail)?;
    if let [0, 0, _, ndims] = out[..] {
        read_up_to(&mut stream, &mut out, 4 + 4 * u64::from(ndims)).map_err(fail)?;
    }
    let compressed = bytes.len() as u64;
    let declared = match described(&out) {
        Described::Invalid => return Ok(out),
        Described::Bytes(n) if n <= compressed.saturating_mul(MAX_INFLATION) => n,
        Described::Bytes(n) => return Err(oversized(&out, Some(n), compressed, source)),
        Described::Overflow => return Err(oversized(&out, None, compressed, source)),
    };
    read_up_to(&mut stream, &mut out, declared).map_err(fail)?;
    if out.len() as u64 == declared && stream.read(&mut [0]).map_err(fail)? > 0 {
        return Err(DataError::Overlong {
            source: source.to_owned(),
            expected: declared,
        });
    }
    Ok(out)
}

/// [`DataError::Oversized`] for the IDX header `header`.
#[cfg(feature = "gzip")]
fn oversized(header: &[u8], described: Option<u64>, compressed: u64, source: &str) -> DataError {
    DataError::Oversized {
        source: source.to_owned(),
        dims: header_dims(&header[4..]),
        described,
        compressed,
    }
}

/// Reads `stream` into `out` until it holds `len` bytes or the stream ends, growing `out` by at
/// most its own length (or [`CHUNK`]) at a time and never beyond `len` bytes.
#[cfg(feature = "gzip")]
fn read_up_to(stream: &mut impl std::io::Read, out: &mut Vec<u8>, len: u64) -> std::io::Result<()> {
    while (out.len() as u64) < len {
        let start = out.len();
        let grow = (len - start as u64).min(start.max(CHUNK) as u64) as usize;
        out.reserve_exact(grow);
        out.resize(start + grow, 0);
        let mut filled = start;
        while filled < out.len() {
            match stream.read(&mut out[filled..]) {
                Ok(0) => {
                    out.truncate(filled);
                    return Ok(());
                }
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

/// The members of a gzip stream, one after the other; bytes after the last member that do not
/// start another one are an error.
#[cfg(feature = "gzip")]
struct Members<'a> {
    rest: &'a [u8],
    member: Option<flate2::bufread::GzDecoder<&'a [u8]>>,
}

#[cfg(feature = "gzip")]
impl std::io::Read for Members<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            if let Some(member) = &mut self.member {
                let n = member.read(buf)?;
                if n > 0 || buf.is_empty() {
                    return Ok(n);
                }
                self.rest = member.get_ref();
                self.member = None;
            }
            if self.rest.is_empty() {
                return Ok(0);
            }
            if !self.rest.starts_with(&GZIP_MAGIC) {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{} bytes after the end of the gzip stream", self.rest.len()),
                ));
            }
            self.member = Some(flate2::bufread::GzDecoder::new(self.rest));
        }
    }
}

/// Without the `gzip` feature, a gzip stream is an error.
#[cfg(not(feature = "gzip"))]
fn gunzip(_: &[u8], source: &str) -> Result<Vec<u8>, DataError> {
    Err(DataError::GzipDisabled {
        source: source.to_owned(),
    })
}

/// What the start of an IDX input says about its length.
enum Described {
    /// The whole input is this many bytes long.
    Bytes(u64),
    /// More bytes than a `u64` counts.
    Overflow,
    /// The header is incomplete, or not an IDX header.
    Invalid,
}

/// The length of the input that `bytes` starts, as its header describes it.
fn described(bytes: &[u8]) -> Described {
    let [0, 0, code, ndims, ..] = *bytes else {
        return Described::Invalid;
    };
    let header = 4 + 4 * usize::from(ndims);
    let (Some(size), Some(dims)) = (element_size(code), bytes.get(4..header)) else {
        return Described::Invalid;
    };
    dims.chunks_exact(4)
        .map(|d| u64::from(u32::from_be_bytes([d[0], d[1], d[2], d[3]])))
        .try_fold(size as u64, u64::checked_mul)
        .and_then(|n| n.checked_add(header as u64))
        .map_or(Described::Overflow, Described::Bytes)
}

/// The dimensions at the start of `bytes`: big-endian `u32`, as many as whole groups of four.
fn header_dims(bytes: &[u8]) -> Vec<usize> {
    bytes
        .chunks_exact(4)
        .map(|d| u32::from_be_bytes([d[0], d[1], d[2], d[3]]) as usize)
        .collect()
}

/// Parses uncompressed IDX bytes.
fn parse_plain(bytes: &[u8], source: &str) -> Result<Idx, DataError> {
    let present = bytes.len() as u64;
    let truncated = |expected| DataError::Truncated {
        source: source.to_owned(),
        expected,
        present,
    };
    if bytes.is_empty() {
        return Err(DataError::Empty {
            source: source.to_owned(),
        });
    }
    if bytes.iter().take(2).any(|&b| b != 0) {
        return Err(DataError::BadMagic {
            source: source.to_owned(),
            found: bytes[..bytes.len().min(4)].to_vec(),
        });
    }
    let [_, _, code, ndims, ..] = *bytes else {
        return Err(truncated(Some(4)));
    };
    if element_size(code).is_none() {
        return Err(DataError::UnsupportedType {
            source: source.to_owned(),
            code,
        });
    }
    let header = 4 + 4 * usize::from(ndims);
    let Some(dims) = bytes.get(4..header) else {
        return Err(truncated(Some(header as u64)));
    };
    let dims = header_dims(dims);
    match described(bytes) {
        Described::Bytes(e) if e == present => {}
        Described::Bytes(e) if e < present => {
            return Err(DataError::Trailing {
                source: source.to_owned(),
                expected: e,
                present,
            })
        }
        Described::Bytes(e) => return Err(truncated(Some(e))),
        _ => return Err(truncated(None)),
    }
    Ok(Idx {
        source: source.to_owned(),
        code,
        dims,
        values: decode(code, &bytes[header..]),
    })
}

/// Bytes per value of type `code`, or `None` for an unknown type.
fn element_size(code: u8) -> Option<usize> {
    match code {
        0x08 | 0x09 => Some(1),
        0x0B => Some(2),
        0x0C | 0x0D => Some(4),
        0x0E => Some(8),
        _ => None,
    }
}

/// Big-endian values of type `code` (known to [`element_size`]) as `f32`.
fn decode(code: u8, data: &[u8]) -> Vec<f32> {
    match code {
        0x08 => data.iter().map(|&b| f32::from(b)).collect(),
        0x09 => data.iter().map(|&b| f32::from(b as i8)).collect(),
        0x0B => each(data, |b| f32::from(i16::from_be_bytes(b))),
        0x0C => each(data, |b| i32::from_be_bytes(b) as f32),
        0x0D => each(data, f32::from_be_bytes),
        _ => each(data, |b| f64::from_be_bytes(b) as f32),
    }
}

/// `f` of each `N`-byte group of `data`.
fn each<const N: usize>(data: &[u8], f: impl Fn([u8; N]) -> f32) -> Vec<f32> {
    data.chunks_exact(N)
        .map(|c| f(c.try_into().expect("chunks of N bytes")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;
    use std::vec;

    /// An IDX file of type `code` with these dims and raw data bytes.
    fn file(code: u8, dims: &[u32], data: &[u8]) -> Vec<u8> {
        let mut b = vec![0, 0, code, dims.len() as u8];
        for d in dims {
            b.extend_from_slice(&d.to_be_bytes());
        }
        b.extend_from_slice(data);
        b
    }

    #[test]
    fn every_type_decodes_big_endian() {
        let cases: [(u8, Vec<u8>, f32); 6] = [
            (0x08, vec![200], 200.0),
            (0x09, vec![0xff], -1.0),
            (0x0B, (-300i16).to_be_bytes().to_vec(), -300.0),
            (0x0C, 70_000i32.to_be_bytes().to_vec(), 70_000.0),
            (0x0D, 1.5f32.to_be_bytes().to_vec(), 1.5),
            (0x0E, (-0.25f64).to_be_bytes().to_vec(), -0.25),
        ];
        for (code, data, value) in cases {
            let idx = parse(&file(code, &[1], &data), "t").unwrap();
            assert_eq!(
                (idx.code(), idx.dims(), idx.values()),
                (code, &[1][..], &[value][..])
            );
        }
    }

    #[test]
    fn header_is_checked_before_allocating() {
        let huge = file(0x08, &[u32::MAX, u32::MAX], &[]);
        let err = parse(&huge, "t").unwrap_err();
        assert!(matches!(
            err,
            DataError::Truncated {
                expected: Some(18_446_744_065_119_617_037),
                present: 12,
                ..
            }
        ));
        let overflow = file(0x0E, &[u32::MAX; 3], &[]);
        let err = parse(&overflow, "t").unwrap_err().to_string();
        assert_eq!(
            err,
            "t: truncated: the header describes more bytes than a u64 counts, 16 are present"
        );
        let short = file(0x08, &[2, 3], &[0; 5]);
        let err = parse(&short, "t").unwrap_err().to_string();
        assert_eq!(
            err,
            "t: truncated: the header describes 18 bytes, 17 are present"
        );
        let long = file(0x08, &[2], &[0; 3]);
        let err = parse(&long, "t").unwrap_err().to_string();
        assert_eq!(
            err,
            "t: trailing bytes: the header describes 10 bytes, 11 are present"
        );
    }

    #[test]
    fn magic_and_type_are_checked() {
        let err = parse(b"P5\n28", "t").unwrap_err().to_string();
        assert_eq!(
            err,
            "t: not an IDX file (starts with 50 35 0a 32, expected 00 00 <type> <dims>)"
        );
        let err = parse(&file(0x0A, &[1], &[0]), "t").unwrap_err();
        assert!(matches!(err, DataError::UnsupportedType { code: 0x0A, .. }));
        assert!(matches!(
            parse(&[0, 0, 8], "t"),
            Err(DataError::Truncated {
                expected: Some(4),
                ..
            })
        ));
        assert!(matches!(parse(&[], "t"), Err(DataError::Empty { .. })));
    }

    #[test]
    fn labels_must_be_one_dimensional_u8() {
        let images = || parse(&file(0x08, &[2, 1], &[1, 2]), "im").unwrap();
        let wide = parse(&file(0x08, &[2, 1], &[1, 2]), "lb").unwrap();
        assert!(matches!(
            dataset(images(), wide, None),
            Err(DataError::NotLabels { .. })
        ));
        let three = parse(&file(0x08, &[3], &[1, 2, 3]), "lb").unwrap();
        let err = dataset(images(), three, None).unwrap_err().to_string();
        assert_eq!(err, "im has 2 images but lb has 3 labels");
        let labels = parse(&file(0x08, &[2], &[1, 9]), "lb").unwrap();
        let err = dataset(images(), labels, Some(5)).unwrap_err().to_string();
        assert_eq!(err, "lb: item 1: label 9 is out of range for 5 classes");
    }

    #[test]
    fn images_must_have_values() {
        let labels = || parse(&file(0x08, &[0], &[]), "lb").unwrap();
        let empty = parse(&file(0x08, &[0, 3], &[]), "im").unwrap();
        assert_eq!(dataset(empty, labels(), None).unwrap().len(), 0);
        for dims in [&[0, 0][..], &[0, u32::MAX, u32::MAX, u32::MAX]] {
            let images = parse(&file(0x08, dims, &[]), "im").unwrap();
            let err = dataset(images, labels(), None).unwrap_err().to_string();
            assert!(err.contains("do not make samples"), "{dims:?}: {err}");
        }
        let scalar = parse(&file(0x08, &[], &[5]), "im").unwrap();
        let err = dataset(scalar, labels(), None).unwrap_err().to_string();
        assert_eq!(err, "im: images need at least one dimension (the count)");
    }

    #[cfg(feature = "gzip")]
    #[test]
    fn gzip_is_detected() {
        use flate2::{write::GzEncoder, Compression};
        use std::io::Write;
        let plain = file(0x08, &[2, 2], &[1, 2, 3, 4]);
        let mut gz = GzEncoder::new(Vec::new(), Compression::default());
        gz.write_all(&plain).unwrap();
        let gz = gz.finish().unwrap();
        assert_eq!(parse(&gz, "t").unwrap(), parse(&plain, "t").unwrap());
        let err = parse(&gz[..gz.len() - 3], "t").unwrap_err();
        assert!(matches!(err, DataError::Gzip { .. }), "{err}");
    }

    #[cfg(feature = "gzip")]
    fn gzip(bytes: &[u8]) -> Vec<u8> {
        use flate2::{write::GzEncoder, Compression};
        use std::io::Write;
        let mut gz = GzEncoder::new(Vec::new(), Compression::default());
        gz.write_all(bytes).unwrap();
        gz.finish().unwrap()
    }

    #[cfg(feature = "gzip")]
    #[test]
    fn gzip_members_follow_each_other_and_nothing_else() {
        let plain = file(0x08, &[2, 2], &[1, 2, 3, 4]);
        let mut two = gzip(&plain[..7]);
        two.extend(gzip(&plain[7..]));
        assert_eq!(parse(&two, "t").unwrap(), parse(&plain, "t").unwrap());
        for tail in [&b"garbage!"[..], &[0; 4], &[0x1f]] {
            let mut gz = gzip(&plain);
            gz.extend_from_slice(tail);
            let err = parse(&gz, "t").unwrap_err().to_string();
            let says = std::format!(
                "t: gzip: {} bytes after the end of the gzip stream",
                tail.len()
            );
            assert_eq!(err, says);
        }
    }

    #[cfg(feature = "gzip")]
    #[test]
    fn gzip_is_checked_against_its_header_before_and_while_inflating() {
        let mut plain = file(0x08, &[2], &[7, 8]);
        plain.resize(plain.len() + 100_000, 0);
        let err = parse(&gzip(&plain), "t").unwrap_err().to_string();
        assert_eq!(
            err,
            "t: gzip: decompresses to more bytes than the header's 10"
        );
        let overflow = file(0x0E, &[u32::MAX; 3], &[1, 2, 3]);
        let err = parse(&gzip(&overflow), "t").unwrap_err().to_string();
        assert_eq!(
            err,
            "t: the header's dims [4294967295, 4294967295, 4294967295] describe more bytes \
             than a u64 counts"
        );
        let huge = gzip(&file(0x08, &[1 << 20, 40], &[0; 100]));
        let err = parse(&huge, "t").unwrap_err().to_string();
        let n = huge.len() as u64;
        assert_eq!(
            err,
            std::format!(
                "t: the header's dims [1048576, 40] describe 41943052 bytes, more than {n} gzip \
                 bytes can decompress to (at most {})",
                n * MAX_INFLATION
            )
        );
        let short = file(0x0B, &[3], &[0; 5]);
        let err = parse(&gzip(&short), "t").unwrap_err().to_string();
        assert_eq!(
            err,
            "t: truncated: the header describes 14 bytes, 13 are present"
        );
        for bad in [&[0, 0, 0x0A, 1][..], &[0, 1, 8, 1], &[0, 0, 8]] {
            let err = parse(&gzip(bad), "t").unwrap_err();
            assert_eq!(err.to_string(), parse(bad, "t").unwrap_err().to_string());
        }
    }

    #[cfg(not(feature = "gzip"))]
    #[test]
    fn gzip_needs_the_feature() {
        let gz = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3];
        assert_eq!(
            parse(&gz, "t.gz").unwrap_err().to_string(),
            "t.gz: gzip-compressed, but fusegraph was built without the `gzip` feature"
        );
    }
}
