//! Strided single-precision matrix multiply, `C = alpha * A·B + beta * C`, without allocation.
//!
//! Dense layers and convolutions (through im2col) need `X·W`, `Xᵀ·dY` and `dY·Wᵀ` inside a
//! train step that must not allocate and must give the same bits for any number of threads.
//! Each operand is a [`MatRef`] (or [`MatMut`] for `C`) with a row stride and a column stride,
//! so a transposed operand is the same slice with its strides swapped ([`MatRef::t`]); the
//! packing buffers come from the caller, sized once with [`workspace_len`].
//!
//! ```
//! use fusegraph_runtime::kernels::gemm::{gemm, workspace_len, MatMut, MatRef};
//!
//! // X (2x3) · W (3x2), written into Y (2x2).
//! let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
//! let w = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0];
//! let mut y = [f32::NAN; 4]; // beta = 0 overwrites whatever C holds
//! let mut ws = [0.0; 256];
//! assert!(workspace_len(2, 3, 2) <= ws.len());
//! gemm(
//!     1.0,
//!     MatRef::row_major(&x, 2, 3),
//!     MatRef::row_major(&w, 3, 2),
//!     0.0,
//!     MatMut::row_major(&mut y, 2, 2),
//!     &mut ws,
//! );
//! assert_eq!(y, [4.0, 5.0, 10.0, 11.0]);
//!
//! // Xᵀ (3x2) · Y (2x2): the transpose is a view, nothing is copied.
//! let mut g = [0.0; 6];
//! gemm(
//!     1.0,
//!     MatRef::row_major(&x, 2, 3).t(),
//!     MatRef::row_major(&y, 2, 2),
//!     0.0,
//!     MatMut::row_major(&mut g, 3, 2),
//!     &mut ws,
//! );
//! assert_eq!(g, [44.0, 49.0, 58.0, 65.0, 72.0, 81.0]);
//! ```
//!
//! # How it computes
//!
//! BLIS-style: for each block of `NC` columns of `C` and each block of at most [`KC`] of the
//! `k` dimension, `B` is packed into `nr`-column micro-panels; for each block of `MC` rows,
//! `A` is packed into `mr`-row micro-panels; a register-blocked microkernel then computes each
//! `mr`x`nr` tile of `C` in `mr * nr / lanes` vector accumulators with `mul_add`, and writes it
//! back (rows as vectors, or columns gathered into vectors when `C` is column-major). Panels
//! are zero-padded to full tiles, so edge tiles run the same microkernel and only their valid
//! part is written back. The vectors are the [`Capability`]'s: the microkernel and the packing
//! are compiled for `wide`'s `f32x8`, for AVX2 with FMA and for AVX-512F, and
//! [`Capability::active`] picks one per process from what the CPU has (see [`Capability`]).
//! A kernel may have more than one tile: AVX-512F has 12x32 ([`tile`]) and 16x16.
//! On a target without SIMD registers (a microcontroller), where the portable lanes are one
//! `f32`, the product runs on 4x4 tiles of scalar accumulators that read `A` and `B` where they
//! are, without packing or workspace (`scalar.rs`): 16 accumulators, 4 values of `B` and one
//! of `A` fit the 32 single-precision registers of a Cortex-M4F.
//! Two shortcuts skip packing where it does not pay: when `B` spans fewer than
//! [`PACK_A_MIN_PANELS`] panels, the microkernel reads `A` where it is; and products of at
//! most [`SMALL_MACS`] multiply-adds with at most `nr` columns (the tiny models) skip the
//! blocking loops and run [`SMALL_MR`] rows at a time against one packed `B` panel. Each
//! product is computed either as is or transposed (`Cᵀ = Bᵀ·Aᵀ`), on one of its kernel's
//! tiles, whichever a cost estimate of padded tiles, loads, packing and write-back finds
//! cheaper: `X (256x128) · W (128x10)`, say,
//! becomes ten rows of 6x16 tiles instead of 256 rows against a 16-wide panel that is 6/16
//! padding. Products that share their `B` (a recurrent layer's weight, at every time step) can
//! pack it once ([`pack_b`]) and run on the packed panels ([`gemm_packed`]).
//!
//! # Determinism
//!
//! On one kernel, every element of `C` is computed by the same sequence of lane operations,
//! whatever its position, the path, the orientation, the blocking of `m` and `n` or the number
//! of threads: the `k` dimension is cut into blocks by a rule that depends on `k` alone
//! ([`KC`]); in each block the element's accumulator starts at zero and takes one
//! `mul_add(a[i][p], b[p][j], acc)` per `p` in increasing order (the product of two floats
//! does not depend on their order, so the transposed orientation gives the same bits); then
//! `C` becomes `alpha * acc + beta * C` for the first block (`alpha * acc` if `beta == 0`) and
//! `alpha * acc + C` for the following ones. `k` is never split across threads. So results are
//! bit-identical for 1 and N threads, and the choices above, which depend only on the kernel,
//! the shape and the strides of `C`, change speed, never bits. Kernels whose `mul_add` rounds
//! once give the same bits as each other, and so do those that round it twice:
//!
//! | `mul_add` | builds |
//! |---|---|
//! | rounded once | AVX2+FMA and AVX-512F (the default x86_64 build with `std` on a CPU that has them); `f32x8` where the build enables FMA (`-C target-cpu=native` on such a CPU) or NEON (aarch64); the scalar tiles with `--cfg fusegraph_core_fma` (`vfma.f32` on a Cortex-M4F, M7 or M33) |
//! | rounded twice | `f32x8` without FMA: the default x86_64 build on a CPU without AVX2, with `FUSEGRAPH_CPU_CAPABILITY=portable`, or without `std` (no detection, SSE2); the scalar tiles without `fusegraph_core_fma` (the Cortex-M0+, RISC-V without the F extension, a Cortex-M4F built on stable Rust) |
//!
//! So the Cortex-M4F firmware of `embedded/firmware`, which sets `fusegraph_core_fma`, gives
//! the bits of the host's default build on a CPU with FMA (`FUSEGRAPH_CPU_CAPABILITY=avx2`
//! pins them on any AVX2 machine). Stable Rust has no fused multiply-add in `no_std` code (core's
//! `f32::mul_add` is the unstable `core_float_math`), and its inline assembly cannot name the
//! single-precision registers of a Cortex-M4F (the `sreg` class needs `vfp2`, which implies
//! double precision), hence the opt-in `cfg` for toolchains that allow it (`RUSTC_BOOTSTRAP=1`,
//! as the firmware's build of `core` from source needs anyway).
//!
//! # Parallelism
//!
//! With the `parallel` feature, a product of at least [`PARALLEL_FLOPS`] floating-point
//! operations is split along the outer dimension of `C` (the rows of a row-major `C`) into as
//! many pieces as the rayon pool has threads and the workspace has room for, by recursive
//! `rayon::join` (which does not allocate). Each piece packs its own panels in its own part of
//! the workspace (so `B` is packed once per piece). Smaller products never touch the pool.
//!
//! # Performance
//!
//! The tile is 6x16 (12 accumulators) on AVX2, and on `f32x8` when the build enables AVX
//! (8x16, 12x16, 4x24, 8x24 and 6x32 measured no faster on Zen 4); 4x8 on `f32x8` without
//! AVX; 12x32 (24 of the 32 registers) on AVX-512F, with 16x16 for products 16 columns wide
//! (a 12x32 tile would be half padding; 8x16 and 12x16 measured slower on Zen 5, 24x16 spills).
//! On one Zen 5 core (two 512-bit `mul_add` a cycle) the AVX-512F kernel runs the MLP's
//! 784x128 products at 178-204 GFLOP/s, 1.00-1.05x the rate of `matrixmultiply` at batch 256
//! in the same run of `bench_gemm` (two products whose `k` or `n` is 10 stay at 0.4-0.5x at
//! batch 32), and a 5x5 convolution of one channel into 16 (36864x25 by 25x16) inside W4 at
//! 93, where the 12x32 tile alone ran it at 25 (`bench_train w4 products`). On one Zen 4 core
//! the 6x16 microkernel runs at about 98% of the `mul_add` peak (114 GFLOP/s); the 784x128
//! products of the MLP 784-128-10 train step reach 90-105 GFLOP/s whole, packing included, in
//! a default build as in a native one. `examples/bench_gemm.rs` compares the kernels with
//! each other and with `matrixmultiply`, `gemm` and a triple loop.
//!
//! On a Cortex-M4F (QEMU's `mps2-an386`, instructions counted by `embedded/firmware/scripts/
//! instructions.py`), the five products of a train step of the embedded 8-16-4 demo at batch 8
//! (7,168 floating-point operations) take about 15,400 instructions on the scalar tiles with
//! `vfma.f32`, 2.1 per operation (the inner loop 1.2), where the `f32x8` microkernel emulated
//! in scalar registers took 26,000 (and 24 KB of flash against 6 KB).

