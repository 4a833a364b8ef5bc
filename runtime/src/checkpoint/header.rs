//! A strict first reading of a safetensors header, before the `safetensors` crate's: every
//! tensor named once, its offsets inside the data section, and its bytes as many as its type
//! and shape need, each failure naming the tensor and what was expected. It also keeps the
//! crate from overflowing: safetensors 0.8 adds the last offset to the header's length
//! unchecked, which panics (debug) or wraps (release) for offsets near `usize::MAX`.

use super::CheckpointError;
use std::collections::BTreeSet;
use std::format;
use std::string::String;
use std::vec::Vec;

/// Nesting deeper than a safetensors header needs (object, tensor, shape) is refused.
const MAX_DEPTH: usize = 16;

/// Checks the JSON `header` of a file of `len` bytes whose data section holds `data_len`.
pub(crate) fn check(header: &str, data_len: usize, len: usize) -> Result<(), CheckpointError> {
    let corrupt = |reason: String| CheckpointError::Header { reason };
    let mut parser = Parser {
        bytes: header.as_bytes(),
        at: 0,
    };
    let top = parser.document().map_err(corrupt)?;
    let Json::Object(entries) = top else {
        return Err(corrupt("the header is not a JSON object".into()));
    };
    let mut names = BTreeSet::new();
    for (name, value) in &entries {
        if !names.insert(name.as_str()) {
            return Err(corrupt(format!("the header names `{name}` twice")));
        }
        match value {
            Json::Object(fields) if name == "__metadata__" => {
                let mut keys = BTreeSet::new();
                if let Some((key, _)) = fields.iter().find(|(k, _)| !keys.insert(k.as_str())) {
                    return Err(corrupt(format!("the metadata has the key `{key}` twice")));
                }
            }
            Json::Object(fields) => tensor(name, fields, data_len, len)?,
            _ if name == "__metadata__" => {}
            _ => {
                return Err(corrupt(format!(
                    "tensor `{name}` is not described by an object"
                )))
            }
        }
    }
    Ok(())
}

/// Checks the description of tensor `name`.
fn tensor(
    name: &str,
    fields: &[(String, Json)],
    data_len: usize,
    len: usize,
) -> Result<(), CheckpointError> {
    let corrupt = |what: String| CheckpointError::Header {
        reason: format!("tensor `{name}`: {what}"),
    };
    let field = |key: &str| fields.iter().find(|(k, _)| k == key).map(|(_, v)| v);
    let Some(Json::String(dtype)) = field("dtype") else {
        return Err(corrupt("no `dtype` string".into()));
    };
    let Some(shape) = field("shape").and_then(Json::sizes) else {
        return Err(corrupt("no `shape` list of sizes".into()));
    };
    let Some(&[start, end]) = field("data_offsets").and_then(Json::sizes).as_deref() else {
        return Err(corrupt("no `data_offsets` pair of byte offsets".into()));
    };
    if start > end {
        return Err(corrupt(format!(
            "data_offsets [{start}, {end}] end before they start"
        )));
    }
    if end > data_len as u64 {
        return Err(CheckpointError::Truncated { len });
    }
    let Some(bits) = bits(dtype) else {
        // A type this crate does not know: `safetensors` judges it.
        return Ok(());
    };
    let needed = shape
        .iter()
        .try_fold(bits, |n, &d| n.checked_mul(d))
        .map(|bits| bits.div_ceil(8));
    match needed {
        Some(bytes) if bytes == end - start => Ok(()),
        Some(bytes) => Err(corrupt(format!(
            "shape {shape:?} of {dtype} needs {bytes} bytes, data_offsets [{start}, {end}] hold {}",
            end - start
        ))),
        None => Err(corrupt(format!(
            "shape {shape:?} of {dtype} has more bytes than a u64 counts"
        ))),
    }
}

/// Bits per value of a safetensors element type, for the types whose size is fixed.
fn bits(dtype: &str) -> Option<u64> {
    Some(match dtype {
        "F4" => 4,
        "F6_E2M3" | "F6_E3M2" => 6,
        "BOOL" | "U8" | "I8" | "F8_E5M2" | "F8_E4M3" | "F8_E8M0" => 8,
        "U16" | "I16" | "F16" | "BF16" => 16,
        "U32" | "I32" | "F32" => 32,
        "U64" | "I64" | "F64" | "C64" => 64,
        _ => return None,
    })
}

/// A JSON value, as much of it as the checks need.
enum Json {
    /// A non-negative integer that fits a `u64`.
    Size(u64),
    /// Any other number, `true`, `false` or `null`.
    Other,
    /// A string, unescaped.
    String(String),
    /// An array.
    Array(Vec<Json>),
    /// An object's entries, in order, duplicates kept.
    Object(Vec<(String, Json)>),
}

