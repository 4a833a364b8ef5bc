//! The pieces of [`gemm`](super::gemm): the blocks of `k`, packing, the microkernel, the
//! write-back of a tile, the blocked driver and the small path, generic over the [`Vector`]
//! of a kernel.
//!
//! All arithmetic on elements of `C` is in [`acc_step`] (the `k` loop) and [`update`] (the
//! write-back), shared by every path and by the scalar tiles ([`scalar`](super::scalar)).
//! Every function a kernel's entry point calls is `#[inline(always)]`, so it is compiled with
//! that entry point's target features.

use super::vector::{Block8, Panel8, Vector};
use super::view::{MatMut, MatRef, Terms};
use crate::lane::{load_padded_by_copy, store_partial_by_copy, MAX_LANES};

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
    pub(super) fn for_block(beta: f32, index: usize) -> Beta {
        match (index, beta == 0.0) {
            (0, true) => Beta::Zero,
            (0, false) => Beta::Scale(beta),
            _ => Beta::Scale(1.0),
        }
    }
}

/// One step of the `k` loop: `acc + a * b`.
#[inline(always)]
pub(super) fn acc_step<S: Vector>(a: S, b: S, acc: S) -> S {
    a.mul_add_native(b, acc)
}

/// The new value of `C` from the accumulator and the old value.
#[inline(always)]
pub(super) fn update<S: Vector>(acc: S, alpha: S, beta: Beta, old: S) -> S {
    let v = acc * alpha;
    match beta {
        Beta::Zero => v,
        Beta::Scale(b) => old.mul_add_native(S::splat(b), v),
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
/// Eight lines at a time go through an 8x8 transpose in registers of `S`'s kernel.
#[inline(always)]
fn pack_across<S: Vector>(
    src: &[f32],
    ls: usize,
    lines: usize,
    kc: usize,
    w: usize,
    dst: &mut [f32],
) {
    let dst = &mut dst[..w * kc];
    let p8 = kc / 8 * 8;
    for g in (0..w).step_by(8) {
        let width = 8.min(w - g);
        let valid = lines.saturating_sub(g).min(width);
        for p in (0..p8).step_by(8) {
            // Lines past the end are zero: nothing of `src` is read for them.
            let from = Block8 {
                data: if valid > 0 { &src[g * ls + p..] } else { &[] },
                stride: ls,
                rows: valid,
            };
            let to = Panel8 {
                data: &mut dst[p * w + g..(p + 8) * w],
                stride: w,
                width,
            };
            S::transpose8(from, to);
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
/// the caller's constant and the copies run on `S`'s instruction set.
#[inline(always)]
fn pack_panels<S: Vector>(
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
            pack_across::<S>(src, ls, lines, kc, w, panel);
        } else {
            pack_strided(src, ls, ps, lines, kc, w, panel);
        }
    }
}

/// Packs the `rows`x`kc` matrix `a` into `ceil(rows / r)` micro-panels of `kc * r` floats:
/// element `(q * r + i, p)` goes to `dst[q * kc * r + p * r + i]`, rows past the end are zero.
/// Inlined into the kernel's entry point like the microkernel, so that it moves values in the
/// kernel's registers; the width is a constant, so copying a row of a panel is a few moves,
/// not a call to `memmove`.
#[inline(always)]
fn pack_a_panels<S: Vector, const R: usize>(a: MatRef<'_>, dst: &mut [f32]) {
    pack_panels::<S>(a.data, (a.rs, a.cs), (a.rows, a.cols), R, dst);
}

/// Packs the `kc`x`cols` matrix `b` into `ceil(cols / w)` micro-panels of `kc * w` floats,
/// `w = S::LANES * V`: element `(p, q * w + j)` goes to `dst[q * kc * w + p * w + j]`, columns
/// past the end are zero. Inlined, of a constant width, as [`pack_a_panels`].
#[inline(always)]
fn pack_b_panels<S: Vector, const V: usize>(b: MatRef<'_>, dst: &mut [f32]) {
    pack_panels::<S>(b.data, (b.cs, b.rs), (b.cols, b.rows), S::LANES * V, dst);
}

/// The `V` vectors of one step of a packed `B` micro-panel.
#[inline(always)]
fn load_b<S: Vector, const V: usize>(bp: &[f32]) -> [S; V] {
    core::array::from_fn(|v| S::load(&bp[S::LANES * v..]))
}

/// The microkernel: the `R`x`LV` tile `Σ_p a[p] ⊗ b[p]` (`L` lanes of `S`) of one packed `A`
/// micro-panel (`R` floats per step) and one packed `B` micro-panel (`LV` floats per step), in
/// registers.
#[inline(always)]
fn tile<S: Vector, const R: usize, const V: usize>(a: &[f32], b: &[f32]) -> [[S; V]; R] {
    let mut acc = [[S::ZERO; V]; R];
    for (ap, bp) in a.chunks_exact(R).zip(b.chunks_exact(S::LANES * V)) {
        let bv = load_b::<S, V>(bp);
        for (row, &x) in acc.iter_mut().zip(ap) {
            let ai = S::splat(x);
            for (r, &y) in row.iter_mut().zip(&bv) {
                *r = acc_step(ai, y, *r);
            }
        }
    }
    acc
}

/// Rows of `A` that [`tile_unpacked`] reads side by side: their offsets stay in registers
/// (sixteen do not), and eight chains of `mul_add` one vector wide cover its latency.
const UNPACKED_ROWS: usize = 8;

/// The rows of a short last group of [`tile_unpacked`] (in a tile of 12 rows).
const HALF_GROUP: usize = UNPACKED_ROWS / 2;

/// The microkernel on an unpacked `A`: the `mr`x`kc` block `a` (`1 <= mr <= R`) is read where
/// it is against the `B` panel `b`, and written where `to` says. A tile of at most
/// [`UNPACKED_ROWS`] rows runs whole; a taller one runs in groups of that many rows (the last
/// of up to [`HALF_GROUP`] rows in a smaller group), each written back before the next starts,
/// and groups past `mr` are not computed. In a group cut by `mr`, the missing rows repeat its
/// last row, and are not written back.
#[inline(always)]
fn tile_unpacked<S: Vector, const R: usize, const V: usize>(
    a: MatRef<'_>,
    mr: usize,
    b: &[f32],
    to: Dest<'_, '_, S>,
    nr: usize,
) {
    if R <= UNPACKED_ROWS {
        write_tile(rows_unpacked::<S, R, V>(a, mr, b), to, (mr, nr));
        return;
    }
    let Dest {
        c,
        at: (i0, j0),
        alpha,
        beta,
    } = to;
    let mut first = 0;
    while first < mr {
        let rows = (mr - first).min(UNPACKED_ROWS);
        let group = a.sub(first, 0, rows, a.cols);
        let to = Dest {
            c: &mut *c,
            at: (i0 + first, j0),
            alpha,
            beta,
        };
        if rows <= HALF_GROUP {
            let acc = rows_unpacked::<S, HALF_GROUP, V>(group, rows, b);
            write_tile(acc, to, (rows, nr));
        } else {
            let acc = rows_unpacked::<S, UNPACKED_ROWS, V>(group, rows, b);
            write_tile(acc, to, (rows, nr));
        }
        first += rows;
    }
}

/// The `G`-row tile `Σ_p a[p] ⊗ b[p]` of the first `mr` rows of `a` (rows past `mr` repeat
/// row `mr - 1`), in registers: one offset per row and one for the step of `k`, so that each
/// `A` value is a broadcast operand.
#[inline(always)]
fn rows_unpacked<S: Vector, const G: usize, const V: usize>(
    a: MatRef<'_>,
    mr: usize,
    b: &[f32],
) -> [[S; V]; G] {
    let kc = a.cols;
    let mut acc = [[S::ZERO; V]; G];
    assert!(0 < mr && mr <= a.rows);
    let rows: [usize; G] = core::array::from_fn(|i| i.min(mr - 1) * a.rs);
    // Every read of `A` below is at `i * rs + p * cs` for some `i < mr` and `p < kc`: at most
    // `last`, which is checked once here.
    let last = (mr - 1) * a.rs + kc.saturating_sub(1) * a.cs;
    let w = S::LANES * V;
    assert!((kc == 0 || last < a.data.len()) && b.len() >= kc * w);
    for p in 0..kc {
        let bv = load_b::<S, V>(&b[p * w..(p + 1) * w]);
        let off = p * a.cs;
        for (acc_row, &r) in acc.iter_mut().zip(&rows) {
            // SAFETY: `r + off <= last < a.data.len()`, asserted above.
            let ai = S::splat(unsafe { *a.data.get_unchecked(r + off) });
            for (x, &y) in acc_row.iter_mut().zip(&bv) {
                *x = acc_step(ai, y, *x);
            }
        }
    }
    acc
}

/// Where and how a tile is written: into `c` with its first element at `at`, as `alpha * acc`
/// plus `beta` times the old value.
struct Dest<'a, 'c, S> {
    /// The whole of `C` (of this block).
    c: &'a mut MatMut<'c>,
    /// Row and column of the tile's first element.
    at: (usize, usize),
    /// The factor of the product, in every lane.
    alpha: S,
    /// What the write-back does with the old value.
    beta: Beta,
}

/// Writes the `mr`x`nr` valid part of a tile where `to` says.
#[inline(always)]
fn write_tile<S: Vector, const R: usize, const V: usize>(
    acc: [[S; V]; R],
    to: Dest<'_, '_, S>,
    (mr, nr): (usize, usize),
) {
    let full = mr == R && nr == S::LANES * V;
    if full && to.c.cs == 1 {
        write_rows(acc, to);
    } else if full && to.c.rs == 1 && R <= S::LANES {
        write_columns(acc, to);
    } else {
        write_edge(acc, to, (mr, nr));
    }
}

/// A full tile whose rows are contiguous in `C`.
#[inline(always)]
fn write_rows<S: Vector, const R: usize, const V: usize>(acc: [[S; V]; R], to: Dest<'_, '_, S>) {
    let Dest {
        c,
        at: (i0, j0),
        alpha,
        beta,
    } = to;
    for (i, row_acc) in acc.iter().enumerate() {
        let base = (i0 + i) * c.rs + j0;
        let row = &mut c.data[base..base + S::LANES * V];
        for (seg, &x) in row.chunks_exact_mut(S::LANES).zip(row_acc) {
            let old = match beta {
                Beta::Zero => S::ZERO,
                Beta::Scale(_) => S::load(seg),
            };
            update(x, alpha, beta, old).store(seg);
        }
    }
}

/// A full tile whose columns are contiguous in `C` (`R` at most the lanes): each column of the
/// tile is gathered into one vector and updated as a whole (the update is element-wise, so
/// the bits are those of the row-wise update).
#[inline(always)]
fn write_columns<S: Vector, const R: usize, const V: usize>(acc: [[S; V]; R], to: Dest<'_, '_, S>) {
    let Dest {
        c,
        at: (i0, j0),
        alpha,
        beta,
    } = to;
    for v in 0..V {
        // `cols[q][i]`: row `i`, lane `q` of the tile's `v`-th vectors.
        let mut cols = [[0.0; MAX_LANES]; MAX_LANES];
        for (i, row_acc) in acc.iter().enumerate() {
            let mut row = [0.0; MAX_LANES];
            row_acc[v].store(&mut row);
            for (col, &x) in cols.iter_mut().zip(&row).take(S::LANES) {
                col[i] = x;
            }
        }
        for (q, col) in cols.iter().enumerate().take(S::LANES) {
            let base = i0 + (j0 + S::LANES * v + q) * c.cs;
            let dst = &mut c.data[base..base + R];
            let old = match beta {
                Beta::Zero => S::ZERO,
                Beta::Scale(_) => load_padded_by_copy(dst),
            };
            store_partial_by_copy(update(S::load(col), alpha, beta, old), dst);
        }
    }
}

/// An edge tile or a strided `C`: the same update on a copy, then the valid part back.
#[inline(always)]
fn write_edge<S: Vector, const R: usize, const V: usize>(
    acc: [[S; V]; R],
    to: Dest<'_, '_, S>,
    (mr, nr): (usize, usize),
) {
    let Dest {
        c,
        at: (i0, j0),
        alpha,
        beta,
    } = to;
    for (i, row_acc) in acc.iter().enumerate().take(mr) {
        for (v, &x) in row_acc.iter().enumerate() {
            let j = v * S::LANES;
            if j >= nr {
                break;
            }
            let lanes = (nr - j).min(S::LANES);
            let mut old = [0.0; MAX_LANES];
            let base = (i0 + i) * c.rs + (j0 + j) * c.cs;
            if let Beta::Scale(_) = beta {
                for (l, o) in old.iter_mut().enumerate().take(lanes) {
                    *o = c.data[base + l * c.cs];
                }
            }
            let mut new = [0.0; MAX_LANES];
            update(x, alpha, beta, S::load(&old)).store(&mut new);
            for (l, &y) in new.iter().enumerate().take(lanes) {
                c.data[base + l * c.cs] = y;
            }
        }
    }
}

/// One block of `A` for [`block_tiles`]: `mc`x`kc`, and its panels if it is packed.
#[derive(Clone, Copy)]
struct Block<'a> {
    /// The block, read where it is unless `packed`.
    a: MatRef<'a>,
    /// The block packed by [`pack_a_panels`].
    packed: Option<&'a [f32]>,
}

/// Every tile of one block of `C` (`mc`x`nc`, one block of `k` of length `kc`): the block of
/// `A` against each packed `B` micro-panel of `b_panels` (`kc * LV` floats each, `ceil(nc /
/// LV)` of them), written back with `alpha` and `beta`.
#[inline(always)]
fn block_tiles<S: Vector, const R: usize, const V: usize>(
    a: Block<'_>,
    b_panels: &[f32],
    mut c: MatMut<'_>,
    alpha: S,
    beta: Beta,
) {
    let w = S::LANES * V;
    let (mc, kc, nc) = (a.a.rows, a.a.cols, c.cols);
    for (jp, b_panel) in b_panels.chunks_exact(w * kc).enumerate() {
        let j0 = jp * w;
        let nr = w.min(nc - j0);
        for i0 in (0..mc).step_by(R) {
            let mr = R.min(mc - i0);
            let to = Dest {
                c: &mut c,
                at: (i0, j0),
                alpha,
                beta,
            };
            match a.packed {
                Some(panels) => {
                    let acc = tile::<S, R, V>(&panels[i0 * kc..(i0 + R) * kc], b_panel);
                    write_tile(acc, to, (mr, nr));
                }
                None => tile_unpacked::<S, R, V>(a.a.sub(i0, 0, mr, kc), mr, b_panel, to, nr),
            }
        }
    }
}

/// The product `C = alpha * A·B + beta * C` on one thread (`k > 0`), with `R`x`LV` tiles (`L`
/// lanes of `S`) and the given cache blocking; `workspace` holds the packed panels. `B` is
/// always packed; `A` is packed with `pack_a`, else read where it is (cheaper when few `B`
/// panels reuse it).
#[inline(always)]
pub(super) fn packed<S: Vector, const R: usize, const V: usize>(
    t: Terms<'_>,
    mut c: MatMut<'_>,
    workspace: &mut [f32],
    blk: Blocking,
    pack_a: bool,
) {
    let Terms { alpha, a, b, beta } = t;
    let w = S::LANES * V;
    let (m, k, n) = (a.rows, a.cols, b.cols);
    let alpha_v = S::splat(alpha);
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
            pack_b_panels::<S, V>(b.sub(pc, jc, kc, nc), b_buf);
            let beta_k = Beta::for_block(beta, bi);
            for ic in (0..m).step_by(blk.mc) {
                let mc = blk.mc.min(m - ic);
                let a_blk = a.sub(ic, pc, mc, kc);
                if pack_a {
                    pack_a_panels::<S, R>(a_blk, a_buf);
                }
                let a_blk = Block {
                    a: a_blk,
                    packed: pack_a.then_some(&*a_buf),
                };
                let b_panels = &b_buf[..nc.div_ceil(w) * w * kc];
                let c_blk = c.sub(ic, jc, mc, nc);
                block_tiles::<S, R, V>(a_blk, b_panels, c_blk, alpha_v, beta_k);
            }
        }
    }
}

