//! The vectors the microkernel computes on, one type per [`Kernel`](crate::kernels::cpu::Kernel):
//! [`Portable`] (`wide`'s `f32x8`, whose instructions are chosen when the crate is compiled),
//! and on x86 [`Avx2`] (256-bit AVX2 with FMA) and [`Avx512`] (512-bit AVX-512F), whose
//! instructions are fixed whatever the build's target features.
//!
//! The GEMM is generic over [`Vector`]; every function between a kernel's entry point and
//! these methods is `#[inline(always)]`, so the whole microkernel is compiled inside that
//! entry point, which carries `#[target_feature]` for the x86 kernels.
//!
//! # Safety of the x86 types
//!
//! [`Avx2`] and [`Avx512`] call `core::arch` intrinsics that need their instruction set. Their
//! methods may only run on a CPU that has it: they are reached only through the kernel entry
//! points of [`gemm`](super), which run a kernel after
//! [`Kernel::available`](crate::kernels::cpu::Kernel::available) said the CPU has it. The
//! types are private to the GEMM, so no other code can reach them.

use crate::kernels::simd;
use wide::f32x8;

/// The most lanes of any [`Vector`]: the length of the arrays that hold one vector's values.
pub(super) const MAX_LANES: usize = 16;

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

/// An `f32` vector of [`LANES`](Vector::LANES) lanes and the operations the microkernel needs.
pub(super) trait Vector: Copy {
    /// `f32` lanes, at most [`MAX_LANES`].
    const LANES: usize;

    /// All lanes zero.
    fn zero() -> Self;

    /// All lanes `x`.
    fn splat(x: f32) -> Self;

    /// The first [`LANES`](Vector::LANES) values of `s`.
    ///
    /// # Panics
    /// If `s` is shorter.
    fn load(s: &[f32]) -> Self;

    /// Stores the lanes into the first [`LANES`](Vector::LANES) values of `s`.
    ///
    /// # Panics
    /// If `s` is shorter.
    fn store(self, s: &mut [f32]);

    /// `self * b + c`: rounded once where the instruction set has FMA, as the kernel's
    /// documentation says.
    fn mul_add(self, b: Self, c: Self) -> Self;

    /// `self * b`, lane by lane.
    fn mul(self, b: Self) -> Self;

    /// Transposes the 8x8 block `from` into `to`: column `q` of the block becomes run `q` of
    /// the panel. In the instruction set of the vector's kernel, so that packing runs on it too.
    fn transpose8(from: Block8<'_>, to: Panel8<'_>);

    /// The first `min(s.len(), LANES)` values of `s`, zero in the other lanes.
    #[inline(always)]
    fn load_padded(s: &[f32]) -> Self {
        if s.len() >= Self::LANES {
            return Self::load(s);
        }
        let mut a = [0.0; MAX_LANES];
        for (j, d) in a.iter_mut().enumerate() {
            if j < s.len() {
                *d = s[j];
            }
        }
        Self::load(&a)
    }

    /// Stores the first `min(s.len(), LANES)` lanes into `s`.
    #[inline(always)]
    fn store_partial(self, s: &mut [f32]) {
        if s.len() >= Self::LANES {
            return self.store(s);
        }
        let mut a = [0.0; MAX_LANES];
        self.store(&mut a);
        for (j, d) in s.iter_mut().enumerate() {
            *d = a[j];
        }
    }
}

/// `wide`'s [`f32x8`]: SSE2 on x86_64 by default, AVX (with FMA) under `-C target-cpu` that
/// enables them, NEON on aarch64, scalar code elsewhere. `mul_add` rounds once where the build
/// enables FMA (or NEON), twice otherwise.
#[derive(Clone, Copy, Debug)]
pub(super) struct Portable(f32x8);

impl Vector for Portable {
    const LANES: usize = 8;

    #[inline(always)]
    fn zero() -> Self {
        Portable(f32x8::ZERO)
    }

    #[inline(always)]
    fn splat(x: f32) -> Self {
        Portable(f32x8::splat(x))
    }

    #[inline(always)]
    fn load(s: &[f32]) -> Self {
        Portable(simd::load(s))
    }

    #[inline(always)]
    fn store(self, s: &mut [f32]) {
        simd::store(s, self.0);
    }

