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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lane::{pieces, OnLanes, Tested};
    extern crate std;
    use std::vec::Vec;

    /// The eight sums of a slice, each lane of type `L` given with garbage past its values.
    struct Walk<'a>(&'a [f32]);

    impl OnLanes for Walk<'_> {
        type Output = ([u32; LANES], u32);
        fn run<L: Lane>(self) -> ([u32; LANES], u32) {
            let mut sums = EightSums::new();
            for (i, n) in pieces::<L>(self.0.len()) {
                let v = L::load_padded(&self.0[i..i + n]);
                let garbage = L::splat(f32::NAN);
                let mask = L::load_padded(&[1.0; MAX_LANES][..n]).simd_gt(L::ZERO);
                sums.add(mask.select(v, garbage), n);
            }
            (sums.lanes().map(f32::to_bits), sums.total().to_bits())
        }
    }

    /// Every lane type sums as an `f32x8` pass over zero-padded lanes does, signed zeros
    /// included, whatever its lanes past the values hold.
    #[test]
    fn every_lane_type_adds_in_f32x8_order() {
        for len in [0, 1, 5, 8, 9, 15, 16, 17, 33, 100] {
            let values: Vec<f32> = (0..len)
                .map(|i| match i % 7 {
                    0 => -0.0,
                    k => (k as f32 - 3.5) * 1.3e-3 * (i as f32 + 1.0),
                })
                .collect();
            let mut want = f32x8::ZERO;
            for chunk in values.chunks(LANES) {
                let mut lane = [0.0; LANES];
                lane[..chunk.len()].copy_from_slice(chunk);
                want += f32x8::from(lane);
            }
            let want = (
                want.to_array().map(f32::to_bits),
                want.reduce_add().to_bits(),
            );
            for lanes in Tested::every() {
                assert_eq!(lanes.run(Walk(&values)), want, "{lanes:?}, {len} values");
            }
        }
    }
}
