//! [`Tree`]: the order in which a data-parallel step sums its shards' gradients, the same for
//! every number of processes it allows, and [`TreeFold`], that sum computed leaf by leaf.
//!
//! The shards of a global batch are the leaves of a tree fixed by their count `S` alone:
//! with `S`'s prime factors in increasing order `f1 <= f2 <= ... <= fn`, the root has `f1`
//! children, each of those `f2`, and so on down to the shards. A node's value is its
//! children's values added from the first to the last (`((c1 + c2) + c3) + ...`), a leaf's
//! the shard's gradient times its weight. A job of `P = f1 * ... * fd` processes (1, and
//! every such product: for `S` a power of two, every power of two up to `S`) gives each
//! process the `S / P` shards of one node at depth `d`: the process sums that subtree, and
//! the processes sum the `P` subtrees in the tree's top `d` levels, each over its slice of the
//! gradient. The operations, and so the bits, are those of one process summing every shard.

use super::shards::add_shard;
use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;
use core::ops::Range;

/// The tree of a shard count: its prime factors, in increasing order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Tree {
    factors: Vec<usize>,
}

impl Tree {
    /// The tree of `shards` leaves.
    pub(crate) fn new(shards: usize) -> Self {
        let (mut factors, mut rest, mut p) = (Vec::new(), shards.max(1), 2);
        while rest > 1 {
            while rest.is_multiple_of(p) {
                factors.push(p);
                rest /= p;
            }
            p += 1;
        }
        Tree { factors }
    }

    /// The number of processes whose shards are whole subtrees: 1, then the products of the
    /// first factors, in increasing order.
    pub(crate) fn process_counts(&self) -> impl Iterator<Item = usize> + '_ {
        let products = self.factors.iter().scan(1, |p, &f| {
            *p *= f;
            Some(*p)
        });
        core::iter::once(1).chain(products)
    }

    /// The depth at which `processes` processes each take one node, if they can.
    fn depth(&self, processes: usize) -> Option<usize> {
        self.process_counts().position(|p| p == processes)
    }

    /// The radices of a process's own subtree and of the processes' top levels, each from the
    /// bottom up, for a job of `processes` (`None` when that count cannot split the tree).
    pub(crate) fn split(&self, processes: usize) -> Option<(Vec<usize>, Vec<usize>)> {
        let d = self.depth(processes)?;
        let own = self.factors[d..].iter().rev().copied().collect();
        let top = self.factors[..d].iter().rev().copied().collect();
        Some((own, top))
    }
}

