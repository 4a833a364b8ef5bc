//! Runs the `#![no_std]` digits training of `fusegraph-embedded-demo` on the host: prints the
//! same report line as the firmware and checks the held-out accuracy.

use fusegraph_embedded_demo::digits::{self, Step, HELD_OUT, TARGET_ACCURACY_PERCENT};
use fusegraph_embedded_demo::Task;

fn main() {
    let bytes = Step::BYTES;
    println!(
        "digits: 64-32-16-10 MLP, SGD-momentum, batch {}, {} epochs over {} images, {} held out: \
         {} bytes of static memory (parameters {}, gradients {}, activations {}, workspace {}, \
         slots {})",
        digits::BATCH,
        digits::EPOCHS,
        digits::TRAINING,
        HELD_OUT,
        bytes.total(),
        bytes.params,
        bytes.grads,
        bytes.activations,
        bytes.workspace,
        bytes.slots
    );
    let report = digits::Training::train().expect("the statics are taken once");
    println!(
        "held-out accuracy {:.2}% (at least {TARGET_ACCURACY_PERCENT}%)",
        100.0 * report.correct as f64 / HELD_OUT as f64
    );
    println!("{report}");
    assert!(report.reached_target(), "below the target accuracy");
    assert!(
        digits::Training::train().is_none(),
        "the static memory is handed out once"
    );
}
