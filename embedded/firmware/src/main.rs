//! The embedded demo on a Cortex-M4F: trains the 8-16-4 MLP from static memory, reports the
//! loss bits over semihosting (the same line as the host build prints), then exits with status
//! 0 if it classifies every sample right.
//!
//! One epoch is framed by two calls of [`fusegraph_count_mark`], so that an instruction trace
//! (`scripts/instructions.py`) counts the instructions of its steps. It also prints the bytes
//! of its train step and its stack's high-water mark (`scripts/sizes.py` checks them).
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use cortex_m_semihosting::hprintln;
use fusegraph_embedded_demo::{Demo, Report, Step, FLOPS_PER_STEP, SAMPLES};
use fusegraph_firmware::{exit, fusegraph_count_mark, stack_peak_bytes};

/// Passes over the data set, as the host build runs them.
const EPOCHS: usize = 200;
/// The epoch whose steps are counted (not the first, whose steps may touch cold state).
const COUNTED_EPOCH: usize = 1;

fn train() -> Option<Report> {
    let mut demo = Demo::new()?;
    let first_loss = demo.loss();
    hprintln!(
        "counted_steps {} flops_per_step {}",
        Demo::STEPS_PER_EPOCH,
        FLOPS_PER_STEP
    );
    for epoch in 0..EPOCHS {
        let counted = epoch == COUNTED_EPOCH;
        if counted {
            fusegraph_count_mark();
        }
        demo.epoch();
        if counted {
            fusegraph_count_mark();
        }
    }
    Some(Report {
        first_loss,
        last_loss: demo.loss(),
        correct: demo.correct(),
        steps: demo.steps(),
    })
}

#[entry]
fn main() -> ! {
    let ok = match train() {
        Some(report) => {
            hprintln!("{}", report);
            report.correct == SAMPLES
        }
        None => false,
    };
    hprintln!(
        "step_bytes {} stack_peak_bytes {}",
        Step::BYTES.total(),
        stack_peak_bytes()
    );
    exit(ok)
}
