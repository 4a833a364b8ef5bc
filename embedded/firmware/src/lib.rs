//! What the firmware binaries share: the mark that frames the counted steps in an instruction
//! trace, the stack's high-water mark, and the exit status over semihosting.
#![no_std]

use cortex_m_semihosting::{debug, hprintln};
use fusegraph_embedded_demo::Task;

/// The word `cortex-m-rt`'s feature `paint-stack` fills the stack with before `main`.
const STACK_PAINT: u32 = 0xcccc_cccc;

/// Marks the start and the end of the counted steps in an instruction trace, where it shows by
/// its name (`scripts/instructions.py`). Not inlined, so that it stays one call with its own
/// symbol.
#[no_mangle]
#[inline(never)]
pub extern "C" fn fusegraph_count_mark() {
    core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
}

/// The most stack used so far, in bytes: the stack grows down from `_stack_start` to
/// `_stack_end` (symbols of `cortex-m-rt`'s linker script), painted before `main`; the lowest
/// word that no longer holds the paint is the deepest the stack has been.
pub fn stack_peak_bytes() -> usize {
    extern "C" {
        static _stack_start: u32;
        static _stack_end: u32;
    }
    // Only the symbols' addresses are taken; the linker script defines both.
    let (top, bottom) = (
        core::ptr::addr_of!(_stack_start) as usize,
        core::ptr::addr_of!(_stack_end) as usize,
    );
    let mut lowest_used = top;
    for word in (bottom..top).step_by(4) {
        // SAFETY: `bottom..top` is the stack's memory, word-aligned (the linker script asserts
        // it); a volatile read of a word below the stack pointer reads what is there.
        if unsafe { core::ptr::read_volatile(word as *const u32) } != STACK_PAINT {
            lowest_used = word;
            break;
        }
    }
    top - lowest_used
}

/// Reports a panic's location over semihosting and exits with status 1. The message is not
/// formatted: that would link core's formatting of every value a panic message of the library
/// names, several kilobytes of flash, for a line a debugger shows anyway.
#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    if let Ok(mut out) = cortex_m_semihosting::hio::hstderr() {
        let _ = out.write_all(b"panicked at ");
        if let Some(at) = info.location() {
            let _ = out.write_all(at.file().as_bytes());
            let mut line = [0u8; 10];
            let mut n = at.line();
            let mut i = line.len();
            loop {
                i -= 1;
                line[i] = b'0' + (n % 10) as u8;
                n /= 10;
                if n == 0 {
                    break;
                }
            }
            let _ = out.write_all(b":");
            let _ = out.write_all(&line[i..]);
        }
        let _ = out.write_all(b"\n");
    }
    exit(false)
}

/// Runs `T` for its epochs, the first `counted` steps framed by [`fusegraph_count_mark`] (a few
/// steps, not an epoch: an instruction trace is slow to write), then prints over semihosting
/// its report (the line the host build prints too), the step's bytes and the stack's peak, and
/// exits with status 0 if the training reached its target.
pub fn run<T: Task>(mut counted: usize) -> ! {
    let Some(mut task) = T::take() else { exit(false) };
    hprintln!(
        "counted_steps {} flops_per_step {}",
        counted,
        T::FLOPS_PER_STEP
    );
    fusegraph_count_mark();
    for k in 0..counted {
        task.step(k);
    }
    fusegraph_count_mark();
    // The rest of the first epoch, then the others.
    for _ in 0..T::EPOCHS {
        for k in counted..T::STEPS_PER_EPOCH {
            task.step(k);
        }
        counted = 0;
    }
    let (report, reached) = task.measure();
    hprintln!("{}", report);
    hprintln!(
        "step_bytes {} stack_peak_bytes {}",
        T::STEP_BYTES,
        stack_peak_bytes()
    );
    exit(reached)
}

/// Ends the program under QEMU with status 0 if `ok`, 1 otherwise.
pub fn exit(ok: bool) -> ! {
    debug::exit(if ok {
        debug::EXIT_SUCCESS
    } else {
        debug::EXIT_FAILURE
    });
    #[allow(clippy::empty_loop)]
    loop {}
}