mod micro;
mod scalar;
#[cfg(test)]
pub(crate) mod tests;
mod vector;
mod view;

pub use micro::KC;
pub use view::{MatMut, MatRef};

use view::Terms;

use super::parallel::join;
pub use super::parallel::pool_threads;
use crate::lane::{Capability, Lane};
use micro::{kc_max, Blocking};
use vector::{Portable, Vector};

/// The register tile of a kernel's microkernel and its cache blocking.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tile {
    /// Rows of a tile (the height of a packed `A` micro-panel).
    pub mr: usize,
    /// Columns of a tile (the width of a packed `B` micro-panel): `lanes * vectors`.
    pub nr: usize,
    /// `f32` lanes of the kernel's vector.
    pub lanes: usize,
    /// Rows of `A` packed at once (a multiple of `mr`): an `mc`x[`KC`] block stays in L2.
    pub mc: usize,
    /// Columns of `B` packed at once (a multiple of `nr`): a [`KC`]x`nc` block stays in L2/L3.
    pub nc: usize,
}

impl Tile {
    /// The cache blocking of the packed path.
    const fn blocking(self) -> Blocking {
        Blocking {
            mc: self.mc,
            nc: self.nc,
        }
    }
}

/// `f32` lanes of a [`Capability::Portable`] vector: 8, or 1 on a target without SIMD.
const PORTABLE_LANES: usize = <Portable as Lane>::LANES;
/// Rows of a [`Capability::Portable`] tile: 6 where `f32x8` is one AVX register, 4 otherwise.
const PORTABLE_MR: usize = if cfg!(target_feature = "avx") { 6 } else { 4 };
/// Vectors across a [`Capability::Portable`] tile: two `f32x8` with AVX, one without; four
/// scalars on a target without SIMD (a 4x4 tile: 16 accumulators, 4 values of `B` and one of
/// `A` in the 32 single-precision registers of a Cortex-M4F, no spills).
const PORTABLE_NV: usize = if cfg!(target_feature = "avx") {
    2
} else if PORTABLE_LANES == 1 {
    4
} else {
    1
};
/// Rows of a [`Capability::Avx2Fma`] tile (12 `__m256` accumulators of the 16 registers).
const AVX2_MR: usize = 6;
/// Rows of a [`Capability::Avx512`] tile (24 `__m512` accumulators of the 32 registers).
const AVX512_MR: usize = 12;
/// Rows of the AVX-512 kernel's tile one vector wide (16 accumulators).
const AVX512_NARROW_MR: usize = 16;

