//! `newton_schulz` against an `f64` reference of the same iteration, the tall case bit for bit
//! against the transposed wide one, the singular values five standard steps give, and
//! bit-identity across thread counts.
//!
//! The small shapes use fixed-size buffers, so they run without `alloc`; the thread pools need
//! `parallel`.

use super::*;
use crate::kernels::gemm::tests::value;

/// Muon's standard quintic.
const STANDARD: Coefficients = Coefficients {
    a: 3.4445,
    b: -4.775,
    c: 2.0315,
};

/// Elements of the largest small matrix (64x64; 100x37 is 3700).
const MAX: usize = 4096;
/// Scratch of the small matrices (checked against `newton_schulz_work` in each test).
const WORK: usize = 4 * MAX + 32_768;

/// The shapes of the reference sweep: vectors, odd and square shapes, each tall one with its
/// wide transpose.
const SHAPES: [(usize, usize); 12] = [
    (1, 1),
    (1, 7),
    (7, 1),
    (3, 5),
    (5, 3),
    (8, 8),
    (12, 5),
    (5, 12),
    (33, 17),
    (17, 33),
    (64, 64),
    (100, 37),
];

/// Fills `x` with deterministic values divided by their Frobenius norm (what the caller does
/// before the iteration), so that every singular value is at most 1.
fn fill_normalised(x: &mut [f32], salt: u64) {
    for (i, v) in x.iter_mut().enumerate() {
        *v = value(i, salt);
    }
    let norm = libm::sqrt(x.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>()) as f32;
    for v in x.iter_mut() {
        *v /= norm;
    }
}

