//! [`Communicator`]: what a data-parallel step needs from the processes it runs on, and
//! [`Solo`], the one process of a run without them.

/// The processes of a data-parallel job: each has a rank in `0..size`. Every method is
/// collective: every process calls it, in the same order, with buffers of the same lengths.
///
/// The data-parallel step uses only these: it moves values and adds them itself, in the
/// order of its shards' tree, so the result never depends on how a library's reduction orders
/// its sums.
pub trait Communicator {
    /// This process's rank.
    fn rank(&self) -> usize;
    /// The number of processes.
    fn size(&self) -> usize;
    /// Gathers every process's `mine` (all of one length) into `all`, in rank order: rank
    /// `r`'s values land at `all[r * mine.len()..]`.
    fn all_gather(&self, mine: &[f32], all: &mut [f32]);
    /// [`all_gather`](Self::all_gather) of integers.
    fn all_gather_u64(&self, mine: &[u64], all: &mut [u64]);
    /// Sends block `r` of `send` to rank `r` and receives into block `r` of `recv` what rank
    /// `r` sent this process: both hold [`size`](Self::size) blocks of one length.
    fn all_to_all(&self, send: &[f32], recv: &mut [f32]);
    /// Starts [`all_to_all`](Self::all_to_all) of `send` into `recv` and returns before it
    /// is done, where the communicator can (MPI's `MPI_Ialltoall`); [`wait`](Self::wait)
    /// completes every exchange started. By default it runs the exchange whole at once.
    ///
    /// # Safety
    /// Until `wait` returns, `send` and `recv` must stay allocated, neither may be written
    /// and `recv` may not be read.
    unsafe fn start_all_to_all(&self, send: *const [f32], recv: *mut [f32]) {
        // SAFETY: the caller gives valid buffers, which nothing else uses until `wait`.
        unsafe { self.all_to_all(&*send, &mut *recv) }
    }
    /// Lets the exchanges started move on (an MPI library moves data only inside its calls).
    fn progress(&self) {}
    /// Completes every exchange started with [`start_all_to_all`](Self::start_all_to_all).
    fn wait(&self) {}
    /// Overwrites every process's `values` with rank 0's.
    fn broadcast(&self, values: &mut [f32]);
    /// Overwrites every process's `values` with rank 0's.
    fn broadcast_u64(&self, values: &mut [u64]);
    /// Ends every process of the job with exit code `code`, so that none waits for a process
    /// that failed.
    fn abort(&self, code: i32) -> !;
}

/// A job of one process: gathering and exchanging copy, broadcasting does nothing. A data-parallel step on
/// it computes every shard itself (gradient accumulation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Solo;

impl Communicator for Solo {
    fn rank(&self) -> usize {
        0
    }

    fn size(&self) -> usize {
        1
    }

    fn all_gather(&self, mine: &[f32], all: &mut [f32]) {
        all.copy_from_slice(mine);
    }

    fn all_gather_u64(&self, mine: &[u64], all: &mut [u64]) {
        all.copy_from_slice(mine);
    }

    fn all_to_all(&self, send: &[f32], recv: &mut [f32]) {
        recv.copy_from_slice(send);
    }

    fn broadcast(&self, _values: &mut [f32]) {}

    fn broadcast_u64(&self, _values: &mut [u64]) {}

    fn abort(&self, code: i32) -> ! {
        abort_process(code)
    }
}

/// Forwards every call to the communicator behind the reference.
macro_rules! forward_communicator {
    () => {
        fn rank(&self) -> usize {
            (**self).rank()
        }
        fn size(&self) -> usize {
            (**self).size()
        }
        fn all_gather(&self, mine: &[f32], all: &mut [f32]) {
            (**self).all_gather(mine, all);
        }
        fn all_gather_u64(&self, mine: &[u64], all: &mut [u64]) {
            (**self).all_gather_u64(mine, all);
        }
        fn all_to_all(&self, send: &[f32], recv: &mut [f32]) {
            (**self).all_to_all(send, recv);
        }
        unsafe fn start_all_to_all(&self, send: *const [f32], recv: *mut [f32]) {
            // SAFETY: the caller's promise is passed on.
            unsafe { (**self).start_all_to_all(send, recv) }
        }
        fn progress(&self) {
            (**self).progress();
        }
        fn wait(&self) {
            (**self).wait();
        }
        fn broadcast(&self, values: &mut [f32]) {
            (**self).broadcast(values);
        }
        fn broadcast_u64(&self, values: &mut [u64]) {
            (**self).broadcast_u64(values);
        }
        fn abort(&self, code: i32) -> ! {
            (**self).abort(code)
        }
    };
}

impl<C: Communicator + ?Sized> Communicator for &C {
    forward_communicator!();
}

#[cfg(feature = "alloc")]
impl<C: Communicator + ?Sized> Communicator for alloc::boxed::Box<C> {
    forward_communicator!();
}

/// Ends this process: with `std`, with exit code `code`; without it, by panicking.
fn abort_process(code: i32) -> ! {
    #[cfg(feature = "std")]
    {
        std::process::exit(code)
    }
    #[cfg(not(feature = "std"))]
    {
        panic!("the job aborted with code {code}")
    }
}