// A product on a packed `B` packs a tile's rows of `A` into room for the tallest tile.
const _: () = assert!(
    PORTABLE_MR <= micro::MAX_MR
        && AVX2_MR <= micro::MAX_MR
        && AVX512_MR <= micro::MAX_MR
        && AVX512_NARROW_MR <= micro::MAX_MR
);

/// A microkernel: the vectors it computes on and its register tile. A [`Capability`] runs one or
/// more ([`micros`]), all with the same roundings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Micro {
    /// `wide`'s `f32x8`: 6x16 with AVX, 4x8 without.
    Portable,
    /// AVX2 with FMA, 6x16.
    Avx2,
    /// AVX-512F, 12x32.
    Avx512,
    /// AVX-512F, one vector wide, for products of 16 columns or fewer.
    Avx512Narrow,
}

impl Micro {
    /// The register tile and cache blocking.
    const fn tile(self) -> Tile {
        match self {
            Micro::Portable => Tile {
                mr: PORTABLE_MR,
                nr: PORTABLE_LANES * PORTABLE_NV,
                lanes: PORTABLE_LANES,
                mc: PORTABLE_MR * 32,
                nc: PORTABLE_LANES * PORTABLE_NV * 64,
            },
            Micro::Avx2 => Tile {
                mr: AVX2_MR,
                nr: 16,
                lanes: 8,
                mc: AVX2_MR * 32,
                nc: 16 * 64,
            },
            // The caches do not grow with the registers: the blocks of the AVX2 tile, in
            // whole tiles of this one.
            Micro::Avx512 => Tile {
                mr: AVX512_MR,
                nr: 32,
                lanes: 16,
                mc: AVX512_MR * 16,
                nc: 32 * 32,
            },
            Micro::Avx512Narrow => Tile {
                mr: AVX512_NARROW_MR,
                nr: 16,
                lanes: 16,
                mc: AVX512_NARROW_MR * 16,
                nc: 16 * 64,
            },
        }
    }
}

/// The microkernels a product on `kernel` may run on, the kernel's own first. The AVX-512
/// kernel adds a tile one vector wide, which a product 16 columns wide fills where the 12x32
/// tile would be half padding.
const fn micros(kernel: Capability) -> &'static [Micro] {
    match kernel {
        Capability::Portable => &[Micro::Portable],
        Capability::Avx2Fma => &[Micro::Avx2],
        Capability::Avx512 => &[Micro::Avx512, Micro::Avx512Narrow],
    }
}

/// The tile of `kernel`'s own microkernel.
pub const fn tile(kernel: Capability) -> Tile {
    micros(kernel)[0].tile()
}

/// The kernels a product of this build may run on, which the workspace is sized for: every
/// kernel where the CPU is asked at run time (x86 with `std`), the compiled one elsewhere.
const CANDIDATES: &[Capability] = if cfg!(all(
    feature = "std",
    any(target_arch = "x86", target_arch = "x86_64")
)) {
    &Capability::ALL
} else {
    &[Capability::compiled()]
};

/// Products of at least this many floating-point operations (`2 * m * k * n`) are split across
/// the rayon pool (feature `parallel`); smaller ones never touch it. Set from `bench_train`'s
/// two-thread table (the MLP 784-128-10 on two Zen 4 cores), where the pool's workers fall
/// asleep between products and the optimizer pass then reads the gradients from the other
/// core's cache: at 2^21 (the crossover of back-to-back products in `bench_gemm`) the step at
/// batch 32 ran 1.4x slower on two threads than on one (264 against 183 us); at 2^24 its
/// products (12.8 MFLOP at batch 64 and below) stay on one thread and it runs as fast as on
/// one (180 against 187 us), while the step at batch 256 is still split and faster on two.
pub const PARALLEL_FLOPS: usize = 1 << 24;

/// Rows of `C` per tile on the small path (a tile's `nr` or fewer columns, `k <= KC`).
pub const SMALL_MR: usize = 4;

/// Products of at most this many multiply-adds (`m * k * n`) with at most a tile's `nr`
/// columns (in the orientation computed) and `k <= KC` take the small path: no blocking, one
/// packed `B` panel, `A` read where it is.
pub const SMALL_MACS: usize = 4096;

/// `A` is packed only when `B` (in the orientation computed) spans at least this many
/// `nr`-column panels, each of which reuses every packed `A` panel; below, the microkernel
/// reads `A` where it is, which skips the packing cost of skinny and tiny products.
pub const PACK_A_MIN_PANELS: usize = 3;

/// How a product is computed. The choice depends on the kernel, the shape and the strides of
/// `C` only (never on threads or values), and changes no bits.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Plan {
    /// The microkernel, one of the kernel's [`micros`].
    micro: Micro,
    /// Compute `Cᵀ = Bᵀ·Aᵀ` instead.
    transpose: bool,
    /// How the product (in the orientation computed) runs.
    path: Path,
}

/// How a product runs, in the orientation computed.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Path {
    /// At most [`SMALL_MACS`] multiply-adds, `n <= nr`, `k <= KC`: one packed `B` panel, `A`
    /// read where it is, [`SMALL_MR`] rows at a time ([`micro::small`]).
    Small,
    /// The blocked product ([`micro::packed`]); `A` is packed or read where it is.
    Packed {
        /// Pack `A` (see [`PACK_A_MIN_PANELS`]).
        pack_a: bool,
    },
}

/// The path of an `m`x`k`x`n` product computed as is with tile `t`.
const fn path(m: usize, k: usize, n: usize, t: Tile) -> Path {
    if n <= t.nr && k <= KC && m.saturating_mul(k).saturating_mul(n) <= SMALL_MACS {
        Path::Small
    } else {
        Path::Packed {
            pack_a: n.div_ceil(t.nr) >= PACK_A_MIN_PANELS,
        }
    }
}

