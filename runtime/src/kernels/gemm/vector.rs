//! The vectors the microkernel computes on: the [`Lane`] type of each
//! [`Capability`](crate::lane::Capability), [`Portable`] (`wide`'s `f32x8`, whose instructions
//! are chosen when the crate is compiled), and on x86 [`Avx2`] (256-bit AVX2 with FMA) and
//! [`Avx512`] (512-bit AVX-512F), whose instructions are fixed whatever the build's target
//! features; with their [`MulAdd`] and the transpose that packing runs.
//!
//! The GEMM is generic over [`Vector`]; every function between a kernel's entry point and
//! these methods is `#[inline(always)]`, so the whole microkernel is compiled inside that
//! entry point, which carries `#[target_feature]` for the x86 kernels.
//!
//! # Safety of the x86 types
//!
//! [`Avx2`] and [`Avx512`] call `core::arch` intrinsics that need their instruction set. Their
//! methods may only run on a CPU that has it: the GEMM reaches them only through its kernel
//! entry points, which run a kernel after
//! [`Capability::available`](crate::lane::Capability::available) said the CPU has it.

use crate::lane::{Lane, MulAdd};
use wide::f32x8;

/// An 8x8 block of a matrix: row `i` is `data[i * stride..][..8]` for `i < rows`, and zero
/// for the rows below.
#[derive(Clone, Copy)]
pub(super) struct Block8<'a> {
    /// The first row's values and those after it.
    pub(super) data: &'a [f32],
    /// From one row to the next.
    pub(super) stride: usize,
    /// The rows read (at most 8).
    pub(super) rows: usize,
}

/// Where a transposed 8x8 block goes in a packed panel: eight runs, run `q` at
/// `data[q * stride..][..width]` (`width <= 8`; the columns past it are dropped).
pub(super) struct Panel8<'a> {
    /// The first run's place and the values after it.
    pub(super) data: &'a mut [f32],
    /// From one run to the next.
    pub(super) stride: usize,
    /// The values of each run written.
    pub(super) width: usize,
}

/// A vector the microkernel computes on: the [`Lane`] type of a [`Capability`] with its
/// multiply-add ([`MulAdd`]), and the transpose that packing runs on it.
pub(super) trait Vector: MulAdd {
    /// Transposes the 8x8 block `from` into `to`: column `q` of the block becomes run `q` of
    /// the panel. In the instruction set of the vector's kernel, so that packing runs on it too.
    fn transpose8(from: Block8<'_>, to: Panel8<'_>);
}

/// The vector of [`Capability::Portable`], the lanes the element-wise passes run on too:
/// `wide`'s [`f32x8`] where the target has SIMD registers (SSE2 on x86_64 by default, AVX with
/// FMA under a `-C target-cpu` that enables them, NEON on aarch64), whose `mul_add` rounds once
/// where the build enables FMA (or NEON) and twice otherwise; one `f32` on a target without
/// them (a microcontroller), whose tile of scalar accumulators fits the FPU's registers and
/// whose `mul_add` is `vfma.f32` on an M-profile Arm FPU (see [`MulAdd`]).
pub(super) use crate::lane::Portable;

impl Vector for f32x8 {
    #[inline(always)]
    fn transpose8(from: Block8<'_>, to: Panel8<'_>) {
        let mut v = [f32x8::ZERO; 8];
        for (i, x) in v.iter_mut().enumerate().take(from.rows) {
            *x = Lane::load(&from.data[i * from.stride..]);
        }
        for (q, &column) in f32x8::transpose(v).iter().enumerate() {
            // A store of a whole lane, or a guarded one for the last few columns: a copy of
            // unknown length would be a call to `memmove`.
            let at = q * to.stride;
            column.store_partial(&mut to.data[at..at + to.width]);
        }
    }
}

/// One `f32`: the transpose is eight runs of copies.
impl Vector for f32 {
    #[inline(always)]
    fn transpose8(from: Block8<'_>, to: Panel8<'_>) {
        for (q, run) in to.data.chunks_mut(to.stride).take(8).enumerate() {
            for (i, x) in run.iter_mut().take(to.width).enumerate() {
                *x = if i < from.rows {
                    from.data[i * from.stride + q]
                } else {
                    0.0
                };
            }
        }
    }
}

