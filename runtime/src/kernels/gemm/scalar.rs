//! The product on a target without SIMD registers (a microcontroller), where a lane is one
//! `f32`: [`SCALAR_MR`]x[`SCALAR_NR`] tiles of scalar accumulators, `A` and `B` read where they
//! are (nothing is packed: a scalar load costs the same from a strided place), no workspace.
//!
//! Each element of `C` takes the arithmetic of the vector kernels ([`micro`](super::micro)):
//! per block of `k` ([`k_blocks`]) an accumulator from zero and one [`acc_step`] per step of
//! `k` in increasing order, then the same write-back ([`update`]). So it gives the bits of the
//! vector kernels of a build that rounds `mul_add` as it does.

use super::micro::{acc_step, k_blocks, update, Beta};
use super::view::{MatMut, MatRef, Terms};

/// Rows of a scalar tile.
pub(super) const SCALAR_MR: usize = 4;
/// Columns of a scalar tile: with [`SCALAR_MR`], 16 accumulators, 4 values of `B` and one of
/// `A` in the 32 single-precision registers of a Cortex-M4F, with no spills.
pub(super) const SCALAR_NR: usize = 4;

/// `C = alpha * A·B + beta * C` (`k > 0`) on one thread, tile by tile.
pub(super) fn product(t: Terms<'_>, mut c: MatMut<'_>) {
    let (m, n) = (t.a.rows, t.b.cols);
    for (bi, (pc, kc)) in k_blocks(t.a.cols).enumerate() {
        let beta = Beta::for_block(t.beta, bi);
        let a = t.a.sub(0, pc, m, kc);
        let b = t.b.sub(pc, 0, kc, n);
        for i0 in (0..m).step_by(SCALAR_MR) {
            let mr = SCALAR_MR.min(m - i0);
            for j0 in (0..n).step_by(SCALAR_NR) {
                let nr = SCALAR_NR.min(n - j0);
                let at = (i0, j0, &mut c, (t.alpha, beta));
                // A whole tile has its sizes as constants: no clamps, no guarded stores.
                if mr == SCALAR_MR && nr == SCALAR_NR {
                    tile_at(a, b, at, (SCALAR_MR, SCALAR_NR));
                } else {
                    tile_at(a, b, at, (mr, nr));
                }
            }
        }
    }
}

/// Computes the tile of rows `i0..i0 + mr` and columns `j0..j0 + nr` and writes it into `c`.
#[inline(always)]
fn tile_at(
    a: MatRef<'_>,
    b: MatRef<'_>,
    (i0, j0, c, terms): (usize, usize, &mut MatMut<'_>, (f32, Beta)),
    (mr, nr): (usize, usize),
) {
    let acc = tile(a, b, (i0, mr), (j0, nr));
    write(acc, c, (i0, mr), (j0, nr), terms);
}

/// The tile `Σ_p a[i][p] b[p][j]` of rows `i0..i0 + mr` and columns `j0..j0 + nr` (`mr, nr >=
/// 1`); rows past `mr` repeat row `mr - 1` and columns past `nr` column `nr - 1`, so that the
/// loop has no branch, and are not written back.
#[inline(always)]
fn tile(
    a: MatRef<'_>,
    b: MatRef<'_>,
    (i0, mr): (usize, usize),
    (j0, nr): (usize, usize),
) -> [[f32; SCALAR_NR]; SCALAR_MR] {
    // One pointer per row of `A` and per column of `B`, each advanced by its step of `k`:
    // eight registers, no offsets to keep.
    let mut rows: [*const f32; SCALAR_MR] =
        core::array::from_fn(|i| a.data.as_ptr().wrapping_add((i0 + i.min(mr - 1)) * a.rs));
    let mut cols: [*const f32; SCALAR_NR] =
        core::array::from_fn(|j| b.data.as_ptr().wrapping_add((j0 + j.min(nr - 1)) * b.cs));
    let mut acc = [[0.0; SCALAR_NR]; SCALAR_MR];
    for _ in 0..a.cols {
        keep_rolled();
        // SAFETY: at step `p`, the pointers are at `(i, p)` of `a` (`i < mr`) and `(p, j)` of
        // `b` (`j < nr`), inside the views, whose constructors checked that every element lies
        // in `data`.
        let bv: [f32; SCALAR_NR] = core::array::from_fn(|j| unsafe { *cols[j] });
        for (acc_row, &row) in acc.iter_mut().zip(&rows) {
            // SAFETY: as above.
            let x = unsafe { *row };
            for (y, &z) in acc_row.iter_mut().zip(&bv) {
                *y = acc_step(x, z, *y);
            }
        }
        // Past the last step they point past the views, and are not read.
        rows = rows.map(|r| r.wrapping_add(a.cs));
        cols = cols.map(|c| c.wrapping_add(b.rs));
    }
    acc
}

/// Keeps the loop it is in from being unrolled at run time on 32-bit Arm: an empty `asm!`
/// statement is a call to LLVM's Arm cost model, which then leaves the loop as it is. Unrolled
/// by 4, the step of [`tile`] needs more than the 13 general registers for its 8 pointers and
/// spills them to the stack; rolled, it is 8 loads, 16 `vfma.f32`, 8 additions and the branch.
#[inline(always)]
fn keep_rolled() {
    #[cfg(target_arch = "arm")]
    // SAFETY: an empty statement: it reads, writes and changes nothing.
    unsafe {
        core::arch::asm!("", options(nomem, nostack, preserves_flags));
    }
}

/// Writes the valid `mr`x`nr` part of a tile into `c` at `(i0, j0)`, as `alpha * acc` plus
/// what `beta` says of the old value.
#[inline(always)]
fn write(
    acc: [[f32; SCALAR_NR]; SCALAR_MR],
    c: &mut MatMut<'_>,
    (i0, mr): (usize, usize),
    (j0, nr): (usize, usize),
    (alpha, beta): (f32, Beta),
) {
    let (rs, cs) = (c.rs, c.cs);
    let mut row = c.data.as_mut_ptr().wrapping_add(i0 * rs + j0 * cs);
    for acc_row in acc.iter().take(mr) {
        let mut at = row;
        for &x in acc_row.iter().take(nr) {
            // SAFETY: `at` is element `(i0 + i, j0 + j)` of the view (`i < mr`, `j < nr`),
            // whose constructor checked that every element lies in `data`.
            let to = unsafe { &mut *at };
            let old = match beta {
                Beta::Zero => 0.0,
                Beta::Scale(_) => *to,
            };
            *to = update(x, alpha, beta, old);
            at = at.wrapping_add(cs);
        }
        row = row.wrapping_add(rs);
    }
}
