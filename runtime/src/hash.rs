//! [`Fnv`]: the one non-cryptographic hash of the crate (64-bit FNV-1a), for signatures that
//! must be the same on every platform: a model's layout, a data set's contents.

/// 64-bit FNV-1a, fed with length-prefixed strings and little-endian integers so that no two
/// different sequences of calls feed the same bytes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fnv(u64);

impl Fnv {
    /// The hash of nothing.
    pub(crate) fn new() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }

    /// Feeds bytes.
    pub(crate) fn bytes(&mut self, b: &[u8]) {
        for &x in b {
            self.0 = (self.0 ^ u64::from(x)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    /// Feeds an integer.
    pub(crate) fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }

    /// Feeds a string, after its length.
    pub(crate) fn str(&mut self, s: &str) {
        self.u64(s.len() as u64);
        self.bytes(s.as_bytes());
    }

    /// The hash of what was fed.
    pub(crate) fn finish(self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_fnv_1a() {
        // The published FNV-1a 64 test vectors.
        let of = |s: &[u8]| {
            let mut h = Fnv::new();
            h.bytes(s);
            h.finish()
        };
        assert_eq!(of(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(of(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(of(b"foobar"), 0x8594_4171_f739_67e8);
    }
}
