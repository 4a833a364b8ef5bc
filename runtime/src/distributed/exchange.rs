//! [`Exchange`]: how the processes of a data-parallel job sum their subtree sums of the
//! gradient: in buckets of the gradient, each cut into one piece per process; a bucket's
//! pieces go to their processes as soon as the bucket is whole (an all-to-all, a
//! reduce-scatter), each process sums the pieces it receives in the top levels of the shards'
//! tree, and the processes gather the summed pieces (an all-gather). Every operation is
//! element by element, so the buckets and pieces change no bit of the sum.

use super::communicator::Communicator;
use super::tree::{Leaf, TreeFold};
use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;
use core::ops::Range;

/// Gradient values per bucket, unless [`DataParallel::with_bucket`](super::DataParallel::with_bucket)
/// says otherwise: 256 KiB of `f32`.
pub(crate) const BUCKET: usize = 1 << 16;

/// One bucket of the gradient.
#[derive(Clone, Debug)]
struct Bucket {
    /// Its values in the gradient.
    at: Range<usize>,
    /// Values per process (the last process's piece padded with zeros).
    piece: usize,
    /// Where its pieces start in `send` and `recv` (one per process).
    exchanged: usize,
    /// Where this process's summed piece starts in `summed`.
    summed: usize,
}

/// The buckets, their buffers and the top of the tree, allocated once.
pub(crate) struct Exchange {
    buckets: Box<[Bucket]>,
    processes: usize,
    /// The values of each bucket this process's subtree has summed so far.
    filled: Box<[usize]>,
    /// Each bucket's pieces of this process's subtree sum, one per process, padded with 0.
    send: Box<[f32]>,
    /// Each bucket's pieces for this process, one from each process, in rank order.
    recv: Box<[f32]>,
    /// This process's piece of each bucket, summed over the processes.
    summed: Box<[f32]>,
    /// Every process's `summed`, in rank order.
    gathered: Box<[f32]>,
    /// The tree's top levels, over one piece.
    top: TreeFold,
}

impl Exchange {
    /// The exchange of a gradient of `len` values among `processes` (more than one), whose
    /// subtree sums add in a tree of `top` radices (from the bottom up), in buckets of
    /// `bucket` values.
    pub(crate) fn new(len: usize, processes: usize, top: &[usize], bucket: usize) -> Self {
        let bucket = bucket.max(1);
        let mut buckets = Vec::new();
        let (mut exchanged, mut summed) = (0, 0);
        for start in (0..len).step_by(bucket) {
            let at = start..(start + bucket).min(len);
            let piece = at.len().div_ceil(processes);
            buckets.push(Bucket {
                at,
                piece,
                exchanged,
                summed,
            });
            exchanged += processes * piece;
            summed += piece;
        }
        let longest = buckets.iter().map(|b| b.piece).max().unwrap_or(0);
        Exchange {
            filled: vec![0; buckets.len()].into_boxed_slice(),
            buckets: buckets.into_boxed_slice(),
            processes,
            send: vec![0.0; exchanged].into_boxed_slice(),
            recv: vec![0.0; exchanged].into_boxed_slice(),
            summed: vec![0.0; summed].into_boxed_slice(),
            gathered: vec![0.0; processes * summed].into_boxed_slice(),
            top: TreeFold::new(top, longest),
        }
    }

    /// Bytes this process hands the communicator per step to send to the others, and as many
    /// it receives: each bucket's pieces but its own, and its summed pieces to each.
    pub(crate) fn bytes_per_step(&self) -> usize {
        let others = self.processes - 1;
        2 * others * self.summed.len() * 4
    }

    /// Takes the values `at` of this process's subtree sum, now final; starts the exchange of
    /// each bucket they complete.
    pub(crate) fn place<C: Communicator + ?Sized>(
        &mut self,
        comm: &C,
        at: Range<usize>,
        values: &[f32],
    ) {
        for (b, bucket) in self.buckets.iter().enumerate() {
            let (start, end) = (at.start.max(bucket.at.start), at.end.min(bucket.at.end));
            if start >= end {
                continue;
            }
            // Value `j` of the bucket goes to process `j / piece`, at `j % piece`.
            let mut j = start - bucket.at.start;
            while j < end - bucket.at.start {
                let (process, pos) = (j / bucket.piece, j % bucket.piece);
                let run = (bucket.piece - pos).min(end - bucket.at.start - j);
                let to = bucket.exchanged + process * bucket.piece + pos;
                let from = bucket.at.start + j - at.start;
                self.send[to..to + run].copy_from_slice(&values[from..from + run]);
                j += run;
            }
            self.filled[b] += end - start;
            if self.filled[b] == bucket.at.len() {
                let span = bucket.exchanged..bucket.exchanged + self.processes * bucket.piece;
                let send: *const [f32] = &self.send[span.clone()];
                let recv: *mut [f32] = &mut self.recv[span];
                // SAFETY: `send` and `recv` are this exchange's own buffers, neither of which
                // moves or is touched again before `finish` waits for the exchange.
                unsafe { comm.start_all_to_all(send, recv) };
            }
        }
        comm.progress();
    }

    /// Waits for every bucket's pieces, sums them in the tree's top levels, gathers the
    /// summed pieces of every process and writes the global sum into `sum`.
    ///
    /// # Panics
    /// If a value of the subtree sum was never [placed](Self::place).
    pub(crate) fn finish<C: Communicator + ?Sized>(&mut self, comm: &C, sum: &mut [f32]) {
        assert!(
            self.filled
                .iter()
                .zip(self.buckets.iter())
                .all(|(&f, b)| f == b.at.len()),
            "the backward pass did not hand on every layer's gradient"
        );
        comm.wait();
        self.filled.fill(0);
        for bucket in self.buckets.iter() {
            let span = bucket.exchanged..bucket.exchanged + self.processes * bucket.piece;
            let mut root = None;
            for part in self.recv[span].chunks_exact(bucket.piece) {
                root = self.top.push(Leaf::Value(part));
            }
            let root = root.expect("the last process's piece completes the tree's top");
            self.summed[bucket.summed..bucket.summed + bucket.piece].copy_from_slice(root);
        }
        comm.all_gather(&self.summed, &mut self.gathered);
        let per_process = self.summed.len();
        for bucket in self.buckets.iter() {
            for process in 0..self.processes {
                let first = process * bucket.piece;
                if first >= bucket.at.len() {
                    break;
                }
                let n = bucket.piece.min(bucket.at.len() - first);
                let from = process * per_process + bucket.summed;
                let to = bucket.at.start + first;
                sum[to..to + n].copy_from_slice(&self.gathered[from..from + n]);
            }
        }
    }
}