/// Estimated cost of an `m`x`k`x`n` product computed as is with tile `t`, whose `C` has
/// `c_strides`, in sixteenths of a cycle of one Zen 4 core (as `bench_gemm` measures it):
/// multiply-adds over padded tiles (16 per cycle, but at least 4 cycles of `mul_add` latency
/// per step of `k`; 10% more with an unpacked `A`, read eight rows at a time, as measured on
/// Zen 5), plus 3/8 of a cycle per load of a step of
/// `k` (one per row of the tile, one per vector of `B`: a tile one vector wide loads more per
/// multiply-add than a wider one), half a cycle per packed float, and per
/// element of `C` and block of `k` a write-back that costs 1/8 of a cycle along rows, 0.7
/// through the transpose when `C` is column-major, and a cycle otherwise. Only comparisons
/// matter.
fn cost(m: usize, k: usize, n: usize, c_strides: (usize, usize), t: Tile) -> usize {
    let path = path(m, k, n, t);
    let (rows, cols, pack_a) = match path {
        Path::Small => (SMALL_MR, small_width(n, t), false),
        Path::Packed { pack_a } => (t.mr, t.nr, pack_a),
    };
    let compute = tiles_compute(m, k, n, (rows, cols), t.lanes);
    let compute = match path {
        Path::Packed { pack_a: false } => compute / 10 * 11,
        _ => compute,
    };
    let a_packed = if pack_a { m } else { 0 };
    let pack = (a_packed + n) * k * 8;
    let write_each = if c_strides.1 == 1 {
        2
    } else if c_strides.0 == 1 {
        11
    } else {
        16
    };
    let write = m * n * k.div_ceil(KC) * write_each;
    compute + pack + write
}

/// The compute and load terms of [`cost`] for `m`x`k`x`n` on tiles of `rows`x`cols` (vectors of
/// `lanes`): a tile takes `rows * cols / 8 / 2` cycles per step of `k`, at least the 4 cycles of
/// latency of the chain of `mul_add`s, and its loads (in sixteenths of a cycle).
const fn tiles_compute(
    m: usize,
    k: usize,
    n: usize,
    (rows, cols): (usize, usize),
    lanes: usize,
) -> usize {
    let tiles = m.div_ceil(rows) * n.div_ceil(cols);
    let loads = rows + cols.div_ceil(lanes);
    tiles * k * (max(rows * cols, 64) + 6 * loads)
}

/// Columns of a small-path tile for `n` columns: one vector when it holds them, else `nr`.
const fn small_width(n: usize, t: Tile) -> usize {
    if n <= t.lanes {
        t.lanes
    } else {
        t.nr
    }
}

impl Plan {
    /// The microkernel of `kernel` and the orientation (`C`, or `Cᵀ = Bᵀ·Aᵀ`) that [`cost`]
    /// estimates cheapest for an `m`x`k`x`n` product whose `C` has strides `(c_rs, c_cs)`; on
    /// a tie, the kernel's own microkernel and `C` as it is. The scalar tiles of a target
    /// without SIMD have one plan: they read every operand where it is, in any orientation.
    fn new(kernel: Capability, m: usize, k: usize, n: usize, (c_rs, c_cs): (usize, usize)) -> Plan {
        if kernel == Capability::Portable && PORTABLE_LANES == 1 {
            return Plan {
                micro: Micro::Portable,
                transpose: false,
                path: path(m, k, n, Micro::Portable.tile()),
            };
        }
        let mut best: Option<(usize, Plan)> = None;
        for &micro in micros(kernel) {
            let t = micro.tile();
            for transpose in [false, true] {
                let (m, n, strides) = if transpose {
                    (n, m, (c_cs, c_rs))
                } else {
                    (m, n, (c_rs, c_cs))
                };
                let estimate = cost(m, k, n, strides, t);
                if best.is_none_or(|(least, _)| estimate < least) {
                    let path = path(m, k, n, t);
                    let plan = Plan {
                        micro,
                        transpose,
                        path,
                    };
                    best = Some((estimate, plan));
                }
            }
        }
        best.expect("every kernel has a microkernel").1
    }
}

/// Workspace of one piece of an `m`x`k`x`n` product computed as is with tile `t`.
const fn piece_len(m: usize, k: usize, n: usize, t: Tile) -> usize {
    let blk = t.blocking();
    match path(m, k, n, t) {
        Path::Small => k * t.nr,
        Path::Packed { pack_a } => {
            let a = if pack_a {
                min(m, blk.mc).div_ceil(t.mr) * t.mr
            } else {
                0
            };
            (a + min(n, blk.nc).div_ceil(t.nr) * t.nr) * kc_max(k)
        }
    }
}

const fn min(a: usize, b: usize) -> usize {
    if a < b {
        a
    } else {
        b
    }
}

/// The larger of two sizes, in constants.
pub(crate) const fn max(a: usize, b: usize) -> usize {
    if a > b {
        a
    } else {
        b
    }
}

/// Workspace of one piece, whichever way the product is computed, on any microkernel of the
/// [`CANDIDATES`]; none where the only one is the scalar tiles of a target without SIMD, which
/// pack nothing.
const fn piece_len_any(m: usize, k: usize, n: usize) -> usize {
    if PORTABLE_LANES == 1 && CANDIDATES.len() == 1 {
        return 0;
    }
    let (tiles, count) = CANDIDATE_TILES;
    let mut most = 0;
    let mut i = 0;
    while i < count {
        let t = tiles[i];
        most = max(most, max(piece_len(m, k, n, t), piece_len(n, k, m, t)));
        i += 1;
    }
    most
}

