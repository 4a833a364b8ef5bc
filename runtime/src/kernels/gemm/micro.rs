//! The pieces of [`gemm`](super::gemm): the blocks of `k`, packing, the microkernel, the
//! write-back of a tile, the blocked driver and the small path.
//!
//! All arithmetic on elements of `C` is in [`acc_step`] (the `k` loop) and [`update`] (the
//! write-back), shared by every path.

use super::view::{MatMut, MatRef, Terms};
use crate::kernels::simd::{load, store};
use wide::f32x8;

/// Largest block of the `k` dimension: `k` is cut into `ceil(k / KC)` blocks of (nearly)
/// equal length, in order. The blocks depend on `k` only, never on threads or on the other
/// dimensions, so the rounding of a result does not either.
pub const KC: usize = 256;

/// Cache blocking of `m` and `n` (multiples of the tile). It changes speed, never bits.
#[derive(Clone, Copy, Debug)]
pub(super) struct Blocking {
    /// Rows of `A` packed at once.
    pub(super) mc: usize,
    /// Columns of `B` packed at once.
    pub(super) nc: usize,
}

/// The length of the longest block of `k` (see [`KC`]).
pub(super) const fn kc_max(k: usize) -> usize {
    if k == 0 {
        0
    } else {
        k.div_ceil(k.div_ceil(KC))
    }
}

/// The blocks of `k`, in order, as `(start, len)`: `ceil(k / KC)` blocks whose lengths differ
/// by at most one.
pub(super) fn k_blocks(k: usize) -> impl Iterator<Item = (usize, usize)> {
    let nb = k.div_ceil(KC);
    let (base, rem) = k.checked_div(nb).zip(k.checked_rem(nb)).unwrap_or((0, 0));
    (0..nb).map(move |i| (i * base + i.min(rem), base + usize::from(i < rem)))
}

/// How the write-back treats the old value of `C`.
#[derive(Clone, Copy, Debug)]
pub(super) enum Beta {
    /// `C = alpha * acc`: the old `C` is not read.
    Zero,
    /// `C = alpha * acc + beta * C`.
    Scale(f32),
}

impl Beta {
    /// The write-back of the `k` block `index`: the caller's `beta` for the first, then
    /// accumulate.
    fn for_block(beta: f32, index: usize) -> Beta {
        match (index, beta == 0.0) {
            (0, true) => Beta::Zero,
            (0, false) => Beta::Scale(beta),
            _ => Beta::Scale(1.0),
        }
    }
}

/// One step of the `k` loop: `acc + a * b`.
#[inline(always)]
fn acc_step(a: f32x8, b: f32x8, acc: f32x8) -> f32x8 {
    a.mul_add(b, acc)
}

/// The new value of `C` from the accumulator and the old value.
#[inline(always)]
fn update(acc: f32x8, alpha: f32x8, beta: Beta, old: f32x8) -> f32x8 {
    let v = acc * alpha;
    match beta {
        Beta::Zero => v,
        Beta::Scale(b) => old.mul_add(f32x8::splat(b), v),
    }
}

/// `C = beta * C` (zero if `beta == 0`, whatever `C` held).
pub(super) fn scale(beta: f32, c: MatMut<'_>) {
    for i in 0..c.rows {
        for j in 0..c.cols {
            let x = &mut c.data[i * c.rs + j * c.cs];
            *x = if beta == 0.0 { 0.0 } else { *x * beta };
        }
    }
}

/// Packs `lines` vectors that run along `p` with stride 1, line `i` starting at `src[i * ls]`,
/// interleaved: `dst[p * w + i] = src[i * ls + p]` for `p < kc`, zero for `lines <= i < w`.
/// Eight lines at a time go through an 8x8 transpose in registers.
#[inline(always)]
fn pack_across(src: &[f32], ls: usize, lines: usize, kc: usize, w: usize, dst: &mut [f32]) {
    let dst = &mut dst[..w * kc];
    let p8 = kc / 8 * 8;
    for g in (0..w).step_by(8) {
        let width = 8.min(w - g);
        let valid = lines.saturating_sub(g).min(width);
        for p in (0..p8).step_by(8) {
            let mut v = [f32x8::ZERO; 8];
            for (i, x) in v.iter_mut().enumerate().take(valid) {
                *x = load(&src[(g + i) * ls + p..]);
            }
            let t = f32x8::transpose(v);
            let out = &mut dst[p * w..(p + 8) * w];
            for (q, tq) in t.iter().enumerate() {
                out[q * w + g..q * w + g + width].copy_from_slice(&tq.as_array()[..width]);
            }
        }
        for p in p8..kc {
            for i in 0..width {
                dst[p * w + g + i] = if i < valid {
                    src[(g + i) * ls + p]
                } else {
                    0.0
                };
            }
        }
    }
}

