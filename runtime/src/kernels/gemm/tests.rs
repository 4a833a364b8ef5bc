//! `gemm` on every kernel the CPU has: against a naive `f64` reference, bit for bit against a
//! scalar reference that runs the documented sequence of roundings, and bit-identity across
//! paths, tile shapes, cache blockings, orientations and thread counts.
//!
//! The sweeps over small shapes use fixed-size buffers, so they run without `alloc`; the large
//! shapes need `alloc`, the thread pools `parallel`.

use super::micro::{k_blocks, packed, small};
use super::*;

/// The kernels this CPU runs (the x86 ones are skipped where it lacks them).
fn kernels() -> impl Iterator<Item = Capability> {
    Capability::ALL.into_iter().filter(|k| k.available())
}

/// Every microkernel of the kernels this CPU runs.
fn available_micros() -> impl Iterator<Item = Micro> {
    kernels().flat_map(|k| micros(k).iter().copied())
}

/// A deterministic value in `±[0.1, 1.1)`.
pub(crate) fn value(i: usize, salt: u64) -> f32 {
    let mut x =
        (i as u64 ^ salt.wrapping_mul(0x2545_F491_4F6C_DD1D)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 29;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 32;
    let u = (x >> 40) as f32 / (1u64 << 24) as f32;
    if x & 1 == 0 {
        0.1 + u
    } else {
        -0.1 - u
    }
}

/// How a test matrix is laid out in its buffer.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Layout {
    /// Row-major, rows padded by 3.
    Row,
    /// Column-major.
    Col,
    /// Neither stride is 1.
    Strided,
}

const LAYOUTS: [Layout; 3] = [Layout::Row, Layout::Col, Layout::Strided];

/// `(row_stride, col_stride)` of a `rows`x`cols` matrix.
fn strides(l: Layout, rows: usize, cols: usize) -> (usize, usize) {
    match l {
        Layout::Row => (cols + 3, 1),
        Layout::Col => (1, rows),
        Layout::Strided => (2 * cols + 1, 2),
    }
}

/// What is outside a view: NaN in operands (reading it would show in the result), a sentinel
/// in `C` (writing it would show).
const SENTINEL: f32 = 12345.0;

/// Fills `buf` with a `rows`x`cols` matrix laid out as `l`, `fill` elsewhere; returns strides.
fn fill(
    buf: &mut [f32],
    rows: usize,
    cols: usize,
    l: Layout,
    salt: u64,
    outside: f32,
) -> (usize, usize) {
    let (rs, cs) = strides(l, rows, cols);
    buf.fill(outside);
    for i in 0..rows {
        for j in 0..cols {
            buf[i * rs + j * cs] = value(i * cols + j, salt);
        }
    }
    (rs, cs)
}

/// The scalars tried, in turn: `(alpha, beta)`.
const SCALARS: [(f32, f32); 5] = [(1.0, 0.0), (1.0, 1.0), (0.5, -2.0), (-1.5, 0.0), (0.0, 0.5)];

/// Checks `got` (the result) against `alpha * A·B + beta * c0` in `f64`, with a tolerance of
/// `(k + 2) * eps` times the sum of magnitudes, and that nothing outside `C` changed.
fn check(
    Terms { alpha, a, b, beta }: Terms<'_>,
    c0: MatRef<'_>,
    got: MatRef<'_>,
    got_buf: &[f32],
    what: &dyn core::fmt::Debug,
) {
    let (m, k, n) = (a.rows(), a.cols(), b.cols());
    for i in 0..m {
        for j in 0..n {
            let (mut dot, mut mag) = (0.0f64, 0.0f64);
            for p in 0..k {
                let x = f64::from(a.at(i, p)) * f64::from(b.at(p, j));
                dot += x;
                mag += x.abs();
            }
            let old = if beta == 0.0 {
                0.0
            } else {
                f64::from(c0.at(i, j))
            };
            let want = f64::from(alpha) * dot + f64::from(beta) * old;
            let scale = f64::from(alpha).abs() * mag + (f64::from(beta) * old).abs();
            let tol = (k as f64 + 2.0) * f64::from(f32::EPSILON) * scale + 1e-30;
            let g = f64::from(got.at(i, j));
            assert!(
                (g - want).abs() <= tol,
                "{what:?} ({i}, {j}): got {g}, want {want} (tolerance {tol})"
            );
        }
    }
    let (rs, cs) = (got.row_stride(), got.col_stride());
    let inside = |idx: usize| (0..m).any(|i| (0..n).any(|j| i * rs + j * cs == idx));
    for (idx, &x) in got_buf.iter().enumerate() {
        if x.to_bits() != SENTINEL.to_bits() {
            assert!(inside(idx), "{what:?}: wrote outside C at {idx}");
        }
    }
}