impl Json {
    /// The values of an array of sizes.
    fn sizes(&self) -> Option<Vec<u64>> {
        let Json::Array(items) = self else {
            return None;
        };
        items
            .iter()
            .map(|v| match v {
                Json::Size(n) => Some(*n),
                _ => None,
            })
            .collect()
    }
}

/// A recursive-descent reader of one JSON document (RFC 8259), nested at most [`MAX_DEPTH`].
struct Parser<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    /// The whole input as one value, with only whitespace after it.
    fn document(&mut self) -> Result<Json, String> {
        let value = self.value(0)?;
        self.space();
        match self.at == self.bytes.len() {
            true => Ok(value),
            false => Err(self.error("the end of the header")),
        }
    }

    fn error(&self, expected: &str) -> String {
        format!("invalid JSON at byte {}: expected {expected}", self.at)
    }

    fn space(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    /// Consumes `b` (after whitespace), or fails naming it.
    fn expect(&mut self, b: u8) -> Result<(), String> {
        self.space();
        if self.peek() == Some(b) {
            self.at += 1;
            Ok(())
        } else {
            Err(self.error(&format!("`{}`", char::from(b))))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Json, String> {
        if depth > MAX_DEPTH {
            return Err(self.error("less nesting"));
        }
        self.space();
        match self.peek() {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => self.string().map(Json::String),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => {
                for word in ["true", "false", "null"] {
                    if self.bytes[self.at..].starts_with(word.as_bytes()) {
                        self.at += word.len();
                        return Ok(Json::Other);
                    }
                }
                Err(self.error("a value"))
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<Json, String> {
        self.at += 1;
        let mut entries = Vec::new();
        self.space();
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Ok(Json::Object(entries));
        }
        loop {
            self.space();
            if self.peek() != Some(b'"') {
                return Err(self.error("a key"));
            }
            let key = self.string()?;
            self.expect(b':')?;
            entries.push((key, self.value(depth + 1)?));
            self.space();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b'}') => {
                    self.at += 1;
                    return Ok(Json::Object(entries));
                }
                _ => return Err(self.error("`,` or `}`")),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Json, String> {
        self.at += 1;
        let mut items = Vec::new();
        self.space();
        if self.peek() == Some(b']') {
            self.at += 1;
            return Ok(Json::Array(items));
        }
        loop {
            items.push(self.value(depth + 1)?);
            self.space();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b']') => {
                    self.at += 1;
                    return Ok(Json::Array(items));
                }
                _ => return Err(self.error("`,` or `]`")),
            }
        }
    }

    /// A string from its opening quote, unescaped.
    fn string(&mut self) -> Result<String, String> {
        self.at += 1;
        let mut out = String::new();
        loop {
            let start = self.at;
            while let Some(b'\x20'..) = self.peek().filter(|&b| b != b'"' && b != b'\\') {
                self.at += 1;
            }
            // The input is a `str` and the run stops at ASCII bytes: a whole UTF-8 sequence.
            out.push_str(core::str::from_utf8(&self.bytes[start..self.at]).unwrap_or_default());
            match self.peek() {
                Some(b'"') => {
                    self.at += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.at += 1;
                    out.push(self.escape()?);
                }
                _ => return Err(self.error("a closing `\"`")),
            }
        }
    }

    /// The character of an escape, after its backslash.
    fn escape(&mut self) -> Result<char, String> {
        let b = self.peek().ok_or_else(|| self.error("an escape"))?;
        self.at += 1;
        Ok(match b {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let high = self.hex4()?;
                if (0xD800..0xDC00).contains(&high) && self.bytes[self.at..].starts_with(b"\\u") {
                    self.at += 2;
                    let low = self.hex4()?;
                    if !(0xDC00..0xE000).contains(&low) {
                        return Err(self.error("a low surrogate"));
                    }
                    let code = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
                    char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER)
                } else {
                    char::from_u32(high).unwrap_or(char::REPLACEMENT_CHARACTER)
                }
            }
            _ => {
                self.at -= 1;
                return Err(self.error("an escape"));
            }
        })
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let digits = self
            .bytes
            .get(self.at..self.at + 4)
            .and_then(|h| core::str::from_utf8(h).ok())
            .and_then(|h| {
                u32::from_str_radix(h, 16)
                    .ok()
                    .filter(|_| !h.starts_with('+'))
            })
            .ok_or_else(|| self.error("four hex digits"))?;
        self.at += 4;
        Ok(digits)
    }

    /// A number: a [`Json::Size`] when it is a non-negative integer that fits a `u64`.
    fn number(&mut self) -> Result<Json, String> {
        let start = self.at;
        let negative = self.peek() == Some(b'-');
        self.at += usize::from(negative);
        let int = self.digits();
        let leading_zero = int > 1 && self.bytes[self.at - int] == b'0';
        if int == 0 || leading_zero {
            return Err(self.error("a number"));
        }
        let mut integer = !negative;
        if self.peek() == Some(b'.') {
            self.at += 1;
            integer = false;
            if self.digits() == 0 {
                return Err(self.error("a digit"));
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.at += 1;
            integer = false;
            if let Some(b'+' | b'-') = self.peek() {
                self.at += 1;
            }
            if self.digits() == 0 {
                return Err(self.error("a digit"));
            }
        }
        let text = core::str::from_utf8(&self.bytes[start..self.at]).unwrap_or_default();
        Ok(match text.parse::<u64>() {
            Ok(n) if integer => Json::Size(n),
            _ => Json::Other,
        })
    }

    /// Consumes ASCII digits; returns how many.
    fn digits(&mut self) -> usize {
        let start = self.at;
        while let Some(b'0'..=b'9') = self.peek() {
            self.at += 1;
        }
        self.at - start
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;

    fn reason(header: &str) -> String {
        check(header, 16, 100).unwrap_err().to_string()
    }

    #[test]
    fn well_formed_headers_pass() {
        let header = r#"{"__metadata__":{"k":"v\"\u00e9\ud83d\ude00"},
            "a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},
            "b":{"dtype":"I64","shape":[],"data_offsets":[8,16]},
            "c":{"dtype":"F32","shape":[0,1000],"data_offsets":[16,16]}}   "#;
        check(header, 16, 100).unwrap();
    }

    #[test]
    fn each_fault_names_its_tensor() {
        let t = |body: &str| format!(r#"{{"w":{body}}}"#);
        let cases = [
            (
                t(r#"{"dtype":"F64","shape":[2,3],"data_offsets":[0,16]}"#),
                "tensor `w`: shape [2, 3] of F64 needs 48 bytes, data_offsets [0, 16] hold 16",
            ),
            (
                t(r#"{"dtype":"F32","shape":[1099511627776,1099511627776],"data_offsets":[0,16]}"#),
                "tensor `w`: shape [1099511627776, 1099511627776] of F32 has more bytes than a u64 counts",
            ),
            (
                t(r#"{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}"#),
                "tensor `w`: no `shape` list of sizes",
            ),
            (
                t(r#"{"dtype":"F32","shape":[1],"data_offsets":[4,0]}"#),
                "tensor `w`: data_offsets [4, 0] end before they start",
            ),
            (
                t(r#"{"shape":[1],"data_offsets":[0,4]}"#),
                "tensor `w`: no `dtype` string",
            ),
            (t("3"), "tensor `w` is not described by an object"),
        ];
        for (header, says) in cases {
            assert_eq!(
                reason(&header),
                format!("checkpoint header is corrupt: {says}")
            );
        }
    }

    #[test]
    fn names_and_keys_are_unique_even_when_escaped() {
        let twice = r#"{"w":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},"\u0077":{}}"#;
        assert!(reason(twice).ends_with("the header names `w` twice"));
        let meta = r#"{"__metadata__":{"k":"1","k":"2"}}"#;
        assert!(reason(meta).ends_with("the metadata has the key `k` twice"));
    }

    #[test]
    fn offsets_past_the_data_are_truncation() {
        let past = format!(
            r#"{{"w":{{"dtype":"U8","shape":[{0}],"data_offsets":[0,{0}]}}}}"#,
            u64::MAX
        );
        assert!(matches!(
            check(&past, 16, 100),
            Err(CheckpointError::Truncated { len: 100 })
        ));
    }

    #[test]
    fn malformed_json_is_refused_without_panicking() {
        for bad in [
            "",
            "{",
            "[1]",
            "{\"a\" 1}",
            "{\"a\":1,}",
            "{\"a\":01}",
            "{\"a\":-}",
            "{\"a\":1.}",
            "{\"a\":\"\\x\"}",
            "{\"a\":\"\\u12\"}",
            "{\"a\":\"\\ud800\\u0041\"}",
            "{} x",
            "{\"a\":\"\n\"}",
            "{\"a\":tru}",
        ] {
            assert!(check(bad, 0, 0).is_err(), "{bad:?}");
        }
        let deep = format!("{{\"a\":{}{}}}", "[".repeat(10_000), "]".repeat(10_000));
        assert!(reason(&deep).contains("less nesting"));
    }
}
