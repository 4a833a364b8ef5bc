//! [`Shards`]: how a global batch is cut, and the one reduction of shard gradients, in shard
//! order, that makes a data-parallel step the same bits on any number of processes.

use crate::lane::{self, Lane, OnLanes};
use core::ops::Range;

/// A global batch cut into `count` shards of `per_shard` samples, in global sample order:
/// shard `s` holds samples `s * per_shard ..`, the last ones fewer or none when the global
/// batch is the data set's last, partial one. The count is part of the computation (it
/// decides which samples' gradients are summed together), not of the job: ranks must divide
/// it, and any number of them that does gives the same bits.
///
/// ```
/// use fusegraph_runtime::distributed::Shards;
/// let shards = Shards::new(4, 8);
/// assert_eq!(shards.global_batch(), 32);
/// assert_eq!(shards.samples(1, 20), 8..16);
/// assert_eq!(shards.samples(2, 20), 16..20);
/// assert_eq!(shards.samples(3, 20), 20..20);
/// assert_eq!(shards.of_rank(1, 2), 2..4);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shards {
    count: usize,
    per_shard: usize,
}

impl Shards {
    /// `count` shards of `per_shard` samples each.
    ///
    /// # Panics
    /// If either is 0.
    pub const fn new(count: usize, per_shard: usize) -> Self {
        assert!(
            count > 0 && per_shard > 0,
            "shards need at least one shard of at least one sample"
        );
        Shards { count, per_shard }
    }

    /// The number of shards of a global batch.
    pub const fn count(&self) -> usize {
        self.count
    }

    /// The samples of one shard when it is whole.
    pub const fn per_shard(&self) -> usize {
        self.per_shard
    }

    /// The samples of a whole global batch.
    pub const fn global_batch(&self) -> usize {
        self.count * self.per_shard
    }

    /// The samples of shard `s` in a global batch of `n` samples (`n` at most
    /// [`global_batch`](Self::global_batch)), as indices into that batch.
    pub fn samples(&self, s: usize, n: usize) -> Range<usize> {
        let start = (s * self.per_shard).min(n);
        start..((s + 1) * self.per_shard).min(n)
    }

    /// The shards that rank `rank` of `ranks` computes: an equal run of consecutive ones.
    ///
    /// # Panics
    /// If `ranks` does not divide the shard count.
    pub fn of_rank(&self, rank: usize, ranks: usize) -> Range<usize> {
        assert!(
            ranks > 0 && self.count.is_multiple_of(ranks),
            "{ranks} processes do not divide {} shards",
            self.count
        );
        let each = self.count / ranks;
        rank * each..(rank + 1) * each
    }
}

/// Adds one shard's mean gradient into the global one, weighted by its share of the global
/// batch: `sum = weight * g` for the first shard, `sum += weight * g` (a product, then a sum:
/// no fused multiply-add) for the next ones. Called in shard order on every process, it gives
/// the same bits wherever the shards were computed (on the lanes [`lane::dispatch`] picks,
/// which give the same bits on every CPU); with one shard of weight 1 the sum is the shard's
/// gradient itself.
pub fn add_shard(sum: &mut [f32], g: &[f32], weight: f32, first: bool) {
    assert_eq!(
        sum.len(),
        g.len(),
        "a shard's gradient is as long as the sum"
    );
    if !sum.is_empty() {
        lane::dispatch_for(
            sum.len(),
            AddShard {
                sum,
                g,
                weight,
                first,
            },
        );
    }
}

/// [`add_shard`], on any lane type.
struct AddShard<'a> {
    sum: &'a mut [f32],
    g: &'a [f32],
    weight: f32,
    first: bool,
}

impl OnLanes for AddShard<'_> {
    type Output = ();
    #[inline(always)]
    fn run<L: Lane>(self) {
        let weight = L::splat(self.weight);
        for (i, n) in lane::pieces::<L>(self.sum.len()) {
            let mut v = L::load_padded(&self.g[i..i + n]) * weight;
            if !self.first {
                v = L::load_padded(&self.sum[i..i + n]) + v;
            }
            v.store_partial(&mut self.sum[i..i + n]);
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    #[test]
    fn shards_cover_a_partial_batch_in_order() {
        let s = Shards::new(3, 4);
        let cut: Vec<_> = (0..3).map(|i| s.samples(i, 9)).collect();
        assert_eq!(cut, [0..4, 4..8, 8..9]);
        let cut: Vec<_> = (0..3).map(|i| s.samples(i, 3)).collect();
        assert_eq!(cut, [0..3, 3..3, 3..3]);
        assert_eq!(s.of_rank(2, 3), 2..3);
        assert_eq!(s.of_rank(0, 1), 0..3);
    }

    #[test]
    #[should_panic(expected = "2 processes do not divide 3 shards")]
    fn ranks_must_divide_the_shards() {
        let _ = Shards::new(3, 4).of_rank(0, 2);
    }

    #[test]
    fn the_sum_is_the_scalar_sum_in_shard_order() {
        let g: Vec<Vec<f32>> = (0..3)
            .map(|s| {
                (0..13)
                    .map(|i| ((i * 7 + s * 5) % 11) as f32 * 0.37 - 1.3)
                    .collect()
            })
            .collect();
        let w = [0.25f32, 0.5, 0.25];
        let mut sum = std::vec![f32::NAN; 13];
        for (s, gs) in g.iter().enumerate() {
            add_shard(&mut sum, gs, w[s], s == 0);
        }
        for i in 0..13 {
            let want = ((w[0] * g[0][i]) + w[1] * g[1][i]) + w[2] * g[2][i];
            assert_eq!(sum[i].to_bits(), want.to_bits(), "{i}");
        }
        let mut one = std::vec![0.0; 13];
        let negative: Vec<f32> = g[0].iter().map(|v| -v * 0.0).collect();
        add_shard(&mut one, &negative, 1.0, true);
        assert!(one
            .iter()
            .zip(&negative)
            .all(|(a, b)| a.to_bits() == b.to_bits()));
    }
}