const SMALL: usize = 640;
const SMALL_WS: usize = 4096;

/// One product of small shape with the given layouts and scalars, checked against the
/// reference; `c_init` is what `C` holds before (NaN tests that `beta == 0` does not read it).
fn run_small(
    kernel: Capability,
    (m, k, n): (usize, usize, usize),
    (la, lb, lc): (Layout, Layout, Layout),
    s: usize,
    c_nan: bool,
) {
    let (alpha, beta) = SCALARS[s % SCALARS.len()];
    let mut a_buf = [0.0; SMALL];
    let mut b_buf = [0.0; SMALL];
    let mut c_buf = [0.0; SMALL];
    let mut c0_buf = [0.0; SMALL];
    let (ars, acs) = fill(&mut a_buf, m, k, la, 1, f32::NAN);
    let (brs, bcs) = fill(&mut b_buf, k, n, lb, 2, f32::NAN);
    let (crs, ccs) = fill(&mut c0_buf, m, n, lc, 3, SENTINEL);
    if c_nan && beta == 0.0 {
        for i in 0..m {
            for j in 0..n {
                c0_buf[i * crs + j * ccs] = f32::NAN;
            }
        }
    }
    c_buf.copy_from_slice(&c0_buf);
    let a = MatRef::new(&a_buf, m, k, ars, acs);
    let b = MatRef::new(&b_buf, k, n, brs, bcs);
    let mut ws = [f32::NAN; SMALL_WS];
    let need = workspace_len_threads(m, k, n, 1);
    assert!(need <= SMALL_WS, "{m}x{k}x{n} needs {need}");
    gemm_on(
        kernel,
        alpha,
        a,
        b,
        beta,
        MatMut::new(&mut c_buf, m, n, crs, ccs),
        &mut ws[..need],
    );
    check(
        Terms { alpha, a, b, beta },
        MatRef::new(&c0_buf, m, n, crs, ccs),
        MatRef::new(&c_buf, m, n, crs, ccs),
        &c_buf,
        &(kernel, m, k, n, la, lb, lc, alpha, beta),
    );
}

#[test]
fn every_small_shape_matches_reference() {
    for kernel in kernels() {
        let mut s = 0;
        for m in 0..=17 {
            for k in 0..=17 {
                for n in 0..=17 {
                    // Three layout combinations per shape, rotating so the sweep covers all 27.
                    for t in 0..3 {
                        let idx = (m * 7 + k * 3 + n + t * 9) % 27;
                        let layouts = (LAYOUTS[idx % 3], LAYOUTS[idx / 3 % 3], LAYOUTS[idx / 9]);
                        run_small(kernel, (m, k, n), layouts, s, s % 2 == 0);
                        s += 1;
                    }
                }
            }
        }
    }
}

