//! Sums that add in `f32x8` lane order on every lane type, so that a pass that sums across
//! lanes gives the same bits on every [`Capability`](super::Capability).

use super::{pieces, Lane};
use crate::LANES;
use wide::f32x8;

/// Eight running sums in `f32x8` lane order: value `i` of a slice goes to sum `i % 8`, and a
/// slice whose length is not a multiple of eight ends with zeros in the sums past its last
/// value, as an `f32x8` pass over the slice with zero-padded tails adds them. The sums run on
/// `f32x8` whatever lanes the pass that calls them runs on (exact operations, the same bits on
/// every instruction set), so a pass that sums across lanes gives the same bits on every
/// lane type.
#[derive(Clone, Copy, Debug)]
pub struct EightSums(f32x8);

impl Default for EightSums {
    fn default() -> Self {
        EightSums::new()
    }
}

impl EightSums {
    /// Eight zero sums.
    pub const fn new() -> EightSums {
        EightSums(f32x8::ZERO)
    }

    /// Adds the values of `s`, eight at a time.
    #[inline(always)]
    pub fn add_slice(&mut self, s: &[f32]) {
        for (i, n) in pieces::<f32x8>(s.len()) {
            self.0 += f32x8::load_padded(&s[i..i + n]);
        }
    }

    /// Adds `a[i] * b[i]` for every `i`, eight at a time.
    ///
    /// # Panics
    /// If `b` is shorter than `a`.
    #[inline(always)]
    pub fn add_products(&mut self, a: &[f32], b: &[f32]) {
        for (i, n) in pieces::<f32x8>(a.len()) {
            self.0 += f32x8::load_padded(&a[i..i + n]) * f32x8::load_padded(&b[i..i + n]);
        }
    }

    /// The eight sums.
    #[inline(always)]
    pub fn lanes(self) -> [f32; LANES] {
        self.0.to_array()
    }

    /// The sum of the eight sums, as `wide`'s `f32x8::reduce_add` adds them.
    #[inline(always)]
    pub fn total(self) -> f32 {
        self.0.reduce_add()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::vec::Vec;

    /// Slices and products of every tail length sum as eight scalar sums in lane order, the
    /// zeros of the tail included (they turn a `-0.0` sum into `+0.0`).
    #[test]
    fn sums_add_in_f32x8_lane_order() {
        for len in [0usize, 1, 5, 8, 9, 15, 16, 17, 33, 100] {
            let values: Vec<f32> = (0..len)
                .map(|i| match i % 7 {
                    0 => -0.0,
                    k => (k as f32 - 3.5) * 1.3e-3 * (i as f32 + 1.0),
                })
                .collect();
            let other: Vec<f32> = values.iter().map(|v| v * 3.0 - 0.25).collect();
            let mut want = [[0.0f32; LANES]; 2];
            for i in 0..len.div_ceil(LANES) * LANES {
                let (v, o) = (values.get(i).copied(), other.get(i).copied());
                want[0][i % LANES] += v.unwrap_or(0.0);
                want[1][i % LANES] += v.unwrap_or(0.0) * o.unwrap_or(0.0);
            }
            let (mut sums, mut products) = (EightSums::new(), EightSums::new());
            sums.add_slice(&values);
            products.add_products(&values, &other);
            for (got, want) in [sums, products].iter().zip(want) {
                assert_eq!(
                    got.lanes().map(f32::to_bits),
                    want.map(f32::to_bits),
                    "{len}"
                );
                let total = f32x8::from(want).reduce_add();
                assert_eq!(got.total().to_bits(), total.to_bits(), "{len}");
            }
        }
    }
}
