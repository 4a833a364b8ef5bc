//! The embedded demo on a Cortex-M4F: trains the 8-16-4 MLP from static memory and reports
//! the loss bits over semihosting, then exits with status 0 if it reached its target.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use cortex_m_semihosting::{debug, hprintln};
use panic_semihosting as _;

#[entry]
fn main() -> ! {
    let ok = match fusegraph_embedded_demo::train(200) {
        Some(report) => {
            hprintln!(
                "steps {} first_loss_bits {:#010x} last_loss_bits {:#010x} correct {}",
                report.steps,
                report.first_loss.to_bits(),
                report.last_loss.to_bits(),
                report.correct
            );
            report.correct == fusegraph_embedded_demo::SAMPLES
        }
        None => false,
    };
    debug::exit(if ok { debug::EXIT_SUCCESS } else { debug::EXIT_FAILURE });
    loop {}
}