#[test]
fn every_layout_and_scalar_on_edge_shapes() {
    for (m, k, n) in [
        (1, 1, 1),
        (5, 7, 3),
        (6, 16, 16),
        (7, 17, 17),
        (13, 1, 9),
        (17, 3, 16),
    ] {
        for kernel in kernels() {
            for la in LAYOUTS {
                for lb in LAYOUTS {
                    for lc in LAYOUTS {
                        for s in 0..SCALARS.len() {
                            run_small(kernel, (m, k, n), (la, lb, lc), s, true);
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn beta_zero_overwrites_nan_and_alpha_zero_reads_nothing() {
    let a_buf = [f32::NAN; 12];
    let b_buf = [f32::INFINITY; 12];
    let mut c = [f32::NAN; 9];
    let mut ws = [0.0; 256];
    // alpha = 0: C = beta * C, the NaN operands are not read; beta = 0 overwrites NaN.
    gemm(
        0.0,
        MatRef::row_major(&a_buf, 3, 4),
        MatRef::row_major(&b_buf, 4, 3),
        0.0,
        MatMut::row_major(&mut c, 3, 3),
        &mut ws,
    );
    assert_eq!(c, [0.0; 9]);
    c = [2.0; 9];
    gemm(
        0.0,
        MatRef::row_major(&a_buf, 3, 4),
        MatRef::row_major(&b_buf, 4, 3),
        0.5,
        MatMut::row_major(&mut c, 3, 3),
        &mut ws,
    );
    assert_eq!(c, [1.0; 9]);
    // k = 0: C = beta * C.
    gemm(
        1.0,
        MatRef::row_major(&[], 3, 0),
        MatRef::row_major(&[], 0, 3),
        3.0,
        MatMut::row_major(&mut c, 3, 3),
        &mut ws,
    );
    assert_eq!(c, [3.0; 9]);
}

/// Shapes that take every path, both orientations, and `k` in one or several blocks.
const BIT_SHAPES: [(usize, usize, usize); 9] = [
    (1, 1, 1),
    (8, 8, 16),
    (16, 8, 4),
    (13, 40, 16),
    (37, 29, 45),
    (50, 300, 7),
    (23, 600, 20),
    (64, 9, 130),
    (70, 120, 33),
];

/// Length of each buffer of the bit-identity tests: enough for [`BIT_SHAPES`] and
/// [`SPLIT_SHAPES`] (`A` row-major, `B` column-major, `C` row-major, each padded as
/// [`strides`] says).
const BIT_LEN: usize = 16_384;

/// The buffers of one product, on the stack (256 KiB).
struct Bufs {
    a: [f32; BIT_LEN],
    b: [f32; BIT_LEN],
    c: [f32; BIT_LEN],
    ws: [f32; BIT_LEN],
}

/// `C` after `f` ran on fresh operands (`A` row-major, `B` column-major, `C` row-major).
fn result(
    m: usize,
    k: usize,
    n: usize,
    f: impl FnOnce(MatRef<'_>, MatRef<'_>, MatMut<'_>, &mut [f32]),
) -> [f32; BIT_LEN] {
    let mut o = Bufs {
        a: [0.0; BIT_LEN],
        b: [0.0; BIT_LEN],
        c: [0.0; BIT_LEN],
        ws: [f32::NAN; BIT_LEN],
    };
    let (ars, acs) = fill(&mut o.a, m, k, Layout::Row, 11, f32::NAN);
    let (brs, bcs) = fill(&mut o.b, k, n, Layout::Col, 12, f32::NAN);
    let (crs, ccs) = fill(&mut o.c, m, n, Layout::Row, 13, SENTINEL);
    f(
        MatRef::new(&o.a, m, k, ars, acs),
        MatRef::new(&o.b, k, n, brs, bcs),
        MatMut::new(&mut o.c, m, n, crs, ccs),
        &mut o.ws,
    );
    o.c
}

fn assert_same_bits(x: &[f32; BIT_LEN], y: &[f32; BIT_LEN], what: &dyn core::fmt::Debug) {
    for (i, (p, q)) in x.iter().zip(y.iter()).enumerate() {
        assert_eq!(
            p.to_bits(),
            q.to_bits(),
            "{what:?}: differs at {i}: {p} vs {q}"
        );
    }
}

/// A packed product with some tile shape.
type Tiles = fn(Terms<'_>, MatMut<'_>, &mut [f32], Blocking);

/// The product on `micro` along a given path with blocking `blk` (and `A` packed or not).
fn leaf_with(micro: Micro, t: Terms<'_>, c: MatMut<'_>, ws: &mut [f32], blk: Blocking, path: Path) {
    let run = Run {
        micro,
        piece_len: ws.len(),
        par: false,
        blk,
        path,
    };
    leaf(t, c, ws, run);
}

#[test]
fn bits_do_not_depend_on_path_tile_blocking_or_orientation() {
    for kernel in kernels() {
        for &micro in micros(kernel) {
            bits_agree_across_paths(kernel, micro);
        }
    }
}

/// Every path, blocking and orientation of `micro` gives the bits of `gemm_on(kernel)`.
fn bits_agree_across_paths(kernel: Capability, micro: Micro) {
    let t = micro.tile();
    for (m, k, n) in BIT_SHAPES {
        for (alpha, beta) in [(1.0, 0.0), (0.75, 1.25)] {
            let want = result(m, k, n, |a, b, c, ws| {
                gemm_on(kernel, alpha, a, b, beta, c, ws)
            });
            let what = (micro, m, k, n, alpha, beta);
            let blockings = [
                Blocking { mc: t.mr, nc: t.nr },
                Blocking {
                    mc: 2 * t.mr,
                    nc: 3 * t.nr,
                },
                Blocking {
                    mc: 5 * t.mr,
                    nc: t.nr,
                },
                t.blocking(),
            ];
            for blk in blockings {
                for pack_a in [false, true] {
                    let path = Path::Packed { pack_a };
                    let got = result(m, k, n, |a, b, c, ws| {
                        leaf_with(micro, Terms { alpha, a, b, beta }, c, ws, blk, path);
                    });
                    assert_same_bits(&want, &got, &(what, blk, pack_a));
                    let got = result(m, k, n, |a, b, c, ws| {
                        let t = Terms {
                            alpha,
                            a: b.t(),
                            b: a.t(),
                            beta,
                        };
                        leaf_with(micro, t, c.t(), ws, blk, path);
                    });
                    assert_same_bits(&want, &got, &(what, blk, pack_a, "transposed"));
                }
            }
            // The small path, where it applies (one `k` block, at most `nr` columns).
            if k <= KC && n <= t.nr {
                let got = result(m, k, n, |a, b, c, ws| {
                    let path = Path::Small;
                    leaf_with(
                        micro,
                        Terms { alpha, a, b, beta },
                        c,
                        ws,
                        t.blocking(),
                        path,
                    );
                });
                assert_same_bits(&want, &got, &(what, "small"));
            }
        }
    }
}

#[test]
fn bits_do_not_depend_on_the_tile_shape() {
    let kernel = Capability::Portable;
    for (m, k, n) in BIT_SHAPES {
        for (alpha, beta) in [(1.0, 0.0), (0.75, 1.25)] {
            let want = result(m, k, n, |a, b, c, ws| {
                gemm_on(kernel, alpha, a, b, beta, c, ws)
            });
            let what = (m, k, n, alpha, beta);
            let blk = Blocking { mc: 24, nc: 48 };
            // The last two run on one `f32` a lane, as a target without SIMD packs `B` once.
            let tiles: [(&str, Tiles); 6] = [
                ("4x8", |t, c, w, blk| {
                    packed::<Portable, 4, 1>(t, c, w, blk, true)
                }),
                ("8x16", |t, c, w, blk| {
                    packed::<Portable, 8, 2>(t, c, w, blk, true)
                }),
                ("3x24", |t, c, w, blk| {
                    packed::<Portable, 3, 3>(t, c, w, blk, false)
                }),
                ("12x8", |t, c, w, blk| {
                    packed::<Portable, 12, 1>(t, c, w, blk, true)
                }),
                ("4x4 scalar", |t, c, w, blk| {
                    packed::<f32, 4, 4>(t, c, w, blk, true)
                }),
                ("3x5 scalar", |t, c, w, blk| {
                    packed::<f32, 3, 5>(t, c, w, blk, false)
                }),
            ];
            for (name, f) in tiles {
                let got = result(m, k, n, |a, b, c, ws| {
                    f(Terms { alpha, a, b, beta }, c, ws, blk)
                });
                assert_same_bits(&want, &got, &(what, name));
            }
            if k <= KC && n <= 16 {
                let got = result(m, k, n, |a, b, c, ws| {
                    small::<Portable, SMALL_MR, 2>(Terms { alpha, a, b, beta }, c, ws);
                });
                assert_same_bits(&want, &got, &(what, "small"));
                let got = result(m, k, n, |a, b, c, ws| {
                    small::<Portable, 3, 2>(Terms { alpha, a, b, beta }, c, ws);
                });
                assert_same_bits(&want, &got, &(what, "small, 3 rows"));
            }
        }
    }
}

#[test]
fn avx512_takes_the_narrow_tile_where_the_wide_one_is_half_empty() {
    let plan = |m, k, n| Plan::new(Capability::Avx512, m, k, n, (n, 1));
    // A 5x5 convolution of one channel into 16 (64 images of 24x24 outputs): a 32-wide tile
    // would be half padding, and its transpose would pack every patch.
    let conv = plan(36864, 25, 16);
    assert_eq!((conv.micro, conv.transpose), (Micro::Avx512Narrow, false));
    // The MLP's first layer and its weight gradient fill 12x32 tiles.
    assert_eq!(plan(256, 784, 128).micro, Micro::Avx512);
    assert_eq!(plan(784, 256, 128).micro, Micro::Avx512);
    assert_eq!(
        Plan::new(Capability::Avx2Fma, 36864, 25, 16, (16, 1)).micro,
        Micro::Avx2
    );
}

/// Whether `kernel`'s `mul_add` rounds once, probed on `[-1, x]·[1, x]ᵀ` with `x = 1 + 2^-12`:
/// the accumulator becomes `-1`, then `mul_add(x, x, -1)`, which is `2^-11 + 2^-24` rounded
/// once and `2^-11` rounded twice.
fn fused(kernel: Capability) -> bool {
    let x = 1.0 + f32::EPSILON * 2048.0;
    let (a, b, mut c, mut ws) = ([-1.0, x], [1.0, x], [0.0f32], [0.0; 64]);
    gemm_on(
        kernel,
        1.0,
        MatRef::row_major(&a, 1, 2),
        MatRef::row_major(&b, 2, 1),
        0.0,
        MatMut::row_major(&mut c, 1, 1),
        &mut ws,
    );
    let once = libm::fmaf(x, x, -1.0);
    assert_ne!(once, x * x - 1.0, "the probe tells the roundings apart");
    assert!(c[0] == once || c[0] == x * x - 1.0, "{kernel:?}: {}", c[0]);
    c[0] == once
}

/// `alpha * A·B + beta * C0` element by element in scalar `f32`, with the roundings the module
/// docs promise: per block of `k` an accumulator from zero, one `mul_add` per step (rounded
/// once when `fused`), then `alpha * acc + beta * C` for the first block and `alpha * acc + C`
/// for the others (`alpha * acc` alone when `beta == 0`).
fn scalar_reference(t: Terms<'_>, c0: MatRef<'_>, fused: bool, out: &mut [f32]) {
    let mul_add = |x: f32, y: f32, z: f32| {
        if fused {
            libm::fmaf(x, y, z)
        } else {
            x * y + z
        }
    };
    let (m, k, n) = (t.a.rows(), t.a.cols(), t.b.cols());
    for i in 0..m {
        for j in 0..n {
            let mut c = c0.at(i, j);
            for (bi, (p0, len)) in k_blocks(k).enumerate() {
                let mut acc = 0.0;
                for p in p0..p0 + len {
                    acc = mul_add(t.a.at(i, p), t.b.at(p, j), acc);
                }
                let v = acc * t.alpha;
                c = match (bi, t.beta == 0.0) {
                    (0, true) => v,
                    (0, false) => mul_add(c, t.beta, v),
                    _ => mul_add(c, 1.0, v),
                };
            }
            out[i * n + j] = c;
        }
    }
}

#[test]
fn every_kernel_rounds_as_documented() {
    for kernel in kernels() {
        let fused = fused(kernel);
        if kernel != Capability::Portable || cfg!(target_feature = "fma") {
            assert!(fused, "{kernel:?} rounds mul_add once");
        }
        for (m, k, n) in BIT_SHAPES.into_iter().chain([(3, 700, 5), (20, 257, 9)]) {
            for (alpha, beta) in [(1.0, 0.0), (0.75, 1.25), (-2.0, 1.0)] {
                let mut want = [0.0; BIT_LEN];
                let got = result(m, k, n, |a, b, c, ws| {
                    let c0 = MatRef::new(&*c.data, m, n, c.rs, c.cs);
                    scalar_reference(Terms { alpha, a, b, beta }, c0, fused, &mut want);
                    gemm_on(kernel, alpha, a, b, beta, c, ws);
                });
                let (crs, _) = strides(Layout::Row, m, n);
                for i in 0..m {
                    for j in 0..n {
                        let (g, w) = (got[i * crs + j], want[i * n + j]);
                        assert_eq!(
                            g.to_bits(),
                            w.to_bits(),
                            "{kernel:?} {m}x{k}x{n} ({i}, {j}): {g} against {w}"
                        );
                    }
                }
            }
        }
    }
}

/// The scalar tiles of a target without SIMD ([`scalar::product`]) on the host: the bits of the
/// portable kernel, whose `mul_add` rounds as theirs does in a build without
/// `fusegraph_core_fma`, for every shape of [`BIT_SHAPES`] that fits the buffers in every
/// layout of `A`, `B` and `C`, whole tiles and edges, `k` in one block or several; nothing
/// outside `C` is written.
#[test]
fn the_scalar_tiles_give_the_bits_of_the_portable_kernel() {
    let mut covered = 0;
    for (m, k, n) in BIT_SHAPES
        .into_iter()
        .chain([(4, 4, 4), (5, 3, 9), (3, 700, 5)])
    {
        for (la, lb, lc) in LAYOUTS
            .into_iter()
            .flat_map(|la| LAYOUTS.into_iter().map(move |lb| (la, lb)))
            .flat_map(|(la, lb)| LAYOUTS.into_iter().map(move |lc| (la, lb, lc)))
        {
            let fits = |rows: usize, cols: usize, l: Layout| {
                let (rs, cs) = strides(l, rows, cols);
                (rows - 1) * rs + (cols - 1) * cs < BIT_LEN
            };
            if !(fits(m, k, la) && fits(k, n, lb) && fits(m, n, lc)) {
                continue;
            }
            covered += 1;
            for (alpha, beta) in [(1.0, 0.0), (0.75, 1.25), (-2.0, 1.0)] {
                let mut o = [[0.0; BIT_LEN]; 4];
                let (ars, acs) = fill(&mut o[0], m, k, la, 21, f32::NAN);
                let (brs, bcs) = fill(&mut o[1], k, n, lb, 22, f32::NAN);
                let (crs, ccs) = fill(&mut o[2], m, n, lc, 23, SENTINEL);
                o[3] = o[2];
                let [a, b, c, want] = &mut o;
                let (a, b) = (
                    MatRef::new(a, m, k, ars, acs),
                    MatRef::new(b, k, n, brs, bcs),
                );
                let mut ws = [f32::NAN; BIT_LEN];
                let need = workspace_len_threads(m, k, n, 1);
                let want_c = MatMut::new(want, m, n, crs, ccs);
                gemm_on(
                    Capability::Portable,
                    alpha,
                    a,
                    b,
                    beta,
                    want_c,
                    &mut ws[..need],
                );
                let terms = Terms { alpha, a, b, beta };
                scalar::product(terms, MatMut::new(c, m, n, crs, ccs));
                let what = (m, k, n, la, lb, lc, alpha, beta);
                for (i, (x, y)) in c.iter().zip(want.iter()).enumerate() {
                    assert_eq!(x.to_bits(), y.to_bits(), "{what:?} at {i}: {x} vs {y}");
                }
            }
        }
    }
    assert!(covered >= 80, "{covered} shapes and layouts");
}

#[test]
fn a_packed_b_gives_the_bits_of_gemm_on_every_tile() {
    for kernel in kernels() {
        for &micro in micros(kernel) {
            for (m, k, n) in BIT_SHAPES {
                for (alpha, beta) in [(1.0, 0.0), (0.75, 1.25)] {
                    let want = result(m, k, n, |a, b, c, ws| {
                        gemm_on(kernel, alpha, a, b, beta, c, ws)
                    });
                    let mut whole = [f32::NAN; 2 * BIT_LEN];
                    let got = result(m, k, n, |a, b, c, _| {
                        let panels = &mut whole[..micro::whole_len(k, n, micro.tile().nr)];
                        pack_whole_on(micro, b, panels);
                        multiply_packed_on(micro, (alpha, a, beta), panels, c);
                    });
                    assert_same_bits(&want, &got, &(micro, m, k, n, alpha, beta));
                }
            }
        }
    }
}

/// One small product through [`pack_b_on`] and [`gemm_packed`] against [`gemm_on`], bit for
/// bit, with the given layouts and scalars; `C` outside the view must not change either.
fn run_small_packed(
    kernel: Capability,
    (m, k, n): (usize, usize, usize),
    (la, lb, lc): (Layout, Layout, Layout),
    s: usize,
) {
    let (alpha, beta) = SCALARS[s % SCALARS.len()];
    let mut a_buf = [0.0; SMALL];
    let mut b_buf = [0.0; SMALL];
    let mut want = [0.0; SMALL];
    let (ars, acs) = fill(&mut a_buf, m, k, la, 1, f32::NAN);
    let (brs, bcs) = fill(&mut b_buf, k, n, lb, 2, f32::NAN);
    let (crs, ccs) = fill(&mut want, m, n, lc, 3, SENTINEL);
    let mut got = want;
    let a = MatRef::new(&a_buf, m, k, ars, acs);
    let b = MatRef::new(&b_buf, k, n, brs, bcs);
    let mut ws = [f32::NAN; SMALL_WS];
    let c = MatMut::new(&mut want, m, n, crs, ccs);
    gemm_on(kernel, alpha, a, b, beta, c, &mut ws);
    let packed = pack_b_on(kernel, b, m, &mut ws).expect("the workspace holds B");
    assert_eq!((packed.rows(), packed.cols()), (k, n));
    gemm_packed(
        alpha,
        a,
        &packed,
        beta,
        MatMut::new(&mut got, m, n, crs, ccs),
    );
    for (i, (x, y)) in want.iter().zip(&got).enumerate() {
        assert_eq!(
            x.to_bits(),
            y.to_bits(),
            "{:?} at {i}: {x} vs {y}",
            (kernel, m, k, n, la, lb, lc, alpha, beta)
        );
    }
}

#[test]
fn a_packed_b_gives_the_bits_of_gemm_on_every_small_shape_and_layout() {
    for kernel in kernels() {
        let mut s = 0;
        for m in 0..=17 {
            for k in 0..=17 {
                for n in (0..=17).step_by(3) {
                    let idx = (m * 7 + k * 3 + n) % 27;
                    let layouts = (LAYOUTS[idx % 3], LAYOUTS[idx / 3 % 3], LAYOUTS[idx / 9]);
                    run_small_packed(kernel, (m, k, n), layouts, s);
                    s += 1;
                }
            }
        }
    }
}

#[test]
fn packing_b_asks_for_room_and_reads_no_more() {
    let b_buf = [1.0; 6];
    let b = MatRef::row_major(&b_buf, 2, 3);
    let need = packed_b_len(2, 3);
    let mut ws = [0.0; 256];
    assert!(need <= ws.len());
    assert!(pack_b(b, 4, &mut ws[..need - 1]).is_none());
    assert!(pack_b(b, 4, &mut ws[..need]).is_some());
}

/// The product split into `pieces` on `micro`, the halves run one after the other (`par ==
/// false`) or under `rayon::join`.
fn run_split(
    micro: Micro,
    (m, k, n): (usize, usize, usize),
    pieces: usize,
    par: bool,
) -> [f32; BIT_LEN] {
    result(m, k, n, |a, b, c, ws| {
        let t = micro.tile();
        let piece_len = piece_len(m, k, n, t);
        assert!(piece_len * pieces <= ws.len());
        let run = Run {
            micro,
            piece_len,
            par,
            blk: t.blocking(),
            path: path(m, k, n, t),
        };
        let t = Terms {
            alpha: 0.5,
            a,
            b,
            beta: 2.0,
        };
        split(t, c, ws, pieces, run);
    })
}

/// Shapes for the split tests, which split the rows of `C`.
const SPLIT_SHAPES: [(usize, usize, usize); 4] =
    [(120, 30, 40), (50, 300, 12), (150, 64, 8), (60, 20, 60)];

#[test]
fn bits_do_not_depend_on_the_split() {
    for micro in available_micros() {
        for shape in SPLIT_SHAPES {
            let want = run_split(micro, shape, 1, false);
            for pieces in [2, 3] {
                let got = run_split(micro, shape, pieces, false);
                assert_same_bits(&want, &got, &(micro, shape, pieces));
            }
        }
    }
}

#[cfg(feature = "parallel")]
#[test]
fn bits_do_not_depend_on_threads() {
    let pool = |t| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(t)
            .build()
            .expect("pool")
    };
    let (one, two) = (pool(1), pool(2));
    for micro in available_micros() {
        for shape in SPLIT_SHAPES {
            let want = run_split(micro, shape, 1, false);
            for pieces in [2, 3] {
                let got1 = one.install(|| run_split(micro, shape, pieces, true));
                let got2 = two.install(|| run_split(micro, shape, pieces, true));
                assert_same_bits(&want, &got1, &(micro, shape, pieces, 1));
                assert_same_bits(&want, &got2, &(micro, shape, pieces, 2));
            }
        }
    }
}

#[cfg(feature = "parallel")]
#[test]
fn public_gemm_splits_above_threshold_with_the_same_bits() {
    extern crate alloc;
    use alloc::vec;
    let (m, k, n) = (420, 200, 110);
    assert!(wants_threads(m, k, n));
    let a: alloc::vec::Vec<f32> = (0..m * k).map(|i| value(i, 21)).collect();
    let b: alloc::vec::Vec<f32> = (0..k * n).map(|i| value(i, 22)).collect();
    let run = |threads: usize, ws_threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("pool");
        pool.install(|| {
            let mut c = vec![f32::NAN; m * n];
            let mut ws = vec![0.0; workspace_len_threads(m, k, n, ws_threads)];
            gemm(
                1.0,
                MatRef::row_major(&a, m, k),
                MatRef::row_major(&b, k, n),
                0.0,
                MatMut::row_major(&mut c, m, n),
                &mut ws,
            );
            c
        })
    };
    let serial = run(1, 1);
    for (threads, ws_threads) in [(2, 2), (2, 1), (3, 3), (1, 2)] {
        let got = run(threads, ws_threads);
        assert!(
            serial
                .iter()
                .zip(&got)
                .all(|(x, y)| x.to_bits() == y.to_bits()),
            "{threads} threads, workspace for {ws_threads}"
        );
    }
}

#[cfg(feature = "alloc")]
#[test]
fn large_and_odd_shapes_match_reference() {
    extern crate alloc;
    use alloc::vec;
    let shapes = [
        (33, 65, 129, false, false),
        (256, 784, 128, false, false),
        (784, 256, 128, true, false),
        (256, 128, 784, false, true),
        (256, 128, 10, false, false),
        (128, 256, 10, true, false),
        (256, 10, 128, false, true),
        (7, 1000, 9, false, true),
        (130, 513, 66, true, true),
    ];
    for (i, &(m, k, n, ta, tb)) in shapes.iter().enumerate() {
        let (alpha, beta) = SCALARS[i % SCALARS.len()];
        let a_buf: alloc::vec::Vec<f32> = (0..m * k).map(|i| value(i, 31)).collect();
        let b_buf: alloc::vec::Vec<f32> = (0..k * n).map(|i| value(i, 32)).collect();
        let c0: alloc::vec::Vec<f32> = (0..m * n).map(|i| value(i, 33)).collect();
        let a = if ta {
            MatRef::row_major(&a_buf, k, m).t()
        } else {
            MatRef::row_major(&a_buf, m, k)
        };
        let b = if tb {
            MatRef::row_major(&b_buf, n, k).t()
        } else {
            MatRef::row_major(&b_buf, k, n)
        };
        for kernel in kernels() {
            let mut c = c0.clone();
            let mut ws = vec![0.0; workspace_len(m, k, n)];
            let c_view = MatMut::row_major(&mut c, m, n);
            gemm_on(kernel, alpha, a, b, beta, c_view, &mut ws);
            let c0_view = MatRef::row_major(&c0, m, n);
            // No sentinel around C here: every element is inside.
            let marked = vec![SENTINEL; c.len()];
            check(
                Terms { alpha, a, b, beta },
                c0_view,
                MatRef::row_major(&c, m, n),
                &marked,
                &(kernel, m, k, n, ta, tb),
            );
        }
    }
}

#[test]
fn k_blocks_cover_k_in_order() {
    for k in [0, 1, KC - 1, KC, KC + 1, 784, 3 * KC + 17] {
        let mut next = 0;
        let mut longest = 0;
        for (start, len) in k_blocks(k) {
            assert_eq!(start, next);
            assert!(len > 0 && len <= KC);
            longest = longest.max(len);
            next += len;
        }
        assert_eq!(next, k);
        assert_eq!(longest, kc_max(k));
    }
}

#[test]
fn the_cheap_workspace_bound_covers_every_tile_and_orientation() {
    let sizes = [
        1, 2, 5, 11, 12, 16, 17, 31, 64, 100, 191, 192, 257, 1024, 3000,
    ];
    for m in sizes {
        for k in sizes {
            for n in sizes {
                let (bound, need) = (piece_len_bound(m, k, n), piece_len_any(m, k, n));
                assert!(bound >= need, "{m}x{k}x{n}: bound {bound} below {need}");
                assert!(
                    bound <= 4 * need + 64 * kc_max(k),
                    "{m}x{k}x{n}: bound {bound} far above {need}"
                );
            }
        }
    }
}

#[test]
#[should_panic(expected = "B has 4 rows")]
fn mismatched_shapes_panic() {
    let x = [0.0; 12];
    let mut c = [0.0; 9];
    gemm(
        1.0,
        MatRef::row_major(&x, 3, 3),
        MatRef::row_major(&x, 4, 3),
        0.0,
        MatMut::row_major(&mut c, 3, 3),
        &mut [0.0; 256],
    );
}

#[test]
#[should_panic(expected = "size it with workspace_len")]
fn short_workspace_panics() {
    let x = [0.0; 400];
    let mut c = [0.0; 400];
    gemm(
        1.0,
        MatRef::row_major(&x, 20, 20),
        MatRef::row_major(&x, 20, 20),
        0.0,
        MatMut::row_major(&mut c, 20, 20),
        &mut [0.0; 16],
    );
}

#[test]
#[should_panic(expected = "does not fit")]
fn view_past_the_end_panics() {
    let _ = MatRef::row_major(&[0.0; 5], 2, 3);
}

#[test]
#[should_panic(expected = "overlap")]
fn overlapping_output_panics() {
    let _ = MatMut::new(&mut [0.0; 16], 3, 3, 2, 1);
}
