//! [`Static`]: a value in a `static` that one caller takes as `&'static mut`, once.

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
// an atomic swap), so sharing the cell between threads shares no access to `T`; `T: Send`
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
        if self.taken.swap(true, Ordering::AcqRel) {
            return None;
        }
        // SAFETY: the swap above returned `false` exactly once for this cell, so this is the
        // only reference to the value there will ever be; it lives as long as the static.
        Some(unsafe { &mut *self.value.get() })
    }
}
