//! [`Mpi`] (feature `mpi`): the processes `mpirun` started, and [`World`], their
//! [`Communicator`] over MPI's world communicator (the `mpi` crate, on OpenMPI or MPICH).

use super::communicator::Communicator;
use core::cell::RefCell;
use core::ffi::c_void;
use mpi::environment::Universe;
use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator as _, CommunicatorCollectives as _, Root};
use mpi::Threading;
use std::fmt;
use std::process::ExitCode;

/// This process's part of an MPI job, from [`init`](Self::init) to [`finish`](Self::finish).
///
/// No process waits for one that failed:
/// - [`finish`](Self::finish) with an error prints it with the rank and ends every process
///   of the job (`MPI_Abort`); with success, it waits for the others to finish too
///   (`MPI_Finalize`);
/// - dropped without `finish` (an early return with `?`), it says so and ends the job;
/// - a panic anywhere in the process ends the job after the usual message.
///
/// ```no_run
/// use fusegraph_runtime::distributed::{Communicator, Mpi};
/// use std::process::ExitCode;
///
/// fn train(world: impl Communicator) -> Result<(), Box<dyn std::error::Error>> {
///     println!("rank {} of {}", world.rank(), world.size());
///     Ok(())
/// }
///
/// fn main() -> ExitCode {
///     let mpi = Mpi::init().expect("MPI");
///     let outcome = train(mpi.world());
///     mpi.finish(outcome)
/// }
/// ```
pub struct Mpi {
    /// Finalizes MPI when dropped; taken by [`finish`](Self::finish).
    universe: Option<Universe>,
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
            universe: Some(universe),
        })
    }

    /// The job's processes, to train on (a handle: as many as wanted).
    pub fn world(&self) -> World {
        World {
            pending: RefCell::new(std::vec::Vec::new()),
        }
    }

    /// Ends this process's part of the job with what it did: on success, waits for every
    /// process to finish as well and returns [`ExitCode::SUCCESS`]; on an error, prints it
    /// with this process's rank and ends every process of the job at once, so that none
    /// waits for this one (a job of one process returns [`ExitCode::FAILURE`]). Call it after
    /// the last use of a [`World`].
    pub fn finish<T, E: fmt::Display>(mut self, outcome: Result<T, E>) -> ExitCode {
        let world = self.world();
        match outcome {
            Ok(_) => {
                drop(self.universe.take());
                ExitCode::SUCCESS
            }
            Err(e) => {
                std::eprintln!("rank {}: {e}", world.rank());
                if world.size() > 1 {
                    std::eprintln!("rank {}: ending the job", world.rank());
                    world.abort(1)
                }
                drop(self.universe.take());
                ExitCode::FAILURE
            }
        }
    }
}

impl Drop for Mpi {
    /// Without [`finish`](Mpi::finish), the process is leaving early (an error returned with
    /// `?`): the job ends, instead of waiting in `MPI_Finalize` for processes that wait for
    /// this one.
    fn drop(&mut self) {
        if self.universe.is_some() {
            let world = self.world();
            if world.size() > 1 {
                std::eprintln!(
                    "rank {}: left the job without Mpi::finish (an error returned early?); \
                     ending the job",
                    world.rank()
                );
                world.abort(1)
            }
        }
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

/// Every process of an MPI job, ranked as MPI ranks them: the [`Communicator`] of
/// [`Mpi::world`].
///
/// Not `Sync`: the processes' collective calls must come from one thread at a time (the
/// trainer's loop runs in its rayon pool), so a `World` may move to another thread but not be
/// shared between threads.
pub struct World {
    /// The exchanges started and not yet waited for (their capacity kept from step to step).
    pending: RefCell<std::vec::Vec<ffi::MPI_Request>>,
}

// SAFETY: an `MPI_Request` is a handle that MPI lets any thread use, one at a time (the
// library runs with `MPI_THREAD_SERIALIZED`); `World` is not `Sync`, so one thread at a time
// uses it.
unsafe impl Send for World {}

impl World {
    /// MPI's world communicator (a handle: nothing is allocated).
    fn comm(&self) -> SimpleCommunicator {
        SimpleCommunicator::world()
    }
}

impl Communicator for World {
    fn rank(&self) -> usize {
        self.comm().rank() as usize
    }

    fn size(&self) -> usize {
        self.comm().size() as usize
    }

    fn all_gather(&self, mine: &[f32], all: &mut [f32]) {
        self.comm().all_gather_into(mine, all);
    }

    fn all_gather_u64(&self, mine: &[u64], all: &mut [u64]) {
        self.comm().all_gather_into(mine, all);
    }

    fn all_to_all(&self, send: &[f32], recv: &mut [f32]) {
        self.comm().all_to_all_into(send, recv);
    }

    unsafe fn start_all_to_all(&self, send: *const [f32], recv: *mut [f32]) {
        let block = (send.len() / self.size()) as i32;
        let mut request = core::mem::MaybeUninit::uninit();
        // SAFETY: the buffers stay valid and untouched until `wait` (the caller's promise);
        // `MPI_Ialltoall` writes the request before it returns.
        unsafe {
            ffi::MPI_Ialltoall(
                send as *const c_void,
                block,
                ffi::RSMPI_FLOAT,
                recv as *mut c_void,
                block,
                ffi::RSMPI_FLOAT,
                self.comm().as_raw(),
                request.as_mut_ptr(),
            );
            self.pending.borrow_mut().push(request.assume_init());
        }
    }

    fn progress(&self) {
        let mut pending = self.pending.borrow_mut();
        let mut done = 0;
        // SAFETY: the requests are live or null, and `MPI_Testall` may set them to null.
        unsafe {
            ffi::MPI_Testall(
                pending.len() as i32,
                pending.as_mut_ptr(),
                &mut done,
                ffi::RSMPI_STATUSES_IGNORE,
            );
        }
    }

    fn wait(&self) {
        let mut pending = self.pending.borrow_mut();
        // SAFETY: as in `progress`; afterwards every request is done.
        unsafe {
            ffi::MPI_Waitall(
                pending.len() as i32,
                pending.as_mut_ptr(),
                ffi::RSMPI_STATUSES_IGNORE,
            );
        }
        pending.clear();
    }

    fn broadcast(&self, values: &mut [f32]) {
        self.comm().process_at_rank(0).broadcast_into(values);
    }

    fn broadcast_u64(&self, values: &mut [u64]) {
        self.comm().process_at_rank(0).broadcast_into(values);
    }

    fn abort(&self, code: i32) -> ! {
        self.comm().abort(code)
    }
}
