//! Runs the `#![no_std]` fine-tuning of `fusegraph-embedded-demo` on the host: prints the
//! memory of fine-tuning against full training of the same architecture, the same report line
//! as the firmware, and checks the held-out accuracy.

use fusegraph::train::Bytes;
use fusegraph_embedded_demo::digits;
use fusegraph_embedded_demo::digits::HELD_OUT;
use fusegraph_embedded_demo::finetune::{self, Step, TARGET_ACCURACY_PERCENT};
use fusegraph_embedded_demo::Task;

/// The parts of a step's memory, in bytes.
fn parts(bytes: Bytes) -> String {
    format!(
        "{} bytes (parameters {}, frozen in RAM {}, gradients {}, activations {}, workspace {}, \
         slots {})",
        bytes.total(),
        bytes.params,
        bytes.frozen,
        bytes.grads,
        bytes.activations,
        bytes.workspace,
        bytes.slots
    )
}

fn main() {
    println!(
        "finetune: 64-32-16 backbone trained in PyTorch on the digits 0-4, frozen in flash; a \
         ten-class head trained with SGD-momentum, batch {}, {} epochs over {} images, {} held out",
        digits::BATCH,
        finetune::EPOCHS,
        digits::TRAINING,
        HELD_OUT
    );
    println!("fine-tuning the head: {}", parts(Step::BYTES));
    println!("training every layer: {}", parts(digits::Step::BYTES));
    let report = finetune::Tuning::train().expect("the statics are taken once");
    let percent = |correct: usize| 100.0 * correct as f64 / HELD_OUT as f64;
    println!(
        "held-out accuracy over ten digits: {:.2}% as shipped, {:.2}% fine-tuned (at least \
         {TARGET_ACCURACY_PERCENT}%)",
        percent(report.correct_before),
        percent(report.correct)
    );
    println!("{report}");
    assert!(report.reached_target(), "below the target accuracy");
    assert!(
        finetune::Tuning::train().is_none(),
        "the static memory is handed out once"
    );
}
