//! A memory budget checked at compile time: [`check_budget`], called by `#[model(max_bytes =
//! ..)]` in a constant, fails the build with the total and each part.

use super::model::Bytes;
use crate::message::Message;

/// The message of a budget that `bytes` exceed.
const fn over_budget(model: &str, max: usize, bytes: &Bytes) -> Message {
    let message = Message::new()
        .text("model `")
        .text(model)
        .text("` needs ")
        .number(bytes.total())
        .text(" bytes, over its budget of ")
        .number(max)
        .text(": parameters ")
        .number(bytes.params);
    let message = if bytes.frozen > 0 {
        message
            .text(" + frozen parameters ")
            .number(bytes.frozen)
            .text(" (no gradients, no slots)")
    } else {
        message
    };
    message
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
            frozen: 0,
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

    #[test]
    fn the_message_names_the_frozen_parameters() {
        let bytes = Bytes {
            params: 48,
            frozen: 1024,
            grads: 48,
            activations: 96,
            workspace: 0,
            slots: 48,
        };
        assert_eq!(
            over_budget("Head", 1000, &bytes).as_str(),
            "model `Head` needs 1264 bytes, over its budget of 1000: parameters 48 + frozen \
             parameters 1024 (no gradients, no slots) + gradients 48 + activations 96 + \
             workspace 0 + optimizer slots 48"
        );
    }
}
