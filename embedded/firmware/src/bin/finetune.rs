//! Fine-tuning on a Cortex-M4F: the backbone of `fusegraph_embedded_demo::finetune`, trained in
//! PyTorch on the digits 0 to 4, stays frozen in flash while a ten-class head learns all ten
//! digits from static memory on the images in flash; reports the loss bits and the held-out
//! images classified right before and after over semihosting (the same line as the host build
//! prints), then exits with status 0 if the held-out accuracy after reached its target.
#![no_std]
#![no_main]

use cortex_m_rt::entry;
use fusegraph_embedded_demo::finetune::Tuning;
use fusegraph_firmware::run;

/// The steps counted: the first ones, at the start of the first epoch.
const COUNTED_STEPS: usize = 2;

#[entry]
fn main() -> ! {
    run::<Tuning>(COUNTED_STEPS)
}
