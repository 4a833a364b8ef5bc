//! W2 of DESIGN.md, the GEMM part: `fusegraph_runtime::kernels::gemm` against
//! `matrixmultiply::sgemm`, the `gemm` crate and a simple triple loop, measured in one run.
//!
//! ```text
//! RUSTFLAGS="-C target-cpu=native" CARGO_TARGET_DIR=target/native \
//!     cargo run --release --example bench_gemm
//! ```
//!
//! Our kernel runs on the instruction set [`Capability::active`] picks when the program starts
//! (AVX-512F, AVX2+FMA, or `wide`'s `f32x8` as compiled), as `matrixmultiply` and `gemm`
//! detect the CPU at run time: the default build is as fast as a native one. The column
//! "portable" runs our kernel on `f32x8` as this build compiled it (two SSE2 halves on x86_64
//! without `-C target-cpu`, 4x8 tiles): what the default build ran before run-time dispatch.
//! A separate `CARGO_TARGET_DIR` keeps a `RUSTFLAGS` build from invalidating the ordinary one.
//!
//! Shapes: the products of one train step of an MLP 784-128(ReLU)-10 at batch 32 and 256
//! (forward `X·W1`, `H·W2`; backward `Xᵀ·dH`, `Hᵀ·dY` for the weight gradients and `dY·W2ᵀ`,
//! `dH·W1ᵀ` for the input gradients, the transposes being strided views), and of an 8-16-4
//! MLP at batch 8. Every implementation computes `C = A·B` (beta = 0) from the same operands.
//!
//! The first table is single-threaded: everything runs inside a one-thread rayon pool,
//! `matrixmultiply` is built without its `threading` feature and `gemm` gets
//! `Parallelism::None`. Variants of one shape are timed round-robin, `REPS` samples each (every
//! sample after one untimed call, so that no variant inherits the caches of another), and the
//! table gives GFLOP/s as median (best) and the ratio of medians to `matrixmultiply`. These
//! single-threaded times are the thread's on-CPU time (on 64-bit Linux), which keeps other
//! processes on a shared machine out of the numbers; the two-thread ones are wall-clock. Then:
//! the sum of the tiny model's five products (one train step's worth), the three largest
//! products with two threads, and our kernel around `PARALLEL_FLOPS`, serial against split in
//! two under `rayon::join`. The load average is printed first: on a busy machine the
//! two-thread numbers mean little.
//!
//! The whole run takes about 20 seconds.

use fusegraph_runtime::kernels::gemm::{self as fg, MatMut, MatRef, PARALLEL_FLOPS};
use fusegraph_runtime::lane::Capability;
use std::hint::black_box;
use std::time::Instant;

/// Timed samples per variant.
const REPS: usize = 15;
/// Floating-point operations one sample does (it repeats the product as often as needed).
const SAMPLE_FLOPS: f64 = 1e8;