/// Packs `lines` vectors that run along `i` with stride 1, the one for `p` starting at
/// `src[p * ps]`: `dst[p * w + i] = src[p * ps + i]` for `p < kc`, zero for `lines <= i < w`.
#[inline(always)]
fn pack_along(src: &[f32], ps: usize, lines: usize, kc: usize, w: usize, dst: &mut [f32]) {
    let dst = &mut dst[..w * kc];
    if lines == w {
        for (p, out) in dst.chunks_exact_mut(w).enumerate() {
            out.copy_from_slice(&src[p * ps..p * ps + w]);
        }
    } else {
        for (p, out) in dst.chunks_exact_mut(w).enumerate() {
            out[..lines].copy_from_slice(&src[p * ps..p * ps + lines]);
            out[lines..].fill(0.0);
        }
    }
}

/// Packs any strided `lines`x`kc` block: `dst[p * w + i] = src[i * ls + p * ps]`.
fn pack_strided(
    src: &[f32],
    ls: usize,
    ps: usize,
    lines: usize,
    kc: usize,
    w: usize,
    dst: &mut [f32],
) {
    for (p, out) in dst[..w * kc].chunks_exact_mut(w).enumerate() {
        for (i, o) in out.iter_mut().enumerate() {
            *o = if i < lines { src[i * ls + p * ps] } else { 0.0 };
        }
    }
}

/// Packs `count` lines of `kc` steps, element `(l, p)` at `src[l * ls + p * ps]`, into
/// `ceil(count / w)` micro-panels of `kc * w` floats: element `(r * w + i, p)` goes to
/// `dst[r * kc * w + p * w + i]`, lines past the end are zero. Always inlined, so that `w` is
/// the caller's constant.
#[inline(always)]
fn pack_panels(
    src: &[f32],
    (ls, ps): (usize, usize),
    (count, kc): (usize, usize),
    w: usize,
    dst: &mut [f32],
) {
    let panels = dst[..count.div_ceil(w) * w * kc].chunks_exact_mut(w * kc);
    for (ip, panel) in panels.enumerate() {
        let l0 = ip * w;
        let lines = w.min(count - l0);
        let src = &src[l0 * ls..];
        if ls == 1 {
            pack_along(src, ps, lines, kc, w, panel);
        } else if ps == 1 {
            pack_across(src, ls, lines, kc, w, panel);
        } else {
            pack_strided(src, ls, ps, lines, kc, w, panel);
        }
    }
}

/// Packs the `rows`x`kc` matrix `a` into `ceil(rows / R)` micro-panels of `kc * R` floats:
/// element `(r * R + i, p)` goes to `dst[r * kc * R + p * R + i]`, rows past the end are zero.
fn pack_a_panels<const R: usize>(a: MatRef<'_>, dst: &mut [f32]) {
    pack_panels(a.data, (a.rs, a.cs), (a.rows, a.cols), R, dst);
}

/// Packs the `kc`x`cols` matrix `b` into `ceil(cols / (8 * V))` micro-panels of `kc * 8 * V`
/// floats: element `(p, r * 8V + j)` goes to `dst[r * kc * 8V + p * 8V + j]`, columns past the
/// end are zero.
fn pack_b_panels<const V: usize>(b: MatRef<'_>, dst: &mut [f32]) {
    pack_panels(b.data, (b.cs, b.rs), (b.cols, b.rows), 8 * V, dst);
}