/// At least [`piece_len_any`]`(m, k, n)`, without a division by a tile's size: each packed
/// block rounded up by the largest tile instead of its own (the small path's `k * nr` is
/// within it too, since `kc_max(k) = k` there).
const fn piece_len_bound(m: usize, k: usize, n: usize) -> usize {
    let (most, [mr, nr, mc, nc]) = (max(m, n), LARGEST_TILE);
    (min(most, mc) + mr + min(most, nc) + nr) * kc_max(k)
}

/// The largest `mr`, `nr`, `mc` and `nc` of the [`CANDIDATE_TILES`].
const LARGEST_TILE: [usize; 4] = {
    let (tiles, count) = CANDIDATE_TILES;
    let mut most = [0; 4];
    let mut i = 0;
    while i < count {
        let t = tiles[i];
        most = [
            max(most[0], t.mr),
            max(most[1], t.nr),
            max(most[2], t.mc),
            max(most[3], t.nc),
        ];
        i += 1;
    }
    most
};

/// The tiles of every microkernel of the [`CANDIDATES`], and how many there are.
const CANDIDATE_TILES: ([Tile; 4], usize) = {
    let mut tiles = [Micro::Portable.tile(); 4];
    let (mut count, mut i) = (0, 0);
    while i < CANDIDATES.len() {
        let kernel_micros = micros(CANDIDATES[i]);
        let mut j = 0;
        while j < kernel_micros.len() {
            tiles[count] = kernel_micros[j].tile();
            count += 1;
            j += 1;
        }
        i += 1;
    }
    (tiles, count)
};

/// Whether a product is large enough to split across threads.
const fn wants_threads(m: usize, k: usize, n: usize) -> bool {
    2usize.saturating_mul(m).saturating_mul(k).saturating_mul(n) >= PARALLEL_FLOPS
}

/// Length of the workspace [`gemm`] needs for an `m`x`k` by `k`x`n` product, using up to
/// `threads` threads (products below [`PARALLEL_FLOPS`] use one whatever `threads` says).
///
/// A workspace with room for fewer pieces than the pool has threads is not an error: the
/// product is then split into as many pieces as fit.
pub const fn workspace_len_threads(m: usize, k: usize, n: usize, threads: usize) -> usize {
    let pieces = if wants_threads(m, k, n) {
        max(threads, 1)
    } else {
        1
    };
    piece_len_any(m, k, n) * pieces
}

/// Which dimension of a [`Product`] grows with the batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scaled {
    /// The rows of `A` and `C`.
    M,
    /// The inner dimension.
    K,
    /// The columns of `B` and `C`.
    N,
}

/// A matrix product a layer computes, `m`x`k` by `k`x`n`, with the dimension that is
/// multiplied by the batch given per sample: layers declare them so that the GEMM workspace
/// of a model is a constant of its type and its batch (see [`products_workspace_len`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Product {
    /// Rows of `A` (per sample if [`scaled`](Self::scaled) is [`Scaled::M`]).
    pub m: usize,
    /// The inner dimension (per sample if [`Scaled::K`]).
    pub k: usize,
    /// Columns of `B` (per sample if [`Scaled::N`]).
    pub n: usize,
    /// The dimension that grows with the batch.
    pub scaled: Scaled,
}

impl Product {
    /// A placeholder, for building tables in constants.
    pub const NONE: Product = Product {
        m: 0,
        k: 0,
        n: 0,
        scaled: Scaled::M,
    };

    /// The product's `(m, k, n)` for `batch` samples.
    pub const fn dims(&self, batch: usize) -> (usize, usize, usize) {
        match self.scaled {
            Scaled::M => (self.m * batch, self.k, self.n),
            Scaled::K => (self.m, self.k * batch, self.n),
            Scaled::N => (self.m, self.k, self.n * batch),
        }
    }
}

/// The workspace of the largest of `products` for `batch` samples on `threads` threads.
///
/// ```
/// use fusegraph_runtime::kernels::gemm::{products_workspace_len, workspace_len_threads, Product, Scaled};
/// let p = [Product { m: 1, k: 64, n: 128, scaled: Scaled::M }];
/// assert_eq!(products_workspace_len(&p, 32, 1), workspace_len_threads(32, 64, 128, 1));
/// ```
pub const fn products_workspace_len(products: &[Product], batch: usize, threads: usize) -> usize {
    let mut most = 0;
    let mut i = 0;
    while i < products.len() {
        let (m, k, n) = products[i].dims(batch);
        most = max(most, workspace_len_threads(m, k, n, threads));
        i += 1;
    }
    most
}

/// Length of the workspace [`gemm`] needs for an `m`x`k` by `k`x`n` product: enough to use
/// every thread of the current rayon pool (feature `parallel`), one thread otherwise. Allocate
/// it once, beside the buffers the product reads and writes.
pub fn workspace_len(m: usize, k: usize, n: usize) -> usize {
    workspace_len_threads(m, k, n, pool_threads())
}

/// `C = alpha * A·B + beta * C` for an `m`x`k` matrix `A`, a `k`x`n` matrix `B` and an
/// `m`x`n` matrix `C`.
///
/// With `beta == 0`, `C` is overwritten without being read (NaN in `C` does not propagate);
/// with `alpha == 0` or `k == 0`, `A` and `B` are not read and `C` becomes `beta * C`. The
/// result is bit-identical for any number of threads (see the [module docs](self)).
///
/// `workspace` holds the packed panels: [`workspace_len`]`(m, k, n)` is enough; a longer one
/// is fine. The call does not allocate. It runs on [`Capability::active`].
///
/// # Panics
/// If the shapes disagree (`A.cols != B.rows`, or `C` is not `A.rows`x`B.cols`) or the
/// workspace is shorter than [`workspace_len_threads`]`(m, k, n, 1)`: both are bugs in the
/// caller, who sizes everything once at construction.
pub fn gemm(
    alpha: f32,
    a: MatRef<'_>,
    b: MatRef<'_>,
    beta: f32,
    c: MatMut<'_>,
    workspace: &mut [f32],
) {
    gemm_on(Capability::active(), alpha, a, b, beta, c, workspace);
}

