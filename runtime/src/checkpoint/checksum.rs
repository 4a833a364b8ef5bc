//! Checksums: a CRC-32 of every tensor's bytes and one of the metadata, stored in the
//! metadata, so that a flipped bit anywhere in what a checkpoint restores is an error.
//!
//! The CRC-32 is the IEEE one of zlib, gzip and PNG (`zlib.crc32` in Python), printed as 8
//! lowercase hex digits. It detects every error of up to 32 consecutive bits, which includes
//! every single flipped bit and every damaged byte.

use super::metadata::Metadata;
use super::CheckpointError;
use crc32fast::Hasher;
use std::format;
use std::string::String;

/// Prefix of a tensor's checksum: `checksum.fc1.weight` holds the CRC-32 of `fc1.weight`.
pub(crate) const TENSOR: &str = "checksum.";
/// The checksum of every other metadata entry.
pub(crate) const KEY_METADATA: &str = "metadata_checksum";

/// The CRC-32 of `bytes` as 8 lowercase hex digits.
pub(crate) fn crc32(bytes: &[u8]) -> String {
    format!("{:08x}", crc32fast::hash(bytes))
}

/// The checksum of `meta` without its own checksum: the CRC-32 of each entry in key order,
/// the key and then the value, each as its length (a little-endian `u64`) and its UTF-8
/// bytes, so that no two metadata feed the same bytes.
pub(crate) fn of_metadata(meta: &Metadata) -> String {
    let mut h = Hasher::new();
    for (k, v) in meta.iter().filter(|(k, _)| *k != KEY_METADATA) {
        for s in [k, v] {
            h.update(&(s.len() as u64).to_le_bytes());
            h.update(s.as_bytes());
        }
    }
    format!("{:08x}", h.finalize())
}

/// `Ok` when the checksum that `meta` stores under `key` is `computed`; otherwise the error
/// that `damaged(stored, computed)` makes, or a missing entry.
pub(crate) fn verify(
    meta: &Metadata,
    key: &str,
    computed: String,
    damaged: impl FnOnce(String, String) -> CheckpointError,
) -> Result<(), CheckpointError> {
    match meta.raw(key) {
        Some(stored) if stored == computed => Ok(()),
        Some(stored) => Err(damaged(stored.into(), computed)),
        None => Err(CheckpointError::Metadata {
            key: key.into(),
            expected: "a CRC-32 of 8 hex digits".into(),
            found: None,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_is_zlib_s() {
        // zlib.crc32(b"123456789") == 0xcbf43926, the check value of CRC-32/ISO-HDLC.
        assert_eq!(crc32(b"123456789"), "cbf43926");
        assert_eq!(crc32(b""), "00000000");
    }

    #[test]
    fn the_metadata_checksum_leaves_itself_out_and_sees_every_entry() {
        let meta: Metadata = [("a", "1"), ("b", "2")].into_iter().collect();
        let sealed: Metadata = [("a", "1"), ("b", "2"), (KEY_METADATA, "x")]
            .into_iter()
            .collect();
        assert_eq!(of_metadata(&meta), of_metadata(&sealed));
        let moved: Metadata = [("a", "12"), ("b", "")].into_iter().collect();
        assert_ne!(of_metadata(&meta), of_metadata(&moved));
    }
}