/// The microkernel: the `R`x`8V` tile `Σ_p a[p] ⊗ b[p]` of one packed `A` micro-panel (`R`
/// floats per step) and one packed `B` micro-panel (`8V` floats per step), in registers.
#[inline(always)]
fn tile<const R: usize, const V: usize>(a: &[f32], b: &[f32]) -> [[f32x8; V]; R] {
    let mut acc = [[f32x8::ZERO; V]; R];
    for (ap, bp) in a.chunks_exact(R).zip(b.chunks_exact(8 * V)) {
        let mut bv = [f32x8::ZERO; V];
        for (v, x) in bv.iter_mut().enumerate() {
            *x = load(&bp[8 * v..]);
        }
        for (row, &x) in acc.iter_mut().zip(ap) {
            let ai = f32x8::splat(x);
            for (r, &y) in row.iter_mut().zip(&bv) {
                *r = acc_step(ai, y, *r);
            }
        }
    }
    acc
}

/// The microkernel on an unpacked `A`: the `mr`x`kc` block `a` (`1 <= mr <= R`) is read where
/// it is; rows past `mr` repeat the last row, and their results are not written back.
#[inline(always)]
fn tile_unpacked<const R: usize, const V: usize>(
    a: MatRef<'_>,
    mr: usize,
    b: &[f32],
) -> [[f32x8; V]; R] {
    let kc = a.cols;
    let mut acc = [[f32x8::ZERO; V]; R];
    let row = |i: usize| i.min(mr - 1) * a.rs;
    let load_b = |bp: &[f32]| {
        let mut bv = [f32x8::ZERO; V];
        for (v, x) in bv.iter_mut().enumerate() {
            *x = load(&bp[8 * v..]);
        }
        bv
    };
    if a.cs == 1 {
        let rows: [&[f32]; R] = core::array::from_fn(|i| &a.data[row(i)..row(i) + kc]);
        for (p, bp) in b.chunks_exact(8 * V).enumerate().take(kc) {
            let bv = load_b(bp);
            for (acc_row, r) in acc.iter_mut().zip(&rows) {
                let ai = f32x8::splat(r[p]);
                for (x, &y) in acc_row.iter_mut().zip(&bv) {
                    *x = acc_step(ai, y, *x);
                }
            }
        }
    } else {
        let rows: [usize; R] = core::array::from_fn(row);
        for (p, bp) in b.chunks_exact(8 * V).enumerate().take(kc) {
            let bv = load_b(bp);
            let off = p * a.cs;
            for (acc_row, &r) in acc.iter_mut().zip(&rows) {
                let ai = f32x8::splat(a.data[r + off]);
                for (x, &y) in acc_row.iter_mut().zip(&bv) {
                    *x = acc_step(ai, y, *x);
                }
            }
        }
    }
    acc
}

/// Writes the `mr`x`nr` valid part of a tile to `C` at `(i0, j0)`.
#[inline(always)]
fn write_tile<const R: usize, const V: usize>(
    acc: [[f32x8; V]; R],
    alpha: f32x8,
    beta: Beta,
    c: &mut MatMut<'_>,
    (i0, j0): (usize, usize),
    (mr, nr): (usize, usize),
) {
    let full = mr == R && nr == 8 * V;
    if full && c.cs == 1 {
        // Rows of the tile are contiguous in `C`.
        for (i, row_acc) in acc.iter().enumerate() {
            let base = (i0 + i) * c.rs + j0;
            let row = &mut c.data[base..base + 8 * V];
            for (seg, &x) in row.chunks_exact_mut(8).zip(row_acc) {
                let old = match beta {
                    Beta::Zero => f32x8::ZERO,
                    Beta::Scale(_) => load(seg),
                };
                store(seg, update(x, alpha, beta, old));
            }
        }
        return;
    }
    if full && c.rs == 1 && R <= 8 {
        // Columns of the tile are contiguous in `C`: transpose each 8-column block in
        // registers and update column by column (the update is element-wise, so the bits are
        // the same).
        for v in 0..V {
            let mut block = [f32x8::ZERO; 8];
            for (b, row_acc) in block.iter_mut().zip(&acc) {
                *b = row_acc[v];
            }
            for (q, &col) in f32x8::transpose(block).iter().enumerate() {
                let base = i0 + (j0 + 8 * v + q) * c.cs;
                let dst = &mut c.data[base..base + R];
                let mut old = [0.0; 8];
                if let Beta::Scale(_) = beta {
                    old[..R].copy_from_slice(dst);
                }
                let new = update(col, alpha, beta, f32x8::from(old));
                dst.copy_from_slice(&new.as_array()[..R]);
            }
        }
        return;
    }
    // An edge tile or a strided `C`: the same update on a copy, then the valid part back.
    for (i, row_acc) in acc.iter().enumerate().take(mr) {
        for (v, &x) in row_acc.iter().enumerate() {
            let j = v * 8;
            if j >= nr {
                break;
            }
            let lanes = (nr - j).min(8);
            let mut old = [0.0; 8];
            let base = (i0 + i) * c.rs + (j0 + j) * c.cs;
            if let Beta::Scale(_) = beta {
                for (l, o) in old.iter_mut().enumerate().take(lanes) {
                    *o = c.data[base + l * c.cs];
                }
            }
            let new = update(x, alpha, beta, f32x8::from(old));
            for (l, &y) in new.as_array().iter().enumerate().take(lanes) {
                c.data[base + l * c.cs] = y;
            }
        }
    }
}

