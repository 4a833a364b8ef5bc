//! Compute kernels that layers call inside a train step: they work on caller-owned slices,
//! allocate nothing and give the same bits for any number of threads.
//!
//! - [`gemm`]: strided single-precision matrix multiply `C = alpha * A·B + beta * C`, with a
//!   packed, register-blocked microkernel and caller-provided packing workspace.
//! - [`cpu`]: which instruction set the microkernel runs on ([`cpu::Kernel`]), chosen once per
//!   process from what the CPU has.
//!
//! - [`parallel`]: the fork-join on the rayon pool (feature `parallel`), and the threshold above
//!   which the layers' passes over a batch are split into runs of whole samples.
//!
//! Under them (crate-internal): `simd`, loading and storing `f32x8` lanes from slices (full,
//! zero-padded tails, partial stores) and the element-wise slice sums built on them.

pub mod cpu;
pub mod gemm;
pub mod parallel;
pub(crate) mod simd;
