//! Compute kernels that layers call inside a train step: they work on caller-owned slices,
//! allocate nothing and give the same bits for any number of threads.
//!
//! - [`gemm`]: strided single-precision matrix multiply `C = alpha * A·B + beta * C`, with a
//!   packed, register-blocked microkernel and caller-provided packing workspace, on the lanes of
//!   the process's [`Capability`](crate::lane::Capability).
//! - [`parallel`]: the fork-join on the rayon pool (feature `parallel`), and the threshold above
//!   which the layers' passes over a batch are split into runs of whole samples.
//!
//! Under them, the SIMD floor, [`lane`](crate::lane): the lane types, the one capability and
//! the element-wise slice operations the layers share.

pub mod gemm;
pub mod parallel;