/// The product `C = alpha * A·B + beta * C` on one thread (`k > 0`), with `R`x`8V` tiles and
/// the given cache blocking; `workspace` holds the packed panels. `B` is always packed; `A` is
/// packed with `pack_a`, else read where it is (cheaper when few `B` panels reuse it).
pub(super) fn packed<const R: usize, const V: usize>(
    t: Terms<'_>,
    mut c: MatMut<'_>,
    workspace: &mut [f32],
    blk: Blocking,
    pack_a: bool,
) {
    let Terms { alpha, a, b, beta } = t;
    let w = 8 * V;
    let (m, k, n) = (a.rows, a.cols, b.cols);
    let alpha_v = f32x8::splat(alpha);
    let kc_max = kc_max(k);
    let a_len = if pack_a {
        m.min(blk.mc).div_ceil(R) * R * kc_max
    } else {
        0
    };
    let (a_buf, b_buf) = workspace.split_at_mut(a_len);
    for jc in (0..n).step_by(blk.nc) {
        let nc = blk.nc.min(n - jc);
        for (bi, (pc, kc)) in k_blocks(k).enumerate() {
            pack_b_panels::<V>(b.sub(pc, jc, kc, nc), b_buf);
            let beta_k = Beta::for_block(beta, bi);
            for ic in (0..m).step_by(blk.mc) {
                let mc = blk.mc.min(m - ic);
                let a_blk = a.sub(ic, pc, mc, kc);
                if pack_a {
                    pack_a_panels::<R>(a_blk, a_buf);
                }
                let mut c_blk = c.sub(ic, jc, mc, nc);
                let b_panels = b_buf[..nc.div_ceil(w) * w * kc].chunks_exact(w * kc);
                for (jp, b_panel) in b_panels.enumerate() {
                    let j0 = jp * w;
                    let nr = w.min(nc - j0);
                    for i0 in (0..mc).step_by(R) {
                        let mr = R.min(mc - i0);
                        let acc = if pack_a {
                            tile::<R, V>(&a_buf[i0 * kc..(i0 + R) * kc], b_panel)
                        } else {
                            tile_unpacked::<R, V>(a_blk.sub(i0, 0, mr, kc), mr, b_panel)
                        };
                        write_tile::<R, V>(acc, alpha_v, beta_k, &mut c_blk, (i0, j0), (mr, nr));
                    }
                }
            }
        }
    }
}

/// The product for small shapes (`0 < k <= KC`, `n <= 8V`): `B` packed into one panel in
/// `workspace` (`k * 8V` floats), then `R` rows of `C` at a time with `A` read where it is;
/// the same per-element arithmetic as [`packed`].
pub(super) fn small<const R: usize, const V: usize>(
    t: Terms<'_>,
    mut c: MatMut<'_>,
    workspace: &mut [f32],
) {
    let Terms { alpha, a, b, beta } = t;
    let w = 8 * V;
    let (m, k, n) = (a.rows, a.cols, b.cols);
    debug_assert!(0 < k && k <= KC && n <= w);
    let panel = &mut workspace[..k * w];
    pack_b_panels::<V>(b, panel);
    let alpha_v = f32x8::splat(alpha);
    let beta = Beta::for_block(beta, 0);
    for i0 in (0..m).step_by(R) {
        let mr = R.min(m - i0);
        let acc = tile_unpacked::<R, V>(a.sub(i0, 0, mr, k), mr, panel);
        write_tile::<R, V>(acc, alpha_v, beta, &mut c, (i0, 0), (mr, n));
    }
}
