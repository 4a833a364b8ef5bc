//! Newton-Schulz orthogonalisation (Muon's matrix step) on the project's own [`gemm`]: an
//! iteration of matrix products that drives the singular values of a matrix towards 1 while
//! keeping its singular vectors, without allocating.
//!
//! Each of the `steps` iterations computes, on the working matrix `X` (`m`x`n`, `m <= n`),
//!
//! ```text
//! A = X Xᵀ
//! B = b A + (c A) A
//! X = a X + B X
//! ```
//!
//! in the order and with the roundings of Keras 3's `Muon.zeropower_via_newtonschulz5` and
//! optax's `orthogonalize_via_newton_schulz` in float32: `c * A @ A` is `(c * A) @ A` in
//! Python (`*` and `@` bind equally, from the left), so `c A` is rounded before the product;
//! `b A` and the product are each rounded before their sum, and so are `a X` and `B X`. Every
//! element-wise operation is one `f32` operation (no fused multiply-add); the products are
//! [`gemm`] with `alpha = 1` and `beta = 0`. (`torch.optim.Muon` runs the iteration in
//! bfloat16 with `addmm`, which scales the products inside BLAS: other bits by design.)
//!
//! A tall matrix (`rows > cols`) is iterated on its transpose, so that `A` is `cols`x`cols`,
//! and the transpose of the result is written back, as the frameworks do; a wide or square
//! one is iterated as it is. In exact arithmetic both give the same matrix
//! (`p(X Xᵀ) X = X p(Xᵀ X)`); in floating point the transposition fixes which one is computed.
//!
//! The iteration does not normalise: the caller divides the matrix by its Frobenius norm (plus
//! the framework's epsilon) first, so that its singular values are at most 1. With the
//! standard coefficients `(3.4445, -4.775, 2.0315)` and five steps, singular values in
//! `[0.005, 1]` end in about `[0.68, 1.15]`.
//!
//! The scratch, [`newton_schulz_work`] floats, holds the working copy of `X` (`m`x`n`), `A`
//! (which becomes `B`) and `c A` (`m`x`m` each), the products `(c A) A` and `B X` (`m`x`n`)
//! and the GEMM's workspace. The products are as deterministic as [`gemm`]: the result does not
//! depend on the number of threads.

use crate::kernels::gemm::{gemm, max, workspace_len_threads, MatMut, MatRef};
use crate::kernels::parallel::pool_threads;

#[cfg(test)]
mod tests;

/// Coefficients of one Newton-Schulz iteration: `X` becomes `a X + (b A + c A²) X` with
/// `A = X Xᵀ`, which maps each singular value `s` of `X` to `a s + b s³ + c s⁵`. Muon's
/// standard quintic is `a = 3.4445, b = -4.775, c = 2.0315`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Coefficients {
    /// The factor of `X`.
    pub a: f32,
    /// The factor of `A = X Xᵀ`.
    pub b: f32,
    /// The factor of `A²`, applied to `A` before the product (`(c A) A`, as the frameworks do).
    pub c: f32,
}

/// The floats of scratch [`newton_schulz`] needs for a `rows` x `cols` matrix (including the
/// GEMM workspace), enough for the products to use every thread of the current rayon pool
/// (feature `parallel`), as [`workspace_len`](crate::kernels::gemm::workspace_len) sizes them.
/// Allocate it once, beside the matrix.
pub fn newton_schulz_work(rows: usize, cols: usize) -> usize {
    work_len(rows, cols, pool_threads())
}

