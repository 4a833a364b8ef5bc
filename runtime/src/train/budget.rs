//! A memory budget checked at compile time: [`check_budget`], called by `#[model(max_bytes =
//! ..)]` in a constant, fails the build with the total and each part.

use super::model::Bytes;

/// A message built in a constant, up to 512 bytes.
struct Message {
    buf: [u8; 512],
    len: usize,
}

impl Message {
    const fn new() -> Self {
        Message {
            buf: [0; 512],
            len: 0,
        }
    }

    const fn text(mut self, s: &str) -> Self {
        let b = s.as_bytes();
        let mut i = 0;
        while i < b.len() && self.len < self.buf.len() {
            self.buf[self.len] = b[i];
            self.len += 1;
            i += 1;
        }
        self
    }

    const fn number(mut self, mut n: usize) -> Self {
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

    const fn as_str(&self) -> &str {
        let (head, _) = self.buf.split_at(self.len);
        match core::str::from_utf8(head) {
            Ok(s) => s,
            Err(_) => "memory budget exceeded",
        }
    }
}

/// The message of a budget that `bytes` exceed.
const fn over_budget(model: &str, max: usize, bytes: &Bytes) -> Message {
    Message::new()
        .text("model `")
        .text(model)
        .text("` needs ")
        .number(bytes.total())
        .text(" bytes, over its budget of ")
        .number(max)
        .text(": parameters ")
        .number(bytes.params)
        .text(" + gradients ")
        .number(bytes.grads)
        .text(" + activations ")
        .number(bytes.activations)
        .text(" + workspace ")
        .number(bytes.workspace)
        .text(" + optimizer slots ")
        .number(bytes.slots)
}

/// Panics (a compile error when evaluated in a constant) if `bytes` exceed `max`, with a
/// message giving the total and each part.
pub const fn check_budget(model: &str, max: usize, bytes: Bytes) {
    if bytes.total() > max {
        let message = over_budget(model, max, &bytes);
        panic!("{}", message.as_str());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_gives_the_total_and_each_part() {
        let bytes = Bytes {
            params: 1024,
            grads: 0,
            activations: 96,
            workspace: 7,
            slots: 2048,
        };
        assert_eq!(
            over_budget("Tiny", 3000, &bytes).as_str(),
            "model `Tiny` needs 3175 bytes, over its budget of 3000: parameters 1024 + \
             gradients 0 + activations 96 + workspace 7 + optimizer slots 2048"
        );
        check_budget("Tiny", 3175, bytes);
    }
}
