//! Fine-tuning on a Cortex-M4F: the backbone of `fusegraph_embedded_demo::finetune`, trained in
//! PyTorch on the digits 0 to 4, stays frozen in flash while a ten-class head learns all ten
//! digits from static memory on the images in flash; reports the loss bits and the held-out
//! images classified right before and after over semihosting (the same line as the host build
//! prints), then exits with status 0 if the held-out accuracy after reached its target.
//!
//! The first steps are framed by two calls of [`fusegraph_count_mark`] for the instruction
//! count (a few steps, not an epoch: an instruction trace is slow to write).
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use cortex_m_semihosting::hprintln;
use fusegraph_embedded_demo::finetune::{Step, Tuning, EPOCHS, FLOPS_PER_STEP};
use fusegraph_firmware::{exit, fusegraph_count_mark, stack_peak_bytes};

/// The steps counted: the first ones, at the start of the first epoch.
const COUNTED_STEPS: usize = 2;

#[entry]
fn main() -> ! {
    let Some(mut tuning) = Tuning::new() else {
        exit(false)
    };
    hprintln!(
        "counted_steps {} flops_per_step {}",
        COUNTED_STEPS,
        FLOPS_PER_STEP
    );
    fusegraph_count_mark();
    for k in 0..COUNTED_STEPS {
        tuning.step(k);
    }
    fusegraph_count_mark();
    // The rest of the first epoch, then the others.
    for k in COUNTED_STEPS..Tuning::STEPS_PER_EPOCH {
        tuning.step(k);
    }
    for _ in 1..EPOCHS {
        tuning.epoch();
    }
    let report = tuning.report();
    hprintln!("{}", report);
    hprintln!(
        "step_bytes {} stack_peak_bytes {}",
        Step::BYTES.total(),
        stack_peak_bytes()
    );
    exit(report.reached_target())
}
