//! The digits on a Cortex-M4F: trains the 64-32-16-10 MLP of
//! `fusegraph_embedded_demo::digits` from static memory on the images in flash, reports the
//! loss bits and the held-out images classified right over semihosting (the same line as the
//! host build prints), then exits with status 0 if the held-out accuracy reached its target.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use fusegraph_embedded_demo::digits::Training;
use fusegraph_firmware::run;

/// The steps counted: the first ones, at the start of the first epoch.
const COUNTED_STEPS: usize = 2;

#[entry]
fn main() -> ! {
    run::<Training>(COUNTED_STEPS)
}
