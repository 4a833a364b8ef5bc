//! Deterministic reductions: a fixed summation tree, whatever the number of threads.

use super::kernel::PARALLEL_THRESHOLD;
use crate::accumulate::{widen, Accumulator, Wide};
use crate::kernels::parallel::join;
use crate::lane::EightSums;

/// Elements per leaf of the summation tree. The tree splits a slice at whole blocks, so its
/// shape (and the rounding of the result) depends only on the length.
pub const REDUCE_BLOCK: usize = 4096;

/// Inner blocks are summed in `f32x8` lane order ([`EightSums`]), then widened to [`Wide`].
const INNER: usize = 256;

/// The sum of squares of `x`, accumulated in a fixed order: the same bits serially and on any
/// number of threads (the tree is split across the pool above
/// [`PARALLEL_THRESHOLD`](super::PARALLEL_THRESHOLD)); in [`Wide`], `f64` or, with the feature
/// `f32-accumulators`, compensated `f32` ([`accumulate`](crate::accumulate)).
///
/// ```
/// let x = [3.0_f32, 4.0];
/// assert_eq!(fusegraph_runtime::optim::sum_squares(&x), 25.0);
/// ```
pub fn sum_squares(x: &[f32]) -> Wide {
    tree(x, x.len() >= PARALLEL_THRESHOLD)
}

fn tree(x: &[f32], par: bool) -> Wide {
    if x.len() <= REDUCE_BLOCK {
        return leaf(x);
    }
    let mid = x.len().div_ceil(REDUCE_BLOCK) / 2 * REDUCE_BLOCK;
    let (a, b) = x.split_at(mid);
    let (sa, sb) = join(par, || tree(a, par), || tree(b, par));
    sa + sb
}

/// The sum of squares of one leaf: each block of [`INNER`] values in `f32x8` lane order
/// ([`EightSums`]), the eight sums widened and added in lane order, the blocks' sums added in
/// order (each sum an [`Accumulator`]).
fn leaf(x: &[f32]) -> Wide {
    let mut total = Accumulator::ZERO;
    for block in x.chunks(INNER) {
        let mut acc = EightSums::new();
        acc.add_products(block, block);
        let mut lanes = Accumulator::ZERO;
        acc.lanes().iter().for_each(|&a| lanes.add(widen(a)));
        total.add(lanes.total());
    }
    total.total()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accumulate::to_f64;
    use crate::LANES;

    fn reference(x: &[f32]) -> f64 {
        x.iter().map(|&v| f64::from(v) * f64::from(v)).sum()
    }

    #[test]
    fn matches_f64_reference_over_lengths() {
        for n in (0..=2 * LANES + 1).chain([255, 256, 257, 4095, 4096, 4097, 10_000]) {
            let x: alloc_free::Vec = alloc_free::Vec::new(n);
            let got = to_f64(sum_squares(x.as_slice()));
            let want = reference(x.as_slice());
            assert!(
                (got - want).abs() <= 1e-6 * want.max(1.0),
                "n={n}: {got} vs {want}"
            );
        }
    }

    #[test]
    fn tree_shape_does_not_depend_on_parallelism() {
        let x = alloc_free::Vec::new(3 * REDUCE_BLOCK + 17);
        assert_eq!(
            tree(x.as_slice(), false).to_bits(),
            tree(x.as_slice(), true).to_bits()
        );
    }

    /// A leaf has the bits of eight `f32` sums in lane order, widened and added in lane order
    /// (in `f64`, the default; [`matches_f64_reference_over_lengths`] bounds the `f32` sums).
    #[test]
    #[cfg(not(feature = "f32-accumulators"))]
    fn leaves_give_the_bits_of_eight_lane_sums() {
        let x = alloc_free::Vec::new(INNER * 2 + 13);
        for n in [0, 1, 7, 8, 9, 16, 17, INNER - 1, INNER + 3, INNER * 2 + 13] {
            let x = &x.as_slice()[..n];
            let mut want = 0.0f64;
            for block in x.chunks(INNER) {
                let mut sums = [0.0f32; LANES];
                for (i, v) in block.iter().enumerate() {
                    sums[i % LANES] += v * v;
                }
                want += sums.iter().map(|&a| f64::from(a)).sum::<f64>();
            }
            assert_eq!(leaf(x).to_bits(), want.to_bits(), "{n} values");
        }
    }

    /// A fixed-size test vector, so the tests run without `alloc`.
    mod alloc_free {
        pub struct Vec {
            data: [f32; 16_384],
            n: usize,
        }
        impl Vec {
            pub fn new(n: usize) -> Self {
                let mut data = [0.0; 16_384];
                for (i, d) in data.iter_mut().enumerate().take(n) {
                    *d = ((i * 7919) % 1000) as f32 / 250.0 - 2.0;
                }
                Vec { data, n }
            }
            pub fn as_slice(&self) -> &[f32] {
                &self.data[..self.n]
            }
        }
    }
}
