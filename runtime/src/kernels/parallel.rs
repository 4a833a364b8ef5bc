//! Fork-join for the kernels and the layers' passes: two closures on the rayon pool when the
//! `parallel` feature is on and the caller asks for it, else one after the other on this
//! thread; and passes over a batch cut into runs of whole samples, one per thread.

use core::ops::Range;

/// `rayon::join(a, b)` when `par` and the `parallel` feature are set, else `(a(), b())`. Either
/// way `a` and `b` see the same data and return the same values: only where they run changes.
/// A join on the pool counts in [`splits`] of the calling thread.
pub(crate) fn join<A, B, RA, RB>(par: bool, a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    #[cfg(feature = "parallel")]
    if par {
        SPLITS.with(|s| s.set(s.get().wrapping_add(1)));
        return rayon::join(a, b);
    }
    let _ = par;
    (a(), b())
}

#[cfg(feature = "parallel")]
std::thread_local! {
    static SPLITS: core::cell::Cell<u64> = const { core::cell::Cell::new(0) };
}

/// How many times this thread has handed work to the pool (a product or a pass split across
/// it) so far; always 0 without the `parallel` feature. A train step compares it before and
/// after its backward pass to know whether several threads wrote the gradient.
pub(crate) fn splits() -> u64 {
    #[cfg(feature = "parallel")]
    {
        SPLITS.with(core::cell::Cell::get)
    }
    #[cfg(not(feature = "parallel"))]
    {
        0
    }
}

/// Threads of the current rayon pool (1 without the `parallel` feature).
pub fn pool_threads() -> usize {
    #[cfg(feature = "parallel")]
    {
        rayon::current_num_threads()
    }
    #[cfg(not(feature = "parallel"))]
    {
        1
    }
}

/// A pass over a batch of at least this many `f32` values read and written (the copies of an
/// im2col, a pooling, an activation) is split across the rayon pool, a run of whole samples
/// per thread; a smaller one stays on the calling thread. A hand-off into the pool costs about
/// 15 us on a 2-core machine; at 2^17 the W4 step of `bench_train` at batch 8 split its second
/// im2col (205k values) and ran 3-8% slower on two threads than on one, at 2^18 it runs as
/// fast, while every pass of the step at batch 64 is still split.
pub const PASS_PARALLEL_MIN: usize = 1 << 18;

/// Outputs of a pass that can be cut between samples: a slice of `per` values a sample, or a
/// pair of them.
pub(crate) trait Samples: Send + Sized {
    /// The samples `..at` and `at..`.
    fn split_at(self, at: usize) -> (Self, Self);
}

/// A slice holding `per` values for each sample.
pub(crate) struct PerSample<'a> {
    /// The values, `per` a sample.
    pub(crate) data: &'a mut [f32],
    /// Values a sample (0 for an empty output: it splits into empty slices).
    pub(crate) per: usize,
}

impl Samples for PerSample<'_> {
    fn split_at(self, at: usize) -> (Self, Self) {
        let per = self.per;
        let (a, b) = self.data.split_at_mut((at * per).min(self.data.len()));
        (PerSample { data: a, per }, PerSample { data: b, per })
    }
}

impl<A: Samples, const N: usize> Samples for [A; N] {
    fn split_at(self, at: usize) -> (Self, Self) {
        let mut halves = self.map(|a| {
            let (left, right) = a.split_at(at);
            (Some(left), Some(right))
        });
        let left = core::array::from_fn(|i| halves[i].0.take().expect("each half is taken once"));
        let right = core::array::from_fn(|i| halves[i].1.take().expect("each half is taken once"));
        (left, right)
    }
}

impl<A: Samples, B: Samples> Samples for (A, B) {
    fn split_at(self, at: usize) -> (Self, Self) {
        let ((a0, a1), (b0, b1)) = (self.0.split_at(at), self.1.split_at(at));
        ((a0, b0), (a1, b1))
    }
}

