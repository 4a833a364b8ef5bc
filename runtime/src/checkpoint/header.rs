//! A strict first reading of a safetensors header, before the `safetensors` crate's: every
//! tensor named once, its offsets inside the data section, and its bytes as many as its type
//! and shape need, each failure naming the tensor and what was expected. It also keeps the
//! crate from overflowing: safetensors 0.8 adds the last offset to the header's length
//! unchecked, which panics (debug) or wraps (release) for offsets near `usize::MAX`.
//!
//! `serde_json`, the parser `safetensors` uses, reads the JSON into a [`Json`] that keeps an
//! object's keys in order and a key given twice, which `serde_json::Value` would merge.
//! Nesting is bounded by `serde_json`'s recursion limit: more than 128 arrays or objects deep
//! is an error, not a stack overflow.

use super::CheckpointError;
use core::fmt;
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use std::collections::BTreeSet;
use std::format;
use std::string::String;
use std::vec::Vec;

/// Checks the JSON `header` of a file of `len` bytes whose data section holds `data_len`.
pub(crate) fn check(header: &str, data_len: usize, len: usize) -> Result<(), CheckpointError> {
    let corrupt = |reason: String| CheckpointError::Header { reason };
    let top = serde_json::from_str(header).map_err(|e| corrupt(format!("invalid JSON: {e}")))?;
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

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(json: D) -> Result<Self, D::Error> {
        json.deserialize_any(JsonVisitor)
    }
}

/// Builds a [`Json`] from what `serde_json` reads: negative integers come as `i64`, those
/// past `u64::MAX` as `f64`.
struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_u64<E>(self, n: u64) -> Result<Json, E> {
        Ok(Json::Size(n))
    }

    fn visit_i64<E>(self, _: i64) -> Result<Json, E> {
        Ok(Json::Other)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Json, E> {
        Ok(Json::Other)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Json, E> {
        Ok(Json::Other)
    }

    fn visit_unit<E>(self) -> Result<Json, E> {
        Ok(Json::Other)
    }

    fn visit_str<E>(self, s: &str) -> Result<Json, E> {
        Ok(Json::String(s.into()))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut entries = Vec::new();
        while let Some(entry) = map.next_entry()? {
            entries.push(entry);
        }
        Ok(Json::Object(entries))
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
        // serde_json refuses nesting deeper than 128, before the stack runs out.
        let deep = format!("{{\"a\":{}{}}}", "[".repeat(10_000), "]".repeat(10_000));
        assert!(reason(&deep).contains("recursion limit exceeded"));
    }
}