/// [`gemm`] on the given kernel: for benchmarks that compare kernels in one run, and for
/// tests. Each kernel gives its own bits (see [`Capability`]).
///
/// # Panics
/// As [`gemm`], and if the kernel is not [`available`](Capability::available).
pub fn gemm_on(
    kernel: Capability,
    alpha: f32,
    a: MatRef<'_>,
    b: MatRef<'_>,
    beta: f32,
    c: MatMut<'_>,
    workspace: &mut [f32],
) {
    assert!(
        kernel.available(),
        "gemm_on: the {kernel} kernel does not run on this CPU or build"
    );
    let (m, k, n) = (a.rows, a.cols, b.cols);
    check_shapes("gemm", (m, k, n), b.rows, &c);
    // The exact need divides by the size of every tile; it is computed only where the
    // workspace may be short of it, or where it cuts the workspace into pieces.
    let need = if wants_threads(m, k, n) || workspace.len() < piece_len_bound(m, k, n) {
        piece_len_any(m, k, n)
    } else {
        0
    };
    assert!(
        workspace.len() >= need,
        "gemm: the workspace holds {} floats, a {m}x{k}x{n} product needs {need} \
         (size it with workspace_len)",
        workspace.len()
    );
    let Some(c) = unless_trivial(alpha, k, beta, c) else {
        return;
    };
    let plan = Plan::new(kernel, m, k, n, (c.rs, c.cs));
    let t = plan.micro.tile();
    let (a, b, c) = if plan.transpose {
        (b.t(), a.t(), c.t())
    } else {
        (a, b, c)
    };
    let (m, n) = (a.rows, b.cols);
    let outer = if c.rows_outer() { m } else { n };
    // Without room for a second piece, the pool is not even asked for its size.
    let fit = workspace.len() / need.max(1);
    let pieces = if fit >= 2 && wants_threads(m, k, n) {
        pool_threads().min(fit).min(outer.div_ceil(t.nr)).max(1)
    } else {
        1
    };
    let run = Run {
        micro: plan.micro,
        piece_len: need,
        par: true,
        blk: t.blocking(),
        path: plan.path,
    };
    split(Terms { alpha, a, b, beta }, c, workspace, pieces, run);
}

/// A right factor `B`, `k`x`n`, packed once by [`pack_b`] for the products [`gemm_packed`]
/// computes on it: a recurrent layer's weight, multiplied by the few rows of its state at
/// every time step, is packed once per call instead of once per step.
#[derive(Clone, Copy, Debug)]
pub struct PackedB<'a> {
    /// The panels, for each block of `k` in order `ceil(n / nr)` micro-panels of the tile.
    panels: &'a [f32],
    /// The microkernel they are packed for.
    micro: Micro,
    /// Rows of `B`.
    k: usize,
    /// Columns of `B`.
    n: usize,
}

impl PackedB<'_> {
    /// Rows of `B` (the inner dimension of the products).
    pub fn rows(&self) -> usize {
        self.k
    }

    /// Columns of `B` (and of `C`).
    pub fn cols(&self) -> usize {
        self.n
    }
}

/// The microkernel of `kernel` that runs `m`x`k`x`n` products on a packed `B` in the fewest
/// estimated cycles: the compute and load terms of [`cost`] ([`tiles_compute`]), and 4 cycles
/// (64 sixteenths) for each element of `C` in a tile cut by the edge of `C`, which is written
/// back one element at a time.
fn packed_micro(kernel: Capability, m: usize, k: usize, n: usize) -> Micro {
    let estimate = |micro: &&Micro| {
        let t = micro.tile();
        let compute = tiles_compute(m, k, n, (t.mr, t.nr), t.lanes);
        compute + (m % t.mr * n + n % t.nr * m) * 64
    };
    *micros(kernel)
        .iter()
        .min_by_key(estimate)
        .expect("every kernel has a microkernel")
}

/// Floats [`pack_b`] needs for a `k`x`n` matrix, on any kernel this build may run on.
pub const fn packed_b_len(k: usize, n: usize) -> usize {
    let (tiles, count) = CANDIDATE_TILES;
    let mut most = 0;
    let mut i = 0;
    while i < count {
        most = max(most, micro::whole_len(k, n, tiles[i].nr));
        i += 1;
    }
    most
}

/// Packs `b` into the front of `workspace` for products by [`gemm_packed`] whose `A` has
/// `rows` rows (which choose the tile), or `None` if `workspace` is shorter than
/// [`packed_b_len`] asks (the caller then multiplies by `b` with [`gemm`]). Runs on
/// [`Capability::active`].
pub fn pack_b<'w>(b: MatRef<'_>, rows: usize, workspace: &'w mut [f32]) -> Option<PackedB<'w>> {
    pack_b_on(Capability::active(), b, rows, workspace)
}

/// [`pack_b`] on the given kernel, for tests and benchmarks that compare kernels.
///
/// # Panics
/// If the kernel is not [`available`](Capability::available).
pub fn pack_b_on<'w>(
    kernel: Capability,
    b: MatRef<'_>,
    rows: usize,
    workspace: &'w mut [f32],
) -> Option<PackedB<'w>> {
    assert!(
        kernel.available(),
        "pack_b_on: the {kernel} kernel does not run on this CPU or build"
    );
    if workspace.len() < packed_b_len(b.rows, b.cols) {
        return None;
    }
    let micro = packed_micro(kernel, rows, b.rows, b.cols);
    let len = micro::whole_len(b.rows, b.cols, micro.tile().nr);
    let (panels, _) = workspace.split_at_mut(len);
    pack_whole_on(micro, b, panels);
    Some(PackedB {
        panels,
        micro,
        k: b.rows,
        n: b.cols,
    })
}

