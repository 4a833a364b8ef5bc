//! The embedded demo on a Cortex-M4F: trains the 8-16-4 MLP from static memory, reports the
//! loss bits over semihosting (the same line as the host build prints), then exits with status
//! 0 if it classifies every sample right.
//!
//! One epoch is framed by two calls of [`fusegraph_count_mark`], so that an instruction trace
//! (`scripts/instructions.py`) counts the instructions of its steps.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use cortex_m_semihosting::{debug, hprintln};
use fusegraph_embedded_demo::{Demo, Report, FLOPS_PER_STEP, SAMPLES};
use panic_semihosting as _;

/// Passes over the data set, as the host build runs them.
const EPOCHS: usize = 200;
/// The epoch whose steps are counted (not the first, whose steps may touch cold state).
const COUNTED_EPOCH: usize = 1;

/// Marks the start and the end of the counted steps in an instruction trace, where it shows by
/// its name. Not inlined, so that it stays one call with its own symbol.
#[no_mangle]
#[inline(never)]
pub extern "C" fn fusegraph_count_mark() {
    core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
}

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
    debug::exit(if ok {
        debug::EXIT_SUCCESS
    } else {
        debug::EXIT_FAILURE
    });
    loop {}
}
