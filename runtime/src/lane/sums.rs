//! Sums that add in `f32x8` lane order on every lane type, so that a pass that sums across
//! lanes gives the same bits on every [`Capability`](super::Capability).

use super::{Lane, MAX_LANES};
use crate::LANES;
use wide::f32x8;

/// Eight running sums in `f32x8` lane order: value `i` of a walk over a slice from its start
/// goes to sum `i % 8`, and a walk whose length is not a multiple of eight ends with zeros in
/// the sums past its last value, as an `f32x8` pass over the slice with zero-padded tails adds
/// them. Lanes of any type add their values in that order, so the sums have the same bits
/// whatever the lane type.
#[derive(Clone, Copy, Debug)]
pub struct EightSums {
    /// The sums, in lane order.
    sums: [f32; LANES],
    /// Values added so far.
    count: usize,
}

impl Default for EightSums {
    fn default() -> Self {
        EightSums::new()
    }
}

impl EightSums {
    /// Eight zero sums.
    pub const fn new() -> EightSums {
        EightSums {
            sums: [0.0; LANES],
            count: 0,
        }
    }

    /// Adds the first `len` lanes of `v`, the next `len` values of the walk (`len` is at most
    /// [`L::LANES`](Lane::LANES); a walk by [`pieces`](super::pieces) gives both).
    #[inline(always)]
    pub fn add<L: Lane>(&mut self, v: L, len: usize) {
        let mut lanes = [0.0; MAX_LANES];
        v.store(&mut lanes);
        if self.count.is_multiple_of(LANES) && L::LANES.is_multiple_of(LANES) {
            // The lanes past `len` hold whatever the caller's computation gave a padded lane.
            for x in lanes.iter_mut().skip(len) {
                *x = 0.0;
            }
            for chunk in lanes[..len.div_ceil(LANES) * LANES].chunks_exact(LANES) {
                for (s, &x) in self.sums.iter_mut().zip(chunk) {
                    *s += x;
                }
            }
            self.count += len.div_ceil(LANES) * LANES;
            return;
        }
        for &x in &lanes[..len] {
            self.sums[self.count % LANES] += x;
            self.count += 1;
        }
    }

    /// The sums, after the zeros of a tail that is not a multiple of eight.
    #[inline(always)]
    pub fn lanes(mut self) -> [f32; LANES] {
        while !self.count.is_multiple_of(LANES) {
            self.sums[self.count % LANES] += 0.0;
            self.count += 1;
        }
        self.sums
    }

    /// The sum of the eight sums, as `wide`'s `f32x8::reduce_add` adds them.
    #[inline(always)]
    pub fn total(self) -> f32 {
        f32x8::from(self.lanes()).reduce_add()
    }
}