/// The product for small shapes (`0 < k <= KC`, `n <= LV`): `B` packed into one panel in
/// `workspace` (`k * LV` floats), then `R` rows of `C` at a time with `A` read where it is;
/// the same per-element arithmetic as [`packed`].
#[inline(always)]
pub(super) fn small<S: Vector, const R: usize, const V: usize>(
    t: Terms<'_>,
    mut c: MatMut<'_>,
    workspace: &mut [f32],
) {
    let Terms { alpha, a, b, beta } = t;
    let w = S::LANES * V;
    let (m, k, n) = (a.rows, a.cols, b.cols);
    debug_assert!(0 < k && k <= KC && n <= w);
    let panel = &mut workspace[..k * w];
    pack_b_panels::<S, V>(b, panel);
    let alpha_v = S::splat(alpha);
    let beta = Beta::for_block(beta, 0);
    for i0 in (0..m).step_by(R) {
        let mr = R.min(m - i0);
        let to = Dest {
            c: &mut c,
            at: (i0, 0),
            alpha: alpha_v,
            beta,
        };
        tile_unpacked::<S, R, V>(a.sub(i0, 0, mr, k), mr, panel, to, n);
    }
}

/// Floats [`pack_whole`] writes for a `k`x`n` matrix in panels `w` wide: `ceil(n / w)`
/// panels of `k * w` floats.
pub(super) const fn whole_len(k: usize, n: usize, w: usize) -> usize {
    n.div_ceil(w) * w * k
}