/// Orthogonalises `x` (`rows` x `cols`, row-major, already normalised by the caller) in place:
/// `steps` times `A = X Xᵀ; B = b A + (c A) A; X = a X + B X`, with the roundings of Keras 3 and
/// optax in float32: their `c * A @ A` is `(c * A) @ A` in Python, so `c A` is rounded before
/// the product, and each element-wise product is rounded before its sum (no fused
/// multiply-add); the matrix products run on [`gemm`]. When `rows > cols` it iterates on `Xᵀ`
/// (so `A` is `cols` x `cols`) and writes the transpose of the result back into `x` in
/// row-major `rows` x `cols` layout, as torch, Keras and optax do. With `steps == 0`, or an
/// empty matrix, `x` is left as it is.
///
/// `work` is scratch: [`newton_schulz_work`]`(rows, cols)` floats are enough, and a longer
/// slice is fine. It allocates nothing, and the result does not depend on the number of threads.
///
/// # Panics
/// If `x.len() != rows * cols`, or if `work` is shorter than the scratch of one thread (the
/// need of [`newton_schulz_work`] in a pool of one thread): both are bugs in the caller, who
/// sizes the scratch once.
pub fn newton_schulz(
    x: &mut [f32],
    rows: usize,
    cols: usize,
    steps: u32,
    k: Coefficients,
    work: &mut [f32],
) {
    assert!(
        rows.checked_mul(cols) == Some(x.len()),
        "newton_schulz: a {rows}x{cols} matrix in a slice of {} floats",
        x.len()
    );
    let need = work_len(rows, cols, 1);
    assert!(
        work.len() >= need,
        "newton_schulz: the scratch holds {} floats, a {rows}x{cols} matrix needs {need} \
         (size it with newton_schulz_work)",
        work.len()
    );
    if steps == 0 || x.is_empty() {
        return;
    }
    let (m, n) = working_shape(rows, cols);
    let mut s = Scratch::carve(work, m, n);
    load(x, rows, cols, s.x);
    for _ in 0..steps {
        iterate(&mut s, m, n, k);
    }
    store(s.x, rows, cols, x);
}

/// The shape `(m, n)` of the matrix the iteration runs on: the input's, or its transpose's
/// when it is tall, so that `m <= n`.
const fn working_shape(rows: usize, cols: usize) -> (usize, usize) {
    if rows <= cols {
        (rows, cols)
    } else {
        (cols, rows)
    }
}

/// The scratch for a `rows` x `cols` matrix whose products may use `threads` threads: four
/// matrices (see [`Scratch`]) and the workspace of the largest product.
const fn work_len(rows: usize, cols: usize, threads: usize) -> usize {
    let (m, n) = working_shape(rows, cols);
    let (mn, mm) = (m.saturating_mul(n), m.saturating_mul(m));
    let gemm_work = max(
        workspace_len_threads(m, n, m, threads),
        max(
            workspace_len_threads(m, m, m, threads),
            workspace_len_threads(m, m, n, threads),
        ),
    );
    mn.saturating_mul(2)
        .saturating_add(mm.saturating_mul(2))
        .saturating_add(gemm_work)
}

/// The scratch [`newton_schulz`] needs at least, for a `rows` x `cols` matrix: its products on
/// one thread. A constant, for arenas sized at compile time; [`newton_schulz_work`] is more in
/// a pool of several threads, which the products then use.
pub const fn newton_schulz_serial_work(rows: usize, cols: usize) -> usize {
    work_len(rows, cols, 1)
}

/// The caller's scratch, cut into the matrices of one iteration (all row-major) and the GEMM's
/// workspace.
struct Scratch<'w> {
    /// The working matrix `X`, `m`x`n`.
    x: &'w mut [f32],
    /// `A = X Xᵀ`, then `B = b A + (c A) A` in its place; `m`x`m`.
    gram: &'w mut [f32],
    /// `c A`, `m`x`m`.
    scaled: &'w mut [f32],
    /// `(c A) A` (in its first `m * m` floats), then `B X`; `m`x`n`.
    product: &'w mut [f32],
    /// The packing workspace of [`gemm`]: the rest of the scratch.
    gemm: &'w mut [f32],
}

impl<'w> Scratch<'w> {
    /// Cuts `work` for an `m`x`n` working matrix (`work` holds at least [`work_len`]).
    fn carve(work: &'w mut [f32], m: usize, n: usize) -> Self {
        let (x, rest) = work.split_at_mut(m * n);
        let (gram, rest) = rest.split_at_mut(m * m);
        let (scaled, rest) = rest.split_at_mut(m * m);
        let (product, gemm) = rest.split_at_mut(m * n);
        Scratch {
            x,
            gram,
            scaled,
            product,
            gemm,
        }
    }
}