/// One leaf of a [`TreeFold`].
#[derive(Clone, Copy, Debug)]
pub(crate) enum Leaf<'a> {
    /// A shard's gradient and its weight: the leaf is their product.
    Weighted(&'a [f32], f32),
    /// A shard without samples (past the end of a partial global batch): it adds nothing.
    Empty,
    /// A value as it is (a subtree's sum).
    Value(&'a [f32]),
}

/// A sum over a tree, computed as its leaves arrive in order: each level keeps the running
/// sum of its current node, which goes up one level when the node's last child has come.
/// Buffers are allocated once, in [`new`](Self::new).
pub(crate) struct TreeFold {
    /// The children of a node, per level from the bottom up.
    radices: Vec<usize>,
    /// The running sum of each level's current node.
    sums: Vec<Box<[f32]>>,
    /// The children each level's current node has had.
    counts: Vec<usize>,
}

impl TreeFold {
    /// A fold over a tree of `radices` (from the bottom up; none for a tree of one leaf) whose
    /// values are `len` long.
    pub(crate) fn new(radices: &[usize], len: usize) -> Self {
        let radices = if radices.is_empty() {
            vec![1]
        } else {
            radices.to_vec()
        };
        TreeFold {
            sums: radices
                .iter()
                .map(|_| vec![0.0; len].into_boxed_slice())
                .collect(),
            counts: vec![0; radices.len()],
            radices,
        }
    }

    /// Adds the next leaf; returns the root's value when this was the last leaf. A leaf
    /// shorter than the fold's values sums into their first values (the rest is left as it
    /// is); every leaf of one tree must have the same length.
    pub(crate) fn push(&mut self, leaf: Leaf<'_>) -> Option<&[f32]> {
        let n = leaf.len().unwrap_or(self.sums[0].len());
        let first = self.counts[0] == 0;
        add_leaf(&mut self.sums[0][..n], leaf, first);
        let mut level = 0;
        loop {
            self.counts[level] += 1;
            if self.counts[level] < self.radices[level] {
                return None;
            }
            self.counts[level] = 0;
            if level + 1 == self.radices.len() {
                return Some(&self.sums[level][..n]);
            }
            // The node is whole: it is the next child of the level above.
            let (below, above) = self.sums.split_at_mut(level + 1);
            if self.counts[level + 1] == 0 {
                core::mem::swap(&mut below[level], &mut above[0]);
            } else {
                add_shard(&mut above[0][..n], &below[level][..n], 1.0, false);
            }
            level += 1;
        }
    }

    /// Whether the next leaf is the last of the tree.
    pub(crate) fn at_last_leaf(&self) -> bool {
        self.counts
            .iter()
            .zip(&self.radices)
            .all(|(&c, &r)| c + 1 == r)
    }

    /// The part `at` of the last leaf (its values there): adds it, and the nodes it
    /// completes, over `at` alone, and returns the root's values there. The parts of the last
    /// leaf, in any order, give the bits of [`push`](Self::push) of the whole leaf; then
    /// [`end_last_leaf`](Self::end_last_leaf) readies the fold for the next tree.
    pub(crate) fn push_last_part(&mut self, leaf: Leaf<'_>, at: Range<usize>) -> &[f32] {
        debug_assert!(self.at_last_leaf(), "only the last leaf comes in parts");
        add_leaf(&mut self.sums[0][at.clone()], leaf, self.counts[0] == 0);
        for level in 0..self.radices.len() - 1 {
            let (below, above) = self.sums.split_at_mut(level + 1);
            let (child, parent) = (&below[level][at.clone()], &mut above[0][at.clone()]);
            add_shard(parent, child, 1.0, self.counts[level + 1] == 0);
        }
        &self.sums[self.radices.len() - 1][at]
    }

    /// Ends a tree whose last leaf came in parts ([`push_last_part`](Self::push_last_part)).
    pub(crate) fn end_last_leaf(&mut self) {
        debug_assert!(self.at_last_leaf());
        self.counts.fill(0);
    }
}

impl Leaf<'_> {
    /// The values' length (`None` for an empty leaf).
    fn len(&self) -> Option<usize> {
        match self {
            Leaf::Weighted(g, _) | Leaf::Value(g) => Some(g.len()),
            Leaf::Empty => None,
        }
    }
}