/// `out = a·b` in `f64` for row-major `a` (`m`x`k`) and `b` (`k`x`n`), by a triple loop.
fn mul(a: &[f64], b: &[f64], (m, k, n): (usize, usize, usize), out: &mut [f64]) {
    for i in 0..m {
        for j in 0..n {
            out[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
        }
    }
}

/// `out = x·xᵀ` in `f64` for a row-major `m`x`n` matrix `x`.
fn gram(x: &[f64], m: usize, n: usize, out: &mut [f64]) {
    for i in 0..m {
        for j in 0..m {
            out[i * m + j] = (0..n).map(|p| x[i * n + p] * x[j * n + p]).sum();
        }
    }
}

/// The iteration in `f64`, on the transpose of a tall matrix as the kernel does: the
/// `rows`x`cols` result of `steps` iterations on `x`, into `out`.
fn reference(
    x: &[f32],
    (rows, cols): (usize, usize),
    steps: u32,
    k: Coefficients,
    out: &mut [f64],
) {
    let (m, n) = (rows.min(cols), rows.max(cols));
    let (mut w, mut a, mut aa, mut bw) = ([0.0; MAX], [0.0; MAX], [0.0; MAX], [0.0; MAX]);
    let tall = rows > cols;
    for i in 0..rows {
        for j in 0..cols {
            let at = if tall { j * rows + i } else { i * cols + j };
            w[at] = f64::from(x[i * cols + j]);
        }
    }
    let (ka, kb, kc) = (f64::from(k.a), f64::from(k.b), f64::from(k.c));
    for _ in 0..steps {
        gram(&w, m, n, &mut a);
        mul(&a, &a, (m, m, m), &mut aa);
        for (a, &aa) in a[..m * m].iter_mut().zip(&aa) {
            *a = kb * *a + kc * aa;
        }
        mul(&a, &w, (m, m, n), &mut bw);
        for (w, &bw) in w[..m * n].iter_mut().zip(&bw) {
            *w = ka * *w + bw;
        }
    }
    for i in 0..rows {
        for j in 0..cols {
            out[i * cols + j] = if tall {
                w[j * rows + i]
            } else {
                w[i * cols + j]
            };
        }
    }
}

/// Runs [`newton_schulz`] on `x` with exactly [`newton_schulz_work`] floats of scratch.
fn run(x: &mut [f32], (rows, cols): (usize, usize), steps: u32, k: Coefficients) {
    let mut work = [f32::NAN; WORK];
    let len = newton_schulz_work(rows, cols);
    assert!(len <= WORK, "{rows}x{cols} needs {len} floats of scratch");
    newton_schulz(x, rows, cols, steps, k, &mut work[..len]);
}

/// The largest difference between `got` and `want`.
fn max_error(got: &[f32], want: &[f64]) -> f64 {
    got.iter()
        .zip(want)
        .map(|(&g, &w)| (f64::from(g) - w).abs())
        .fold(0.0, f64::max)
}

/// The largest absolute difference from the reference allowed after 0, 1 and 5 steps. The
/// entries of `X`, `A` and `B` stay below about 1.2 in magnitude (the input's Frobenius norm is
/// 1 and the singular values stay below 1.2), so a product of `k <= 100` terms rounds to within
/// about `sqrt(k) * 2^-24`, some 6e-7 (its worst case, `k * 2^-24` = 6e-6, needs every rounding
/// to go the same way): one step, four products and three element-wise operations, stays within
/// 1e-6. A step multiplies an earlier error by at most `max |p'(s)|` over `[0, 1.2]`, about
/// 3.9, which bounds five steps by 1e-6 * (1 + 3.9 + ... + 3.9^4), some 3e-4, if every error
/// went the same way; they do not, and 1e-5 is ten times what five steps give. Zero steps
/// change nothing. Measured: at most 1.1e-7 after one step and 9.3e-7 after five, with the
/// kernels that fuse their multiply-adds (AVX2, AVX-512) and with the one that does not
/// (portable `f32x8`).
const TOLERANCE: [f64; 3] = [0.0, 1e-6, 1e-5];

#[test]
fn matches_f64_reference() {
    for (s, &(rows, cols)) in SHAPES.iter().enumerate() {
        let len = rows * cols;
        let mut x0 = [0.0; MAX];
        fill_normalised(&mut x0[..len], s as u64);
        for (steps, tolerance) in [0, 1, 5].into_iter().zip(TOLERANCE) {
            let mut got = x0;
            run(&mut got[..len], (rows, cols), steps, STANDARD);
            let mut want = [0.0; MAX];
            reference(&x0[..len], (rows, cols), steps, STANDARD, &mut want);
            let error = max_error(&got[..len], &want[..len]);
            assert!(
                error <= tolerance,
                "{rows}x{cols}, {steps} steps: max error {error:e} > {tolerance:e}"
            );
        }
    }
}

/// Asserts that `got` and `want` hold the same bits.
fn assert_same_bits(want: &[f32], got: &[f32], what: impl core::fmt::Debug) {
    assert!(
        want.iter()
            .zip(got)
            .all(|(w, g)| w.to_bits() == g.to_bits()),
        "{what:?}: the bits differ"
    );
}

#[test]
fn tall_is_the_transpose_of_its_transpose_bit_for_bit() {
    for (s, &(rows, cols)) in SHAPES.iter().enumerate().filter(|(_, &(r, c))| r > c) {
        let len = rows * cols;
        let mut tall = [0.0; MAX];
        fill_normalised(&mut tall[..len], s as u64);
        let mut wide = [0.0; MAX];
        transpose(&tall[..len], rows, cols, &mut wide[..len]);
        run(&mut tall[..len], (rows, cols), 5, STANDARD);
        run(&mut wide[..len], (cols, rows), 5, STANDARD);
        let mut back = [0.0; MAX];
        transpose(&wide[..len], cols, rows, &mut back[..len]);
        assert_same_bits(&back[..len], &tall[..len], (rows, cols));
    }
}

/// Whether the symmetric `m`x`m` matrix `g` is positive definite: its Cholesky factorisation,
/// computed in place, meets only positive pivots.
fn positive_definite(g: &mut [f64], m: usize) -> bool {
    for j in 0..m {
        let pivot = g[j * m + j] - (0..j).map(|p| g[j * m + p] * g[j * m + p]).sum::<f64>();
        if pivot <= 0.0 {
            return false;
        }
        let root = libm::sqrt(pivot);
        g[j * m + j] = root;
        for i in j + 1..m {
            let dot: f64 = (0..j).map(|p| g[i * m + p] * g[j * m + p]).sum();
            g[i * m + j] = (g[i * m + j] - dot) / root;
        }
    }
    true
}

/// Whether every singular value of the `rows`x`cols` matrix `x` lies in `(lo, hi)`: the Gram
/// matrix of its shorter side (whose eigenvalues are their squares) minus `lo²` times the
/// identity, and `hi²` times the identity minus it, are positive definite.
fn singular_values_within(x: &[f32], (rows, cols): (usize, usize), lo: f64, hi: f64) -> bool {
    let (m, n) = (rows.min(cols), rows.max(cols));
    let mut w = [0.0; MAX];
    for i in 0..rows {
        for j in 0..cols {
            let at = if rows > cols {
                j * rows + i
            } else {
                i * cols + j
            };
            w[at] = f64::from(x[i * cols + j]);
        }
    }
    let mut g = [0.0; MAX];
    gram(&w, m, n, &mut g);
    let (mut above, mut below) = (g, g.map(|v| -v));
    for i in 0..m {
        above[i * m + i] -= lo * lo;
        below[i * m + i] += hi * hi;
    }
    positive_definite(&mut above, m) && positive_definite(&mut below, m)
}

/// Five standard steps map every singular value in `[0.005, 1]` into `[0.6818, 1.1544]` (the
/// range of the scalar map `s -> a s + b s³ + c s⁵` iterated five times, scanned in `f64`);
/// the bounds checked leave 0.002 and 0.006 for the `f32` roundings.
#[test]
fn five_standard_steps_bring_singular_values_near_one() {
    let shapes = [(8, 32), (32, 8), (16, 16), (5, 12), (37, 100), (100, 37)];
    for (s, &(rows, cols)) in shapes.iter().enumerate() {
        let len = rows * cols;
        let mut x = [0.0; MAX];
        fill_normalised(&mut x[..len], 100 + s as u64);
        assert!(
            singular_values_within(&x[..len], (rows, cols), 0.005, 1.0 + 1e-6),
            "{rows}x{cols}: the input has a singular value outside [0.005, 1]"
        );
        run(&mut x[..len], (rows, cols), 5, STANDARD);
        assert!(
            singular_values_within(&x[..len], (rows, cols), 0.68, 1.16),
            "{rows}x{cols}: a singular value outside [0.68, 1.16] after five steps"
        );
    }
}

#[test]
#[should_panic(expected = "scratch")]
fn short_scratch_panics() {
    let mut x = [0.5; 12];
    let mut work = [0.0; 4];
    newton_schulz(&mut x, 3, 4, 1, STANDARD, &mut work);
}

#[cfg(feature = "parallel")]
#[test]
fn bits_do_not_depend_on_threads() {
    extern crate alloc;
    use crate::kernels::parallel::splits;
    use alloc::vec;
    let pool = |t| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(t)
            .build()
            .expect("pool")
    };
    let (one, two) = (pool(1), pool(2));
    for (rows, cols) in [(256, 512), (512, 256)] {
        let mut x0 = vec![0.0; rows * cols];
        fill_normalised(&mut x0, 7);
        let run = |x: &mut [f32]| {
            let mut work = vec![f32::NAN; newton_schulz_work(rows, cols)];
            let before = splits();
            newton_schulz(x, rows, cols, 2, STANDARD, &mut work);
            splits() - before
        };
        let mut serial = x0.clone();
        assert_eq!(one.install(|| run(&mut serial)), 0);
        let mut parallel = x0;
        assert!(
            two.install(|| run(&mut parallel)) > 0,
            "not split across threads"
        );
        assert_same_bits(&serial, &parallel, (rows, cols));
    }
}
