//! Data-parallel training, bit-identical for any number of processes: a global batch is cut
//! into a fixed number of [`Shards`] in global sample order; each process computes the mean
//! gradients of its shards, the processes gather them ([`Communicator`]), and every process
//! adds them in shard order ([`add_shard`]) and runs the same fused update
//! ([`DataParallel`]). Nothing depends on how a reduction library orders its sums. On one
//! process ([`Solo`]) the same step is gradient accumulation. The feature `mpi` adds `Mpi`,
//! a communicator over MPI's world.

mod communicator;
#[cfg(feature = "alloc")]
mod exchange;
#[cfg(feature = "alloc")]
mod fingerprint;
#[cfg(feature = "mpi")]
mod mpi;
mod shards;
#[cfg(feature = "alloc")]
mod step;
#[cfg(feature = "alloc")]
mod tree;

pub use communicator::{Communicator, Solo};
#[cfg(feature = "alloc")]
pub use fingerprint::{Entry, Fingerprint, Mismatch, Shown};
#[cfg(feature = "mpi")]
pub use mpi::{Mpi, MpiError, World};
pub use shards::{add_shard, Shards};
#[cfg(feature = "alloc")]
pub use step::{DataParallel, ShardError, ShardOutcome};