    #[inline(always)]
    fn mul_add(self, b: Self, c: Self) -> Self {
        Portable(self.0.mul_add(b.0, c.0))
    }

    #[inline(always)]
    fn mul(self, b: Self) -> Self {
        Portable(self.0 * b.0)
    }

    #[inline(always)]
    fn transpose8(from: Block8<'_>, to: Panel8<'_>) {
        let mut v = [f32x8::ZERO; 8];
        for (i, x) in v.iter_mut().enumerate().take(from.rows) {
            *x = simd::load(&from.data[i * from.stride..]);
        }
        for (q, &column) in f32x8::transpose(v).iter().enumerate() {
            // A store of a whole lane, or a guarded one for the last few columns: a copy of
            // unknown length would be a call to `memmove`.
            let at = q * to.stride;
            simd::store_partial(&mut to.data[at..at + to.width], column);
        }
    }
}

#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
pub(super) use x86::{Avx2, Avx512};

#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
mod x86 {
    //! The x86 vectors. Every `unsafe` block below calls an intrinsic of the type's instruction
    //! set, which the module docs of `vector` show the CPU has whenever these methods run; the
    //! loads and stores check the slice's length first.

    use super::{Block8, Panel8, Vector};
    #[cfg(target_arch = "x86")]
    use core::arch::x86::*;
    #[cfg(target_arch = "x86_64")]
    use core::arch::x86_64::*;

    /// An x86 vector type over the register `$reg` of `$lanes` lanes, whose methods call the
    /// intrinsics given for them.
    macro_rules! x86_vector {
        (
            $(#[$doc:meta])*
            $name:ident($reg:ty), $lanes:literal,
            $zero:ident, $splat:ident, $load:ident, $store:ident, $fmadd:ident, $mul:ident
        ) => {
            $(#[$doc])*
            #[derive(Clone, Copy, Debug)]
            pub(in crate::kernels::gemm) struct $name($reg);

            impl Vector for $name {
                const LANES: usize = $lanes;

                #[inline(always)]
                fn zero() -> Self {
                    // SAFETY: the instruction set this type's kernel checked for.
                    $name(unsafe { $zero() })
                }

                #[inline(always)]
                fn splat(x: f32) -> Self {
                    // SAFETY: the instruction set this type's kernel checked for.
                    $name(unsafe { $splat(x) })
                }

                #[inline(always)]
                fn load(s: &[f32]) -> Self {
                    let s = &s[..$lanes];
                    // SAFETY: as above; `s` holds a whole vector.
                    $name(unsafe { $load(s.as_ptr()) })
                }

                #[inline(always)]
                fn store(self, s: &mut [f32]) {
                    let s = &mut s[..$lanes];
                    // SAFETY: as above; `s` holds a whole vector.
                    unsafe { $store(s.as_mut_ptr(), self.0) }
                }

                #[inline(always)]
                fn mul_add(self, b: Self, c: Self) -> Self {
                    // SAFETY: the instruction set this type's kernel checked for.
                    $name(unsafe { $fmadd(self.0, b.0, c.0) })
                }

                #[inline(always)]
                fn mul(self, b: Self) -> Self {
                    // SAFETY: the instruction set this type's kernel checked for.
                    $name(unsafe { $mul(self.0, b.0) })
                }

                #[inline(always)]
                fn transpose8(from: Block8<'_>, to: Panel8<'_>) {
                    transpose8_avx(from, to);
                }
            }
        };
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

    x86_vector!(
        /// Eight lanes of 256-bit AVX2, `mul_add` fused (FMA3: one rounding).
        Avx2(__m256), 8,
        _mm256_setzero_ps, _mm256_set1_ps, _mm256_loadu_ps, _mm256_storeu_ps,
        _mm256_fmadd_ps, _mm256_mul_ps
    );

    x86_vector!(
        /// Sixteen lanes of 512-bit AVX-512F, `mul_add` fused (one rounding).
        Avx512(__m512), 16,
        _mm512_setzero_ps, _mm512_set1_ps, _mm512_loadu_ps, _mm512_storeu_ps,
        _mm512_fmadd_ps, _mm512_mul_ps
    );
}