/// Runs `f(samples, out)` over `0..batch` cut into runs of whole samples, `out` cut alike:
/// one run per thread of the pool when the pass moves at least [`PASS_PARALLEL_MIN`] values
/// (`work`), else one run on this thread. A pass whose samples do not depend on each other
/// gives the same bits either way.
pub(crate) fn for_sample_runs<O, F>(batch: usize, work: usize, out: O, f: &F)
where
    O: Samples,
    F: Fn(Range<usize>, O) + Sync,
{
    let pieces = if work >= PASS_PARALLEL_MIN {
        pool_threads().min(batch)
    } else {
        1
    };
    for_runs(batch, pieces, out, f);
}

/// Runs `f(samples, out)` over `0..batch` cut into `pieces` runs of whole samples (as even as
/// they go), `out` cut alike, the halves of each cut under [`join`]: for a pass that decides
/// for itself how many threads its work is worth.
pub(crate) fn for_runs<O, F>(batch: usize, pieces: usize, out: O, f: &F)
where
    O: Samples,
    F: Fn(Range<usize>, O) + Sync,
{
    split(0..batch, pieces, out, f);
}

/// `f` over `samples` in `pieces` runs, halves under [`join`].
fn split<O, F>(samples: Range<usize>, pieces: usize, out: O, f: &F)
where
    O: Samples,
    F: Fn(Range<usize>, O) + Sync,
{
    let len = samples.len();
    if pieces <= 1 || len <= 1 {
        f(samples, out);
        return;
    }
    let left = pieces / 2;
    let mid = len * left / pieces;
    let (o0, o1) = out.split_at(mid);
    let at = samples.start + mid;
    join(
        true,
        || split(samples.start..at, left, o0, f),
        || split(at..samples.end, pieces - left, o1, f),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_cover_every_sample_once_in_their_own_slices() {
        let mut a = [0.0f32; 40];
        let mut b = [0.0f32; 20];
        let out = (
            PerSample {
                data: &mut a,
                per: 4,
            },
            PerSample {
                data: &mut b,
                per: 2,
            },
        );
        for_sample_runs(10, usize::MAX, out, &|r: Range<usize>, (x, y)| {
            assert_eq!(x.data.len(), r.len() * 4);
            assert_eq!(y.data.len(), r.len() * 2);
            for (i, s) in r.enumerate() {
                x.data[i * 4..i * 4 + 4].fill(s as f32 + 1.0);
                y.data[i * 2..i * 2 + 2].fill(-(s as f32) - 1.0);
            }
        });
        for (i, v) in a.iter().enumerate() {
            assert_eq!(*v, (i / 4) as f32 + 1.0);
        }
        for (i, v) in b.iter().enumerate() {
            assert_eq!(*v, -((i / 2) as f32) - 1.0);
        }
    }

    #[cfg(feature = "parallel")]
    #[test]
    fn large_passes_split_across_the_pool_small_ones_do_not() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .expect("pool");
        let runs = |work: usize| {
            let mut seen = [0usize; 7];
            let out = PerSample {
                data: &mut [],
                per: 0,
            };
            let cells: [core::sync::atomic::AtomicUsize; 7] = Default::default();
            pool.install(|| {
                for_sample_runs(7, work, out, &|r: Range<usize>, _| {
                    let n = r.len();
                    for s in r {
                        cells[s].store(n, core::sync::atomic::Ordering::Relaxed);
                    }
                })
            });
            for (s, c) in seen.iter_mut().zip(&cells) {
                *s = c.load(core::sync::atomic::Ordering::Relaxed);
            }
            seen
        };
        assert_eq!(runs(PASS_PARALLEL_MIN - 1), [7; 7]);
        let split = runs(PASS_PARALLEL_MIN);
        assert!(split.iter().all(|&n| n == 2 || n == 3), "{split:?}");
    }

    #[cfg(feature = "parallel")]
    #[test]
    fn a_join_on_the_pool_counts_in_the_calling_threads_splits() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .expect("pool");
        pool.install(|| {
            let before = splits();
            join(false, || (), || ());
            assert_eq!(splits(), before, "a join off the pool is not a split");
            join(true, || join(true, || (), || ()), || ());
            // The outer join on this thread, and the inner one if `a` ran here (it does: the
            // calling thread runs `a` itself).
            assert_eq!(splits(), before + 2);
        });
    }
}