/// A deterministic value in `±[0.1, 1.1)`.
fn value(i: usize, salt: u64) -> f32 {
    let mut x = (i as u64 ^ salt).wrapping_mul(0x9E37_79B9_7F4A_7C15);
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

/// One product `C (m x n) = A (m x k) · B (k x n)`; `ta`/`tb`: the operand is the transpose of
/// a row-major matrix (as `Xᵀ` and `Wᵀ` are in the backward pass).
#[derive(Clone, Copy)]
struct Shape {
    name: &'static str,
    m: usize,
    k: usize,
    n: usize,
    ta: bool,
    tb: bool,
}

impl Shape {
    fn flops(&self) -> f64 {
        2.0 * (self.m * self.k * self.n) as f64
    }

    /// `(row stride, column stride)` of A and of B.
    fn strides(&self) -> ((usize, usize), (usize, usize)) {
        let a = if self.ta { (1, self.m) } else { (self.k, 1) };
        let b = if self.tb { (1, self.k) } else { (self.n, 1) };
        (a, b)
    }
}

/// Operands, result and workspace of one shape.
struct Bufs {
    a: Vec<f32>,
    b: Vec<f32>,
    c: Vec<f32>,
    ws: Vec<f32>,
}

impl Bufs {
    fn new(s: &Shape, threads: usize) -> Self {
        Bufs {
            a: (0..s.m * s.k).map(|i| value(i, 1)).collect(),
            b: (0..s.k * s.n).map(|i| value(i, 2)).collect(),
            c: vec![0.0; s.m * s.n],
            ws: vec![0.0; fg::workspace_len_threads(s.m, s.k, s.n, threads)],
        }
    }
}

/// Our kernel.
fn run_fusegraph(s: &Shape, bf: &mut Bufs) {
    let Bufs { a, b, c, ws } = bf;
    let ((ars, acs), (brs, bcs)) = s.strides();
    let a = MatRef::new(a, s.m, s.k, ars, acs);
    let b = MatRef::new(b, s.k, s.n, brs, bcs);
    fg::gemm(1.0, a, b, 0.0, MatMut::row_major(c, s.m, s.n), ws);
}

/// Our kernel on `wide`'s `f32x8` as this build compiled it.
fn run_portable(s: &Shape, bf: &mut Bufs) {
    let Bufs { a, b, c, ws } = bf;
    let ((ars, acs), (brs, bcs)) = s.strides();
    let a = MatRef::new(a, s.m, s.k, ars, acs);
    let b = MatRef::new(b, s.k, s.n, brs, bcs);
    let c = MatMut::row_major(c, s.m, s.n);
    fg::gemm_on(Capability::Portable, 1.0, a, b, 0.0, c, ws);
}

/// `matrixmultiply::sgemm` (allocates its packing buffers on every call).
fn run_matrixmultiply(s: &Shape, bf: &mut Bufs) {
    let ((ars, acs), (brs, bcs)) = s.strides();
    // SAFETY: the pointers come from vectors that hold the m x k, k x n and m x n matrices
    // with these strides, `c` does not alias `a` or `b`, and all stay alive for the call.
    unsafe {
        matrixmultiply::sgemm(
            s.m,
            s.k,
            s.n,
            1.0,
            bf.a.as_ptr(),
            ars as isize,
            acs as isize,
            bf.b.as_ptr(),
            brs as isize,
            bcs as isize,
            0.0,
            bf.c.as_mut_ptr(),
            s.n as isize,
            1,
        );
    }
}

/// The `gemm` crate; its `alpha` scales the old `C` (not read here) and `beta` the product.
fn run_gemm_crate(s: &Shape, bf: &mut Bufs, par: gemm::Parallelism) {
    let ((ars, acs), (brs, bcs)) = s.strides();
    // SAFETY: as for `run_matrixmultiply`; `read_dst = false` so `C` is only written.
    unsafe {
        gemm::gemm(
            s.m,
            s.n,
            s.k,
            bf.c.as_mut_ptr(),
            1,
            s.n as isize,
            false,
            bf.a.as_ptr(),
            acs as isize,
            ars as isize,
            bf.b.as_ptr(),
            bcs as isize,
            brs as isize,
            0.0,
            1.0,
            false,
            false,
            false,
            par,
        );
    }
}

fn run_gemm_serial(s: &Shape, bf: &mut Bufs) {
    run_gemm_crate(s, bf, gemm::Parallelism::None);
}

fn run_gemm_two(s: &Shape, bf: &mut Bufs) {
    run_gemm_crate(s, bf, gemm::Parallelism::Rayon(2));
}

/// The simple triple loop, `i`-`p`-`j` order so the inner loop runs along a row of `C`.
fn run_naive(s: &Shape, bf: &mut Bufs) {
    let ((ars, acs), (brs, bcs)) = s.strides();
    let (a, b, c) = (&bf.a, &bf.b, &mut bf.c);
    c.fill(0.0);
    for i in 0..s.m {
        let row = &mut c[i * s.n..(i + 1) * s.n];
        for p in 0..s.k {
            let x = a[i * ars + p * acs];
            for (j, y) in row.iter_mut().enumerate() {
                *y += x * b[p * brs + j * bcs];
            }
        }
    }
}

/// A clock for one thread: its on-CPU time on 64-bit Linux (`CLOCK_THREAD_CPUTIME_ID`), so
/// that other processes on a busy machine do not count; the wall clock elsewhere.
struct Clock {
    wall: Instant,
    cpu: Option<f64>,
}

impl Clock {
    #[cfg(all(target_os = "linux", target_pointer_width = "64"))]
    fn cpu_seconds() -> Option<f64> {
        #[repr(C)]
        struct Timespec {
            sec: i64,
            nsec: i64,
        }
        extern "C" {
            fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
        }
        const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
        let mut ts = Timespec { sec: 0, nsec: 0 };
        // SAFETY: `clock_gettime` of the C library that std links on Linux writes one
        // `timespec` (two 64-bit fields on 64-bit Linux, as declared) through the pointer,
        // which points to a live, writable `Timespec`.
        let rc = unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        (rc == 0).then_some(ts.sec as f64 + ts.nsec as f64 * 1e-9)
    }

    #[cfg(not(all(target_os = "linux", target_pointer_width = "64")))]
    fn cpu_seconds() -> Option<f64> {
        None
    }

    /// Starts a thread-time clock with `cpu`, a wall clock without.
    fn start(cpu: bool) -> Self {
        Clock {
            wall: Instant::now(),
            cpu: if cpu { Self::cpu_seconds() } else { None },
        }
    }

    /// Seconds since `start`.
    fn seconds(&self) -> f64 {
        match (self.cpu, Self::cpu_seconds()) {
            (Some(a), Some(b)) => b - a,
            _ => self.wall.elapsed().as_secs_f64(),
        }
    }
}

/// Median and best of a list of seconds.
fn stats(t: &mut [f64]) -> (f64, f64) {
    t.sort_by(f64::total_cmp);
    (t[t.len() / 2], t[0])
}

/// A named implementation.
type Run = (&'static str, fn(&Shape, &mut Bufs));

/// Times `runs` round-robin, `REPS` samples each of `iters` calls of `each`: (median, best)
/// seconds per call.
/// With `cpu`, the time is the calling thread's on-CPU time (see [`Clock`]), else wall-clock.
fn measure_with(
    runs: &[Run],
    iters: usize,
    cpu: bool,
    mut each: impl FnMut(fn(&Shape, &mut Bufs)),
) -> Vec<(f64, f64)> {
    let mut times = vec![Vec::with_capacity(REPS); runs.len()];
    for rep in 0..REPS {
        for idx in 0..runs.len() {
            let v = (idx + rep) % runs.len();
            // One untimed call first, so that no variant pays for the caches the previous one
            // left behind.
            each(runs[v].1);
            let t = Clock::start(cpu);
            for _ in 0..iters {
                each(runs[v].1);
            }
            times[v].push(t.seconds() / iters as f64);
        }
    }
    times.iter_mut().map(|t| stats(t)).collect()
}

/// Times `runs` on `s`: (median, best) seconds per product.
fn measure(s: &Shape, bf: &mut Bufs, runs: &[Run], cpu: bool) -> Vec<(f64, f64)> {
    let iters = ((SAMPLE_FLOPS / s.flops()) as usize).max(1);
    measure_with(runs, iters, cpu, |run| {
        run(s, bf);
        black_box(&mut bf.c);
    })
}

/// Checks our result against `matrixmultiply`'s, to relative 1e-4.
fn check(s: &Shape, bf: &mut Bufs) {
    run_matrixmultiply(s, bf);
    let want = bf.c.clone();
    run_fusegraph(s, bf);
    for (x, y) in bf.c.iter().zip(&want) {
        assert!(
            (x - y).abs() <= 1e-4 * (1.0 + y.abs()) * (s.k as f32).sqrt(),
            "{}: {x} vs {y}",
            s.name
        );
    }
}

fn shapes() -> Vec<Shape> {
    let sh = |name, m, k, n, ta, tb| Shape {
        name,
        m,
        k,
        n,
        ta,
        tb,
    };
    let mut v = Vec::new();
    for (bsz, names) in [
        (256, ["X·W1", "H·W2", "Xᵀ·dH", "dH·W1ᵀ", "Hᵀ·dY", "dY·W2ᵀ"]),
        (32, ["X·W1", "H·W2", "Xᵀ·dH", "dH·W1ᵀ", "Hᵀ·dY", "dY·W2ᵀ"]),
    ] {
        v.push(sh(names[0], bsz, 784, 128, false, false));
        v.push(sh(names[1], bsz, 128, 10, false, false));
        v.push(sh(names[2], 784, bsz, 128, true, false));
        v.push(sh(names[3], bsz, 128, 784, false, true));
        v.push(sh(names[4], 128, bsz, 10, true, false));
        v.push(sh(names[5], bsz, 10, 128, false, true));
    }
    v
}

/// The five products of one train step of an 8-16-4 MLP at batch 8.
fn tiny_shapes() -> [Shape; 5] {
    let sh = |name, m, k, n, ta, tb| Shape {
        name,
        m,
        k,
        n,
        ta,
        tb,
    };
    [
        sh("X·W1", 8, 8, 16, false, false),
        sh("H·W2", 8, 16, 4, false, false),
        sh("Hᵀ·dY", 16, 8, 4, true, false),
        sh("dY·W2ᵀ", 8, 4, 16, false, true),
        sh("Xᵀ·dH", 8, 8, 16, true, false),
    ]
}

fn batch_of(s: &Shape) -> usize {
    if s.ta {
        s.k
    } else {
        s.m
    }
}

fn single_threaded() {
    println!(
        "One thread. GFLOP/s, median (best) of {REPS}; ratio = median / matrixmultiply's median."
    );
    println!(
        "{:<8} {:>5} {:>13} {:>20} {:>15} {:>20} {:>20} {:>20}",
        "product",
        "batch",
        "m x k x n",
        "fusegraph",
        "matrixmultiply",
        "gemm",
        "triple loop",
        "portable"
    );
    let mut all: Vec<Shape> = shapes();
    all.extend(tiny_shapes().iter().take(4));
    for s in &all {
        let mut bf = Bufs::new(s, 1);
        check(s, &mut bf);
        print_row(s, &measure(s, &mut bf, &ONE_THREAD, true));
    }
}

fn two_threads() {
    println!("\nTwo threads (matrixmultiply has no threads without its `threading` feature).");
    println!(
        "{:<8} {:>5} {:>13} {:>20} {:>15} {:>20}",
        "product", "batch", "m x k x n", "fusegraph", "matrixmultiply", "gemm"
    );
    for s in shapes().iter().filter(|s| s.flops() > 5e7) {
        let mut bf = Bufs::new(s, 2);
        let runs: [Run; 3] = [
            ("fusegraph", run_fusegraph),
            ("matrixmultiply", run_matrixmultiply),
            ("gemm", run_gemm_two),
        ];
        print_row(s, &measure(s, &mut bf, &runs, false));
    }
}

/// One row of a table: the product, then the median (best) GFLOP/s of each run in `t`
/// (fusegraph, matrixmultiply, then the others), each but matrixmultiply's with its ratio to
/// matrixmultiply's median.
fn print_row(s: &Shape, t: &[(f64, f64)]) {
    let gf = |x: f64| s.flops() / x / 1e9;
    let mm = t[1].0;
    let cell =
        |(med, best): (f64, f64)| format!("{:6.1} ({:5.1}) {:4.2}", gf(med), gf(best), mm / med);
    let mut row = format!(
        "{:<8} {:>5} {:>13} {:>20} {:>15}",
        s.name,
        batch_of(s),
        format!("{}x{}x{}", s.m, s.k, s.n),
        cell(t[0]),
        format!("{:6.1} ({:5.1})", gf(t[1].0), gf(t[1].1)),
    );
    for &x in &t[2..] {
        row += &format!(" {:>20}", cell(x));
    }
    println!("{row}");
}

/// The single-threaded implementations.
const ONE_THREAD: [Run; 5] = [
    ("fusegraph", run_fusegraph),
    ("matrixmultiply", run_matrixmultiply),
    ("gemm", run_gemm_serial),
    ("triple loop", run_naive),
    ("portable", run_portable),
];

/// One train step's worth of the tiny model's products, in nanoseconds.
fn tiny_step() {
    let shapes = tiny_shapes();
    let mut bufs: Vec<Bufs> = shapes.iter().map(|s| Bufs::new(s, 1)).collect();
    let t = measure_with(&ONE_THREAD, 20_000, true, |run| {
        for (s, bf) in shapes.iter().zip(bufs.iter_mut()) {
            run(s, bf);
            black_box(&mut bf.c);
        }
    });
    println!(
        "\nThe 8-16-4 model at batch 8: its five products (one train step), ns, median (best)."
    );
    for ((name, _), (med, best)) in ONE_THREAD.iter().zip(&t) {
        println!(
            "  {name:<15} {:6.0} ({:4.0})  {:4.2} of matrixmultiply's time",
            med * 1e9,
            best * 1e9,
            med / t[1].0
        );
    }
}

/// Our kernel around `PARALLEL_FLOPS` on `X (B x 784) · W (784 x 128)` in a two-thread pool:
/// serial (a workspace with room for one piece, so `gemm` does not split) against split in
/// two halves of the rows of `C` under `rayon::join`, each half a serial `gemm` that packs
/// all of `W` (what `gemm` itself does above the threshold).
fn threshold() {
    println!(
        "\nPARALLEL_FLOPS = {PARALLEL_FLOPS} (2^{}): X·W1 in a two-thread pool, us, median (best)",
        PARALLEL_FLOPS.trailing_zeros()
    );
    println!(
        "  {:<5} {:>10} {:>16} {:>16} {:>15} {:>9}",
        "batch", "flops", "serial", "split in 2", "serial / split", "shipped"
    );
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .expect("pool");
    for bsz in [4, 8, 16, 32, 64, 96, 128] {
        let s = Shape {
            name: "X·W1",
            m: bsz,
            k: 784,
            n: 128,
            ta: false,
            tb: false,
        };
        let t = pool.install(|| {
            let mut bf = Bufs::new(&s, 1);
            bf.ws
                .resize(2 * fg::workspace_len_threads(s.m, s.k, s.n, 1), 0.0);
            let runs: [Run; 2] = [("serial", serial), ("split", halves)];
            measure(&s, &mut bf, &runs, false)
        });
        let us = |(m, b): (f64, f64)| format!("{:7.1} ({:6.1})", m * 1e6, b * 1e6);
        let split = s.flops() >= PARALLEL_FLOPS as f64;
        println!(
            "  {:<5} {:>10.2e} {:>16} {:>16} {:>15.2} {:>9}",
            bsz,
            s.flops(),
            us(t[0]),
            us(t[1]),
            t[0].0 / t[1].0,
            if split { "split" } else { "serial" }
        );
    }
}

/// `run_fusegraph` with a workspace for one piece: never split.
fn serial(s: &Shape, bf: &mut Bufs) {
    let Bufs { a, b, c, ws } = bf;
    let a = MatRef::row_major(a, s.m, s.k);
    let b = MatRef::row_major(b, s.k, s.n);
    let one = fg::workspace_len_threads(s.m, s.k, s.n, 1);
    fg::gemm(
        1.0,
        a,
        b,
        0.0,
        MatMut::row_major(c, s.m, s.n),
        &mut ws[..one],
    );
}

/// The rows of `C` in two halves under `rayon::join`, each a serial `gemm`.
fn halves(s: &Shape, bf: &mut Bufs) {
    let mid = s.m / 2;
    let (c0, c1) = bf.c.split_at_mut(mid * s.n);
    let half = bf.ws.len() / 2;
    let (ws0, ws1) = bf.ws.split_at_mut(half);
    let a = &bf.a;
    let b = MatRef::row_major(&bf.b, s.k, s.n);
    rayon::join(
        || {
            let a = MatRef::row_major(&a[..mid * s.k], mid, s.k);
            fg::gemm(1.0, a, b, 0.0, MatMut::row_major(c0, mid, s.n), ws0);
        },
        || {
            let a = MatRef::row_major(&a[mid * s.k..], s.m - mid, s.k);
            fg::gemm(1.0, a, b, 0.0, MatMut::row_major(c1, s.m - mid, s.n), ws1);
        },
    );
}

fn main() {
    if let Ok(load) = std::fs::read_to_string("/proc/loadavg") {
        println!("load average: {}", load.trim());
    }
    println!(
        "fusegraph kernel: {} (compiled: {})",
        Capability::active(),
        Capability::compiled()
    );
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("pool");
    one.install(|| {
        single_threaded();
        tiny_step();
    });
    let two = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .expect("pool");
    two.install(two_threads);
    threshold();
}