#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
pub(super) use crate::lane::{Avx2, Avx512};

#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
mod x86 {
    //! The transpose of the x86 vectors, on AVX, which both kernels' CPUs have.

    use super::{Avx2, Avx512, Block8, Panel8, Vector};
    #[cfg(target_arch = "x86")]
    use core::arch::x86::*;
    #[cfg(target_arch = "x86_64")]
    use core::arch::x86_64::*;

    impl Vector for Avx2 {
        #[inline(always)]
        fn transpose8(from: Block8<'_>, to: Panel8<'_>) {
            transpose8_avx(from, to);
        }
    }

    impl Vector for Avx512 {
        #[inline(always)]
        fn transpose8(from: Block8<'_>, to: Panel8<'_>) {
            transpose8_avx(from, to);
        }
    }

    /// [`Vector::transpose8`] of both x86 vectors, on 256-bit AVX registers (AVX-512F implies
    /// AVX2): eight row loads, three rounds of shuffles, eight column stores. Every `unsafe`
    /// block calls an AVX intrinsic, which the kernel of either vector checked the CPU has.
    #[inline(always)]
    fn transpose8_avx(from: Block8<'_>, to: Panel8<'_>) {
        let row = |i: usize| {
            if i < from.rows {
                let at = i * from.stride;
                let r = &from.data[at..at + 8];
                // SAFETY: AVX, as above; `r` holds eight floats.
                unsafe { _mm256_loadu_ps(r.as_ptr()) }
            } else {
                // SAFETY: AVX, as above.
                unsafe { _mm256_setzero_ps() }
            }
        };
        let r: [__m256; 8] = core::array::from_fn(row);
        // SAFETY: AVX, as above; shuffles of registers only.
        let columns: [__m256; 8] = unsafe {
            let t = [
                _mm256_unpacklo_ps(r[0], r[1]),
                _mm256_unpackhi_ps(r[0], r[1]),
                _mm256_unpacklo_ps(r[2], r[3]),
                _mm256_unpackhi_ps(r[2], r[3]),
                _mm256_unpacklo_ps(r[4], r[5]),
                _mm256_unpackhi_ps(r[4], r[5]),
                _mm256_unpacklo_ps(r[6], r[7]),
                _mm256_unpackhi_ps(r[6], r[7]),
            ];
            let u = [
                _mm256_shuffle_ps::<0x44>(t[0], t[2]),
                _mm256_shuffle_ps::<0xEE>(t[0], t[2]),
                _mm256_shuffle_ps::<0x44>(t[1], t[3]),
                _mm256_shuffle_ps::<0xEE>(t[1], t[3]),
                _mm256_shuffle_ps::<0x44>(t[4], t[6]),
                _mm256_shuffle_ps::<0xEE>(t[4], t[6]),
                _mm256_shuffle_ps::<0x44>(t[5], t[7]),
                _mm256_shuffle_ps::<0xEE>(t[5], t[7]),
            ];
            [
                _mm256_permute2f128_ps::<0x20>(u[0], u[4]),
                _mm256_permute2f128_ps::<0x20>(u[1], u[5]),
                _mm256_permute2f128_ps::<0x20>(u[2], u[6]),
                _mm256_permute2f128_ps::<0x20>(u[3], u[7]),
                _mm256_permute2f128_ps::<0x31>(u[0], u[4]),
                _mm256_permute2f128_ps::<0x31>(u[1], u[5]),
                _mm256_permute2f128_ps::<0x31>(u[2], u[6]),
                _mm256_permute2f128_ps::<0x31>(u[3], u[7]),
            ]
        };
        for (q, &column) in columns.iter().enumerate() {
            let at = q * to.stride;
            let out = &mut to.data[at..at + to.width];
            if to.width == 8 {
                // SAFETY: AVX, as above; `out` holds eight floats.
                unsafe { _mm256_storeu_ps(out.as_mut_ptr(), column) }
            } else {
                let mut lanes = [0.0; 8];
                // SAFETY: AVX, as above; `lanes` holds eight floats.
                unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), column) }
                out.copy_from_slice(&lanes[..to.width]);
            }
        }
    }
}