/// Adds `leaf` into a node's running sum: its product (weighted) or its values, to the sum
/// or, for the node's first child, in place of it.
fn add_leaf(sum: &mut [f32], leaf: Leaf<'_>, first: bool) {
    match leaf {
        Leaf::Weighted(g, weight) => add_shard(sum, g, weight, first),
        Leaf::Value(v) => add_shard(sum, v, 1.0, first),
        Leaf::Empty if first => sum.fill(0.0),
        Leaf::Empty => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factors_and_process_counts() {
        let counts = |s: usize| Tree::new(s).process_counts().collect::<Vec<_>>();
        assert_eq!(counts(1), [1]);
        assert_eq!(counts(8), [1, 2, 4, 8]);
        assert_eq!(counts(12), [1, 2, 4, 12]);
        assert_eq!(counts(6), [1, 2, 6]);
        assert_eq!(counts(7), [1, 7]);
        let tree = Tree::new(12);
        assert_eq!(tree.split(1), Some((vec![3, 2, 2], vec![])));
        assert_eq!(tree.split(4), Some((vec![3], vec![2, 2])));
        assert_eq!(tree.split(12), Some((vec![], vec![3, 2, 2])));
        assert_eq!(tree.split(3), None);
        assert_eq!(tree.split(6), None);
    }

    /// The tree's sum of `leaves` (shard gradients with weights) written out as a recursion.
    fn recursive(tree: &[usize], leaves: &[(Vec<f32>, f32)]) -> Vec<f32> {
        let Some((&f, rest)) = tree.split_first() else {
            let (g, w) = &leaves[0];
            return g.iter().map(|x| x * w).collect();
        };
        let each = leaves.len() / f;
        let children: Vec<Vec<f32>> = leaves.chunks(each).map(|c| recursive(rest, c)).collect();
        let mut sum = children[0].clone();
        for c in &children[1..] {
            sum.iter_mut().zip(c).for_each(|(s, x)| *s += x);
        }
        sum
    }

    fn leaves(n: usize, len: usize) -> Vec<(Vec<f32>, f32)> {
        (0..n)
            .map(|s| {
                let g = (0..len)
                    .map(|i| ((i * 31 + s * 17) % 23) as f32 * 0.173 - 1.9)
                    .collect();
                (g, 1.0 / (s + 3) as f32)
            })
            .collect()
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    #[test]
    fn the_fold_is_the_recursion_and_every_split_gives_its_bits() {
        for shards in [1, 2, 3, 4, 6, 8, 12, 16] {
            let tree = Tree::new(shards);
            let leaves = leaves(shards, 37);
            let want = bits(&recursive(&tree.factors, &leaves));
            for processes in tree.process_counts() {
                let (own, top) = tree.split(processes).unwrap();
                let k = shards / processes;
                // Each process folds its own subtree; the top fold takes their sums in order.
                let subtrees: Vec<Vec<f32>> = leaves
                    .chunks(k)
                    .map(|mine| {
                        let mut fold = TreeFold::new(&own, 37);
                        let mut root = None;
                        for (g, w) in mine {
                            root = fold.push(Leaf::Weighted(g, *w)).map(<[f32]>::to_vec);
                        }
                        root.expect("the last leaf gives the root")
                    })
                    .collect();
                let mut fold = TreeFold::new(&top, 37);
                let mut root = None;
                for s in &subtrees {
                    root = fold.push(Leaf::Value(s)).map(<[f32]>::to_vec);
                }
                let got = bits(&root.unwrap());
                assert_eq!(got, want, "{shards} shards on {processes} processes");
            }
        }
    }

    #[test]
    fn a_last_leaf_in_parts_gives_the_bits_of_a_whole_one() {
        for radices in [&[2, 2][..], &[3, 2], &[1], &[5]] {
            let k: usize = radices.iter().product();
            let leaves = leaves(k, 23);
            let (mut whole, mut parts) = (TreeFold::new(radices, 23), TreeFold::new(radices, 23));
            for _round in 0..2 {
                let mut want = None;
                for (g, w) in &leaves {
                    want = whole.push(Leaf::Weighted(g, *w)).map(<[f32]>::to_vec);
                }
                let mut got = vec![f32::NAN; 23];
                for (g, w) in &leaves[..k - 1] {
                    assert!(!parts.at_last_leaf());
                    assert!(parts.push(Leaf::Weighted(g, *w)).is_none());
                }
                assert!(parts.at_last_leaf());
                let (g, w) = &leaves[k - 1];
                // The last layer first, as a backward pass hands them on.
                for at in [15..23, 4..15, 0..4] {
                    let root = parts.push_last_part(Leaf::Weighted(&g[at.clone()], *w), at.clone());
                    got[at].copy_from_slice(root);
                }
                parts.end_last_leaf();
                assert_eq!(bits(&got), bits(&want.unwrap()), "{radices:?}");
            }
        }
    }

    #[test]
    fn an_empty_leaf_adds_nothing() {
        let leaves = leaves(4, 5);
        let mut fold = TreeFold::new(&[2, 2], 5);
        let mut root = None;
        for (s, (g, w)) in leaves.iter().enumerate() {
            let leaf = if s == 3 {
                Leaf::Empty
            } else {
                Leaf::Weighted(g, *w)
            };
            root = fold.push(leaf).map(<[f32]>::to_vec);
        }
        let mut want = recursive(&[2], &leaves[..2]);
        let third: Vec<f32> = leaves[2].0.iter().map(|x| x * leaves[2].1).collect();
        want.iter_mut().zip(&third).for_each(|(s, x)| *s += x);
        assert_eq!(bits(&root.unwrap()), bits(&want));
    }
}