/// `C = alpha * A·B + beta * C` for `B` packed by [`pack_b`]: the same bits as [`gemm`] on the
/// unpacked `B`, with no packing and no workspace, on the calling thread (a caller with many
/// rows splits them across threads itself; every piece can read the same `B`).
///
/// # Panics
/// If the shapes disagree (`A.cols != B.rows`, or `C` is not `A.rows`x`B.cols`).
pub fn gemm_packed(alpha: f32, a: MatRef<'_>, b: &PackedB<'_>, beta: f32, c: MatMut<'_>) {
    check_shapes("gemm_packed", (a.rows, a.cols, b.n), b.k, &c);
    let Some(c) = unless_trivial(alpha, a.cols, beta, c) else {
        return;
    };
    multiply_packed_on(b.micro, (alpha, a, beta), b.panels, c);
}

/// Packs `b` whole on `micro` (see [`micro::pack_whole`]).
fn pack_whole_on(micro: Micro, b: MatRef<'_>, dst: &mut [f32]) {
    match micro {
        Micro::Portable => micro::pack_whole::<Portable, PORTABLE_NV>(b, dst),
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        // SAFETY: `pack_b_on` checked that the CPU has AVX2 and FMA.
        Micro::Avx2 => unsafe { x86::pack_whole_avx2(b, dst) },
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        // SAFETY: `pack_b_on` checked that the CPU has AVX-512F.
        Micro::Avx512 => unsafe { x86::pack_whole_avx512::<2>(b, dst) },
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        // SAFETY: as above.
        Micro::Avx512Narrow => unsafe { x86::pack_whole_avx512::<1>(b, dst) },
        #[cfg(not(any(target_arch = "x86", target_arch = "x86_64")))]
        Micro::Avx2 | Micro::Avx512 | Micro::Avx512Narrow => {
            unreachable!("x86 kernels are never available here")
        }
    }
}