/// Packs the whole `k`x`n` matrix `b` for [`on_packed`]: for each block of `k` in order (see
/// [`k_blocks`]), its `ceil(n / LV)` micro-panels as [`packed`] packs them, block `(pc, kc)`
/// starting at `dst[pc * ceil(n / LV) * LV]`.
#[inline(always)]
pub(super) fn pack_whole<S: Vector, const V: usize>(b: MatRef<'_>, dst: &mut [f32]) {
    let width = b.cols.div_ceil(S::LANES * V) * S::LANES * V;
    for (pc, kc) in k_blocks(b.rows) {
        pack_b_panels::<S, V>(b.sub(pc, 0, kc, b.cols), &mut dst[pc * width..]);
    }
}

/// Rows of the tallest tile ([`on_packed`] packs one tile's rows of `A` on the stack).
pub(super) const MAX_MR: usize = 16;

/// `C = alpha * A·B + beta * C` (`k > 0`) on `B` packed by [`pack_whole`] into `panels`,
/// `R`x`LV` tiles (`R <= MAX_MR`) on one thread: the per-element arithmetic of [`packed`], with
/// no workspace. The `R` rows of `A` of each tile are packed on the stack (a tile reading `R`
/// rows where they are keeps `R` row addresses, more than the registers hold).
#[inline(always)]
pub(super) fn on_packed<S: Vector, const R: usize, const V: usize>(
    (alpha, a, beta): (f32, MatRef<'_>, f32),
    panels: &[f32],
    mut c: MatMut<'_>,
) {
    let w = S::LANES * V;
    let (m, k, n) = (a.rows, a.cols, c.cols);
    let width = n.div_ceil(w) * w;
    let alpha_v = S::splat(alpha);
    let mut a_tile = [0.0; MAX_MR * KC];
    for (bi, (pc, kc)) in k_blocks(k).enumerate() {
        let beta_k = Beta::for_block(beta, bi);
        let b_panels = &panels[pc * width..(pc + kc) * width];
        for i0 in (0..m).step_by(R) {
            let mr = R.min(m - i0);
            let a_blk = a.sub(i0, pc, mr, kc);
            pack_a_panels::<S, R>(a_blk, &mut a_tile);
            let a_blk = Block {
                a: a_blk,
                packed: Some(&a_tile),
            };
            block_tiles::<S, R, V>(a_blk, b_panels, c.sub(i0, 0, mr, n), alpha_v, beta_k);
        }
    }
}
