//! A small, seeded, reproducible random number generator for initializers and dropout.
//!
//! PCG-XSH-RR 64/32 (O'Neill 2014): 16 bytes of state, no allocation, the same stream on every
//! platform. Normal variates use the Box-Muller transform in `f64`.
//!
//! ```
//! use fusegraph_runtime::rng::{Rng, Seed};
//! let mut a = Rng::new(Seed(7));
//! let mut b = Rng::new(Seed(7));
//! assert_eq!(a.next_u32(), b.next_u32());
//! let u = a.uniform(-1.0, 1.0);
//! assert!((-1.0..1.0).contains(&u));
//! ```

use crate::math;

/// A seed: the same seed gives the same initial weights and the same dropout masks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Seed(pub u64);

/// The generator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rng {
    state: u64,
    inc: u64,
}

const MULTIPLIER: u64 = 6_364_136_223_846_793_005;

impl Rng {
    /// A generator for `seed` (stream 0).
    pub fn new(seed: Seed) -> Self {
        Self::with_stream(seed, 0)
    }

    /// A generator for `seed` on an independent `stream` (for example one per layer, or one
    /// per training step for dropout).
    pub fn with_stream(seed: Seed, stream: u64) -> Self {
        let mut r = Rng {
            state: 0,
            inc: (stream << 1) | 1,
        };
        r.next_u32();
        r.state = r.state.wrapping_add(seed.0);
        r.next_u32();
        r
    }

    /// A generator for item `index` of a draw keyed by `key` (one sample's dropout mask in
    /// one layer and step): both are mixed into the seed with SplitMix64, so that neighbouring
    /// indices give unrelated streams.
    pub fn keyed(key: u64, index: u64) -> Self {
        Self::with_stream(Seed(splitmix64(key ^ splitmix64(index))), index)
    }

    /// 64 random bits (two draws).
    pub fn next_u64(&mut self) -> u64 {
        (u64::from(self.next_u32()) << 32) | u64::from(self.next_u32())
    }

    /// 32 random bits.
    pub fn next_u32(&mut self) -> u32 {
        let old = self.state;
        self.state = old.wrapping_mul(MULTIPLIER).wrapping_add(self.inc);
        let xorshifted = (((old >> 18) ^ old) >> 27) as u32;
        let rot = (old >> 59) as u32;
        xorshifted.rotate_right(rot)
    }

    /// Uniform in `0..n` without modulo bias (Lemire's multiply-and-reject); `n` must not be 0.
    pub fn below(&mut self, n: u32) -> u32 {
        assert!(n > 0, "Rng::below(0)");
        let threshold = n.wrapping_neg() % n;
        loop {
            let m = u64::from(self.next_u32()) * u64::from(n);
            if (m as u32) >= threshold {
                return (m >> 32) as u32;
            }
        }
    }

    /// Shuffles `v` in place (Fisher-Yates), every permutation equally likely.
    ///
    /// ```
    /// use fusegraph_runtime::rng::{Rng, Seed};
    /// let mut v: Vec<usize> = (0..10).collect();
    /// Rng::new(Seed(3)).shuffle(&mut v);
    /// let mut sorted = v.clone();
    /// sorted.sort();
    /// assert_eq!(sorted, (0..10).collect::<Vec<_>>());
    /// ```
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        assert!(v.len() <= u32::MAX as usize, "too many items to shuffle");
        for i in (1..v.len()).rev() {
            let j = self.below(i as u32 + 1) as usize;
            v.swap(i, j);
        }
    }

    /// Uniform in `[0, 1)`, with 24 random bits.
    pub fn next_f32(&mut self) -> f32 {
        (self.next_u32() >> 8) as f32 * (1.0 / (1u32 << 24) as f32)
    }

    /// Uniform in `[0, 1)`, with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        let hi = u64::from(self.next_u32()) << 21;
        let lo = u64::from(self.next_u32() >> 11);
        (hi | lo) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        let v = lo + (hi - lo) * self.next_f32();
        if v < hi {
            v
        } else {
            lo
        }
    }

    /// Standard normal (Box-Muller; one of the pair is used, so the stream stays simple).
    pub fn normal(&mut self) -> f32 {
        let u1 = 1.0 - self.next_f64();
        let u2 = self.next_f64();
        (math::sqrt(-2.0 * math::ln(u1)) * math::cos(core::f64::consts::TAU * u2)) as f32
    }

    /// Normal with standard deviation `std`, redrawn outside two standard deviations (Keras'
    /// `truncated_normal`).
    pub fn truncated_normal(&mut self, std: f32) -> f32 {
        loop {
            let v = self.normal();
            if v.abs() <= 2.0 {
                return v * std;
            }
        }
    }
}

/// SplitMix64's finalizer (Steele, Lea and Flood 2014): a bijection of `u64` that mixes
/// every input bit into every output bit.
const fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_differ_and_repeat() {
        let mut x = Rng::with_stream(Seed(1), 0);
        let mut y = Rng::with_stream(Seed(1), 1);
        let mut z = Rng::with_stream(Seed(1), 0);
        let xs: [u32; 8] = core::array::from_fn(|_| x.next_u32());
        let ys: [u32; 8] = core::array::from_fn(|_| y.next_u32());
        let zs: [u32; 8] = core::array::from_fn(|_| z.next_u32());
        assert_eq!(xs, zs);
        assert_ne!(xs, ys);
    }

    #[test]
    fn below_is_in_range_and_uniform() {
        let mut r = Rng::new(Seed(9));
        let mut counts = [0u32; 6];
        for _ in 0..60_000 {
            counts[r.below(6) as usize] += 1;
        }
        for c in counts {
            assert!((9_500..10_500).contains(&c), "{counts:?}");
        }
        assert_eq!(r.below(1), 0);
    }

    #[test]
    fn moments_are_plausible() {
        let mut r = Rng::new(Seed(42));
        let n = 20_000;
        let (mut s, mut s2, mut u) = (0.0f64, 0.0f64, 0.0f64);
        for _ in 0..n {
            let v = f64::from(r.normal());
            s += v;
            s2 += v * v;
            u += f64::from(r.next_f32());
        }
        let mean = s / n as f64;
        let var = s2 / n as f64 - mean * mean;
        assert!(mean.abs() < 0.03, "{mean}");
        assert!((var - 1.0).abs() < 0.05, "{var}");
        assert!((u / n as f64 - 0.5).abs() < 0.01);
    }
}
