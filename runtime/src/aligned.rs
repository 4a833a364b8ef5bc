//! [`AlignedFloats`]: `f32` buffers on the heap that start on a cache line.
//!
//! Every buffer a model, a train step or an optimizer allocates is one of these, so that the
//! fused pass and the layers' lane loops read whole 64-byte lines (one AVX-512 register, two
//! AVX2 ones) instead of loads that straddle two lines, and so that a buffer's speed in cache
//! does not depend on where the allocator happened to put it.

use alloc::boxed::Box;
use alloc::vec;
use core::fmt;
use core::ops::{Deref, DerefMut};

/// Values per line.
const LINE: usize = 16;

/// One cache line of values: the unit an [`AlignedFloats`] is allocated in.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([f32; LINE]);

/// A fixed number of `f32` values on the heap, the first one on a 64-byte boundary; it
/// dereferences to `[f32]` like the `Box<[f32]>` it replaces.
#[derive(Clone)]
pub struct AlignedFloats {
    lines: Box<[Line]>,
    len: usize,
}

impl AlignedFloats {
    /// `len` zeros, allocated on the heap without passing through the stack.
    pub fn zeros(len: usize) -> Self {
        AlignedFloats {
            lines: vec![Line([0.0; LINE]); len.div_ceil(LINE)].into_boxed_slice(),
            len,
        }
    }
}

impl Deref for AlignedFloats {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        // SAFETY: `Line` is `repr(C)` around `[f32; 16]` and 64 bytes long (no padding), so
        // `lines` is `16 * lines.len() >= len` initialized, contiguous `f32`s, borrowed as
        // long as `self`.
        unsafe { core::slice::from_raw_parts(self.lines.as_ptr().cast::<f32>(), self.len) }
    }
}

impl DerefMut for AlignedFloats {
    fn deref_mut(&mut self) -> &mut [f32] {
        // SAFETY: as in `deref`, borrowed mutably as long as `self`.
        unsafe { core::slice::from_raw_parts_mut(self.lines.as_mut_ptr().cast::<f32>(), self.len) }
    }
}

impl PartialEq for AlignedFloats {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl fmt::Debug for AlignedFloats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_on_a_line_and_holds_exactly_its_values() {
        for len in [0, 1, 15, 16, 17, 1000] {
            let mut a = AlignedFloats::zeros(len);
            assert_eq!(a.len(), len);
            assert_eq!(a.as_ptr() as usize % 64, 0, "len {len}");
            assert!(a.iter().all(|&x| x.to_bits() == 0));
            for (i, x) in a.iter_mut().enumerate() {
                *x = i as f32;
            }
            let b = a.clone();
            assert_eq!(b.as_ptr() as usize % 64, 0);
            assert_eq!(
                &*b,
                (0..len).map(|i| i as f32).collect::<alloc::vec::Vec<_>>()
            );
        }
    }
}
