//! Runs the `#![no_std]` training of `fusegraph-embedded-demo` on the host and checks that it
//! reached its stated loss.

use fusegraph_embedded_demo::{train, Step, Tiny, SAMPLES};

/// The loss the demo must reach (a uniform guess over four classes has ln 4 = 1.386).
const TARGET_LOSS: f32 = 0.01;

fn main() {
    let bytes = Step::BYTES;
    println!(
        "8-16-4 MLP, SGD-momentum, batch 8, each layer updated during backward: {} bytes of \
         static memory (model {} = size_of {}; arena {} values)",
        bytes.total(),
        bytes.params,
        std::mem::size_of::<Tiny>(),
        Step::FLOATS
    );
    let report = train(200).expect("the statics are taken once");
    println!(
        "{} steps: loss {:.4} -> {:.4}, {}/{SAMPLES} right",
        report.steps, report.first_loss, report.last_loss, report.correct
    );
    println!("{report}");
    assert!(
        report.last_loss < TARGET_LOSS,
        "loss {} is not below {TARGET_LOSS}",
        report.last_loss
    );
    assert_eq!(report.correct, SAMPLES);
    assert!(train(1).is_none(), "the static memory is handed out once");
    println!("ok: below the target loss {TARGET_LOSS}");
}
