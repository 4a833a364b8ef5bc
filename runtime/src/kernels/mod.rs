//! Compute kernels that layers call inside a train step: they work on caller-owned slices,
//! allocate nothing and give the same bits for any number of threads.
//!
//! - [`gemm`]: strided single-precision matrix multiply `C = alpha * A·B + beta * C`, with a
//!   packed, register-blocked `f32x8` microkernel and caller-provided packing workspace.

pub mod gemm;