/// Copies the `rows` x `cols` matrix `x` into the working matrix `w`, transposed if it is tall.
fn load(x: &[f32], rows: usize, cols: usize, w: &mut [f32]) {
    if rows > cols {
        transpose(x, rows, cols, w);
    } else {
        w.copy_from_slice(x);
    }
}

/// Writes the working matrix `w` back into the `rows` x `cols` matrix `x`, transposed if it is
/// tall.
fn store(w: &[f32], rows: usize, cols: usize, x: &mut [f32]) {
    if rows > cols {
        transpose(w, cols, rows, x);
    } else {
        x.copy_from_slice(w);
    }
}

/// The tiles [`transpose`] copies one at a time: `src`'s rows of a tile make one cache line of
/// each of the tile's rows of `dst` (sixteen values), and its columns are few enough that
/// those lines stay in cache together even where `dst`'s rows lie 4 KiB apart, in one set of
/// the cache.
const TILE_ROWS: usize = 16;
const TILE_COLS: usize = 8;

/// Writes the transpose of the row-major `rows` x `cols` matrix `src` into `dst` (row-major
/// `cols` x `rows`), a tile at a time (a whole column of `dst` written at a stride of `rows`
/// values would touch a line of the cache per value, each line many times).
fn transpose(src: &[f32], rows: usize, cols: usize, dst: &mut [f32]) {
    for i0 in (0..rows).step_by(TILE_ROWS) {
        for j0 in (0..cols).step_by(TILE_COLS) {
            transpose_tile(src, (rows, cols), (i0, j0), dst);
        }
    }
}

/// The tile of [`transpose`] whose first value is `src`'s (`i0`, `j0`).
fn transpose_tile(
    src: &[f32],
    (rows, cols): (usize, usize),
    (i0, j0): (usize, usize),
    dst: &mut [f32],
) {
    let (i1, j1) = ((i0 + TILE_ROWS).min(rows), (j0 + TILE_COLS).min(cols));
    for i in i0..i1 {
        for (j, &v) in src[i * cols + j0..i * cols + j1].iter().enumerate() {
            dst[(j0 + j) * rows + i] = v;
        }
    }
}

/// One iteration on the `m`x`n` working matrix: `A = X Xᵀ; B = b A + (c A) A; X = a X + B X`.
fn iterate(s: &mut Scratch<'_>, m: usize, n: usize, k: Coefficients) {
    let mm = m * m;
    let x = MatRef::row_major(s.x, m, n);
    product(x, x.t(), s.gram, s.gemm);
    scale(s.scaled, k.c, s.gram);
    let (gram, scaled) = (
        MatRef::row_major(s.gram, m, m),
        MatRef::row_major(s.scaled, m, m),
    );
    product(scaled, gram, &mut s.product[..mm], s.gemm);
    scale_add(s.gram, k.b, &s.product[..mm]);
    product(MatRef::row_major(s.gram, m, m), x, s.product, s.gemm);
    scale_add(s.x, k.a, s.product);
}

/// `c = a·b` into the row-major `c`, on [`gemm`] with `alpha = 1` and `beta = 0`.
fn product(a: MatRef<'_>, b: MatRef<'_>, c: &mut [f32], workspace: &mut [f32]) {
    let c = MatMut::row_major(c, a.rows(), b.cols());
    gemm(1.0, a, b, 0.0, c, workspace);
}

/// `dst = factor * src`, element by element.
fn scale(dst: &mut [f32], factor: f32, src: &[f32]) {
    for (d, &v) in dst.iter_mut().zip(src) {
        *d = factor * v;
    }
}

/// `dst = factor * dst + plus`, element by element, the product rounded before the sum.
fn scale_add(dst: &mut [f32], factor: f32, plus: &[f32]) {
    for (d, &p) in dst.iter_mut().zip(plus) {
        *d = factor * *d + p;
    }
}