/// A product on panels packed for `micro` (see [`micro::on_packed`]).
fn multiply_packed_on(micro: Micro, terms: (f32, MatRef<'_>, f32), panels: &[f32], c: MatMut<'_>) {
    match micro {
        Micro::Portable => {
            micro::on_packed::<Portable, PORTABLE_MR, PORTABLE_NV>(terms, panels, c);
        }
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        // SAFETY: the panels were packed for this microkernel by `pack_b_on`, which checked
        // that the CPU has AVX2 and FMA.
        Micro::Avx2 => unsafe { x86::on_packed_avx2(terms, panels, c) },
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        // SAFETY: as above, for AVX-512F.
        Micro::Avx512 => unsafe { x86::on_packed_avx512(terms, panels, c) },
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        // SAFETY: as above.
        Micro::Avx512Narrow => unsafe { x86::on_packed_avx512_narrow(terms, panels, c) },
        #[cfg(not(any(target_arch = "x86", target_arch = "x86_64")))]
        Micro::Avx2 | Micro::Avx512 | Micro::Avx512Narrow => {
            unreachable!("x86 kernels are never available here")
        }
    }
}

/// Panics, naming the function `name`, unless `B` has `k` rows (as `A` has columns) and `C`
/// is `m`x`n`, for an `m`x`k` by `k`x`n` product.
fn check_shapes(name: &str, (m, k, n): (usize, usize, usize), b_rows: usize, c: &MatMut<'_>) {
    assert_eq!(b_rows, k, "{name}: A is {m}x{k} but B has {b_rows} rows");
    assert!(
        c.rows == m && c.cols == n,
        "{name}: A·B is {m}x{n} but C is {}x{}",
        c.rows,
        c.cols
    );
}

/// `C` itself when the product must be computed; `None` once it is done without reading `A`
/// or `B`: when `C` is empty, or `alpha == 0` or `k == 0` (`C` becomes `beta * C`).
fn unless_trivial(alpha: f32, k: usize, beta: f32, c: MatMut<'_>) -> Option<MatMut<'_>> {
    if c.rows == 0 || c.cols == 0 {
        return None;
    }
    if k == 0 || alpha == 0.0 {
        micro::scale(beta, c);
        return None;
    }
    Some(c)
}

/// How the pieces of a product run.
#[derive(Clone, Copy, Debug)]
struct Run {
    /// The microkernel every piece runs on.
    micro: Micro,
    /// Workspace of one piece.
    piece_len: usize,
    /// Run the halves of each split under `rayon::join`.
    par: bool,
    /// Cache blocking of the packed path.
    blk: Blocking,
    /// The path of every piece.
    path: Path,
}

/// Runs `pieces` products, each on its own part of `C` (split along the outer dimension of `C`
/// between tiles) and its own `run.piece_len` floats of workspace.
fn split(t: Terms<'_>, c: MatMut<'_>, workspace: &mut [f32], pieces: usize, run: Run) {
    let (m, k, n) = (t.a.rows, t.a.cols, t.b.cols);
    let left = pieces / 2;
    let rows = c.rows_outer();
    let extent = if rows { m } else { n };
    // Split between tiles: rows at a multiple of both row counts in use, columns of `nr`.
    let shape = run.micro.tile();
    let step = if rows {
        lcm(shape.mr, SMALL_MR)
    } else {
        shape.nr
    };
    let mid = (extent.div_ceil(step) * left / pieces.max(1)) * step;
    if pieces <= 1 || mid == 0 || mid >= extent {
        leaf(t, c, workspace, run);
        return;
    }
    let (w0, w1) = workspace.split_at_mut(run.piece_len * left);
    let right = pieces - left;
    if rows {
        let (c0, c1) = c.split_rows(mid);
        let (a0, a1) = (t.a.sub(0, 0, mid, k), t.a.sub(mid, 0, m - mid, k));
        join(
            run.par,
            || split(Terms { a: a0, ..t }, c0, w0, left, run),
            || split(Terms { a: a1, ..t }, c1, w1, right, run),
        );
    } else {
        let (c0, c1) = c.split_cols(mid);
        let (b0, b1) = (t.b.sub(0, 0, k, mid), t.b.sub(0, mid, k, n - mid));
        join(
            run.par,
            || split(Terms { b: b0, ..t }, c0, w0, left, run),
            || split(Terms { b: b1, ..t }, c1, w1, right, run),
        );
    }
}

/// Least common multiple.
fn lcm(x: usize, y: usize) -> usize {
    let (mut a, mut b) = (x, y);
    while b != 0 {
        (a, b) = (b, a % b);
    }
    x / a * y
}

/// Runs one piece on one thread, on `run.micro`.
fn leaf(t: Terms<'_>, c: MatMut<'_>, workspace: &mut [f32], run: Run) {
    match run.micro {
        // One `f32` a lane: the scalar tiles, which need no packing.
        Micro::Portable if PORTABLE_LANES == 1 => scalar::product(t, c),
        Micro::Portable => leaf_on::<Portable, PORTABLE_MR, PORTABLE_NV>(t, c, workspace, run),
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        // SAFETY: `gemm_on` checked that the CPU has AVX2 and FMA.
        Micro::Avx2 => unsafe { x86::leaf_avx2(t, c, workspace, run) },
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        // SAFETY: `gemm_on` checked that the CPU has AVX-512F.
        Micro::Avx512 => unsafe { x86::leaf_avx512(t, c, workspace, run) },
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        // SAFETY: as above.
        Micro::Avx512Narrow => unsafe { x86::leaf_avx512_narrow(t, c, workspace, run) },
        #[cfg(not(any(target_arch = "x86", target_arch = "x86_64")))]
        Micro::Avx2 | Micro::Avx512 | Micro::Avx512Narrow => {
            unreachable!("x86 kernels are never available here")
        }
    }
}

/// One piece on the vector `S` with `R`x`LV` tiles on the packed path; compiled into each
/// kernel's entry point.
#[inline(always)]
fn leaf_on<S: Vector, const R: usize, const V: usize>(
    t: Terms<'_>,
    c: MatMut<'_>,
    workspace: &mut [f32],
    run: Run,
) {
    match run.path {
        Path::Small if t.b.cols <= S::LANES => micro::small::<S, SMALL_MR, 1>(t, c, workspace),
        Path::Small => micro::small::<S, SMALL_MR, V>(t, c, workspace),
        Path::Packed { pack_a } => micro::packed::<S, R, V>(t, c, workspace, run.blk, pack_a),
    }
}

/// The entry points of the x86 kernels: [`leaf_on`] compiled with their target features.
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
mod x86 {
    use super::vector::{Avx2, Avx512};
    use super::{leaf_on, micro, MatMut, MatRef, Run, Terms, AVX2_MR, AVX512_MR, AVX512_NARROW_MR};

    /// A piece on AVX2 with FMA, 6x16 tiles.
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn leaf_avx2(t: Terms<'_>, c: MatMut<'_>, workspace: &mut [f32], run: Run) {
        leaf_on::<Avx2, AVX2_MR, 2>(t, c, workspace, run);
    }

    /// A piece on AVX-512F, 12x32 tiles.
    #[target_feature(enable = "avx512f")]
    pub(super) fn leaf_avx512(t: Terms<'_>, c: MatMut<'_>, workspace: &mut [f32], run: Run) {
        leaf_on::<Avx512, AVX512_MR, 2>(t, c, workspace, run);
    }

    /// A piece on AVX-512F, one vector wide.
    #[target_feature(enable = "avx512f")]
    pub(super) fn leaf_avx512_narrow(t: Terms<'_>, c: MatMut<'_>, workspace: &mut [f32], run: Run) {
        leaf_on::<Avx512, AVX512_NARROW_MR, 1>(t, c, workspace, run);
    }

    /// Packs a whole `B` for the AVX2 tile.
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn pack_whole_avx2(b: MatRef<'_>, dst: &mut [f32]) {
        micro::pack_whole::<Avx2, 2>(b, dst);
    }

    /// Packs a whole `B` for an AVX-512F tile `V` vectors wide.
    #[target_feature(enable = "avx512f")]
    pub(super) fn pack_whole_avx512<const V: usize>(b: MatRef<'_>, dst: &mut [f32]) {
        micro::pack_whole::<Avx512, V>(b, dst);
    }

    /// A product on a packed `B`, AVX2 with FMA, 6x16 tiles.
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn on_packed_avx2(terms: (f32, MatRef<'_>, f32), panels: &[f32], c: MatMut<'_>) {
        micro::on_packed::<Avx2, AVX2_MR, 2>(terms, panels, c);
    }

    /// A product on a packed `B`, AVX-512F, 12x32 tiles.
    #[target_feature(enable = "avx512f")]
    pub(super) fn on_packed_avx512(terms: (f32, MatRef<'_>, f32), panels: &[f32], c: MatMut<'_>) {
        micro::on_packed::<Avx512, AVX512_MR, 2>(terms, panels, c);
    }

    /// A product on a packed `B`, AVX-512F, one vector wide.
    #[target_feature(enable = "avx512f")]
    pub(super) fn on_packed_avx512_narrow(
        terms: (f32, MatRef<'_>, f32),
        panels: &[f32],
        c: MatMut<'_>,
    ) {
        micro::on_packed::<Avx512, AVX512_NARROW_MR, 1>(terms, panels, c);
    }
}
