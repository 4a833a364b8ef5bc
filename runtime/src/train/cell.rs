//! [`Static`]: a value in a `static` that one caller takes as `&'static mut`, once.
//!
//! The flag is claimed by an atomic swap where the target has compare-and-swap on bytes. Where
//! it has only atomic loads and stores (the Cortex-M0+, `thumbv6m-none-eabi`), the load and the
//! store are made one step by a critical section of the `critical-section` crate: the firmware
//! picks its implementation (on a single-core Cortex-M, `cortex-m`'s feature
//! `critical-section-single-core` masks the interrupts), so the core neither assumes one core
//! nor depends on an architecture crate, and targets with the swap do not link the crate.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, Ordering};

/// A value for a `static` (a model, the arena of a train step) that hands out one mutable
/// reference, the first time [`take`](Self::take) is called; later calls get `None`. No
/// allocator and no `unsafe` at the call site.
///
/// ```
/// use fusegraph_runtime::train::Static;
/// static ARENA: Static<[f32; 64]> = Static::new([0.0; 64]);
/// let arena: &'static mut [f32; 64] = ARENA.take().unwrap();
/// arena[0] = 1.0;
/// assert!(ARENA.take().is_none());
/// ```
pub struct Static<T> {
    taken: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the only access to `value` is the one `&mut` that `take` hands out once (guarded by
// `claim`), so sharing the cell between threads shares no access to `T`; `T: Send`
// because that reference may be used on another thread than the one that built the value.
unsafe impl<T: Send> Sync for Static<T> {}

impl<T> Static<T> {
    /// A cell holding `value`, usable in a `static`.
    pub const fn new(value: T) -> Self {
        Static {
            taken: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// The value, the first time; `None` afterwards.
    // A `&mut` from `&self` is what the cell is for: the flag makes it the only one.
    #[allow(clippy::mut_from_ref)]
    pub fn take(&'static self) -> Option<&'static mut T> {
        if claim(&self.taken) {
            return None;
        }
        // SAFETY: `claim` above returned `false` exactly once for this cell, so this is the
        // only reference to the value there will ever be; it lives as long as the static.
        Some(unsafe { &mut *self.value.get() })
    }
}

/// Sets `flag` and returns whether it was set already, as one atomic step: the first caller
/// gets `false`, every later one `true`.
#[cfg(target_has_atomic = "8")]
fn claim(flag: &AtomicBool) -> bool {
    flag.swap(true, Ordering::AcqRel)
}

#[cfg(not(target_has_atomic = "8"))]
use claim_in_critical_section as claim;

/// [`claim`] for targets without compare-and-swap: a load and a store that nothing (no
/// interrupt, no other core) runs between.
#[cfg(any(test, not(target_has_atomic = "8")))]
fn claim_in_critical_section(flag: &AtomicBool) -> bool {
    critical_section::with(|_| {
        let was_set = flag.load(Ordering::Acquire);
        flag.store(true, Ordering::Release);
        was_set
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both ways of claiming a flag give `false` to exactly one of many threads racing for it
    /// (on the host, the critical section is the `std` implementation of `critical-section`).
    #[test]
    fn one_of_many_threads_claims_the_flag() {
        let ways: [fn(&AtomicBool) -> bool; 2] = [claim, claim_in_critical_section];
        for claim in ways {
            for _ in 0..50 {
                let flag = AtomicBool::new(false);
                let winners = std::thread::scope(|s| {
                    let threads: std::vec::Vec<_> =
                        (0..8).map(|_| s.spawn(|| !claim(&flag))).collect();
                    threads
                        .into_iter()
                        .map(|t| t.join().unwrap())
                        .filter(|&won| won)
                        .count()
                });
                assert_eq!(winners, 1);
                assert!(flag.load(Ordering::Relaxed));
            }
        }
    }
}
