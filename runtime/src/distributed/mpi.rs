//! [`Mpi`] (feature `mpi`): the [`Communicator`] of the processes `mpirun` started, over MPI's
//! world communicator (the `mpi` crate, on OpenMPI or MPICH).

use super::communicator::Communicator;
use core::cell::Cell;
use core::marker::PhantomData;
use mpi::environment::Universe;
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator as _, CommunicatorCollectives as _, Root};
use mpi::Threading;
use std::fmt;

/// The world of an MPI job: every process `mpirun` started, ranked as MPI ranks them.
///
/// MPI is initialized once per process, with calls from any one thread at a time (the
/// trainer's loop runs in its rayon pool), and finalized when this value is dropped. A panic
/// on any process ends the whole job (`MPI_Abort`) instead of leaving the others waiting.
///
/// ```no_run
/// use fusegraph_runtime::distributed::{Communicator, Mpi};
/// let world = Mpi::init().expect("MPI");
/// println!("rank {} of {}", world.rank(), world.size());
/// ```
pub struct Mpi {
    /// Finalizes MPI when dropped.
    _universe: Universe,
    /// Not `Sync`: the processes' collective calls must come from one thread at a time, so
    /// the communicator may move to another thread but not be shared between threads.
    one_thread_at_a_time: PhantomData<Cell<()>>,
}

/// Why MPI could not be started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MpiError {
    /// MPI was initialized before in this process.
    AlreadyInitialized,
    /// The MPI library does not allow calls from a thread other than the main one.
    Threading,
}

impl fmt::Display for MpiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MpiError::AlreadyInitialized => "MPI was already initialized in this process",
            MpiError::Threading => {
                "the MPI library does not support calls from several threads one at a time \
                 (MPI_THREAD_SERIALIZED)"
            }
        })
    }
}

impl std::error::Error for MpiError {}

impl Mpi {
    /// Initializes MPI for this process and makes a panic anywhere in it end the job.
    pub fn init() -> Result<Self, MpiError> {
        let (universe, provided) = mpi::initialize_with_threading(Threading::Serialized)
            .ok_or(MpiError::AlreadyInitialized)?;
        if matches!(provided, Threading::Single | Threading::Funneled) {
            return Err(MpiError::Threading);
        }
        abort_on_panic();
        Ok(Mpi {
            _universe: universe,
            one_thread_at_a_time: PhantomData,
        })
    }

    /// MPI's world communicator (a handle: nothing is allocated).
    fn world(&self) -> SimpleCommunicator {
        SimpleCommunicator::world()
    }
}

/// Chains a panic hook that, after the usual message, ends every process of the job.
fn abort_on_panic() {
    let report = std::panic::take_hook();
    std::panic::set_hook(std::boxed::Box::new(move |info| {
        report(info);
        SimpleCommunicator::world().abort(101);
    }));
}

impl Communicator for Mpi {
    fn rank(&self) -> usize {
        self.world().rank() as usize
    }

    fn size(&self) -> usize {
        self.world().size() as usize
    }

    fn all_gather(&self, mine: &[f32], all: &mut [f32]) {
        self.world().all_gather_into(mine, all);
    }

    fn broadcast(&self, values: &mut [f32]) {
        self.world().process_at_rank(0).broadcast_into(values);
    }

    fn broadcast_u64(&self, values: &mut [u64]) {
        self.world().process_at_rank(0).broadcast_into(values);
    }

    fn abort(&self, code: i32) -> ! {
        self.world().abort(code)
    }
}
