//! Messages built in constants, for the compile-time checks of generated code (a memory
//! budget, the tensors `#[frozen]` names): a constant's panic becomes the compile error.

/// A message built in a constant, up to 512 bytes.
pub(crate) struct Message {
    buf: [u8; 512],
    len: usize,
}

impl Message {
    pub(crate) const fn new() -> Self {
        Message {
            buf: [0; 512],
            len: 0,
        }
    }

    pub(crate) const fn text(mut self, s: &str) -> Self {
        let b = s.as_bytes();
        let mut i = 0;
        while i < b.len() && self.len < self.buf.len() {
            self.buf[self.len] = b[i];
            self.len += 1;
            i += 1;
        }
        self
    }

    pub(crate) const fn number(mut self, mut n: usize) -> Self {
        let mut digits = [0u8; 20];
        let mut k = 0;
        loop {
            digits[k] = b'0' + (n % 10) as u8;
            k += 1;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        while k > 0 && self.len < self.buf.len() {
            k -= 1;
            self.buf[self.len] = digits[k];
            self.len += 1;
        }
        self
    }

    pub(crate) const fn as_str(&self) -> &str {
        let (head, _) = self.buf.split_at(self.len);
        match core::str::from_utf8(head) {
            Ok(s) => s,
            Err(_) => "memory budget exceeded",
        }
    }
}
