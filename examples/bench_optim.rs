//! The fused optimizer step against its baselines, measured in one run.
//!
//! ```text
//! RUSTFLAGS="-C target-cpu=native" CARGO_TARGET_DIR=target/native \
//!     cargo run --release --example bench_optim
//! ```
//!
//! `-C target-cpu=native` matters: `wide` picks its instructions when it is compiled, so
//! without it `f32x8` runs as two SSE2 halves on x86_64, with it on AVX2 (and FMA). A separate
//! `CARGO_TARGET_DIR` keeps the flag from invalidating the ordinary build.
//!
//! For N = 1e4 (in cache), 1e6 and 1e7 elements, Adam (`keras::Adam`, 28 bytes moved per
//! element: read p, g, m, v, write p, m, v) and SGD with momentum (`keras::SgdMomentum`, 20
//! bytes) run
//! - fused: `Optimizer::step`, one pass in `f32x8` lanes, split across rayon at and above
//!   `PARALLEL_THRESHOLD` elements;
//! - unfused: one plain scalar pass per operator over the buffers, temporaries allocated
//!   beforehand (Adam: 12 passes, SGD-momentum: 4), single-threaded and, at and above the
//!   threshold, split across rayon the same way;
//!
//! beside the in-place kernel `a += s * b` (`f32x8` lanes, 12 bytes per element, split the same
//! way), whose bandwidth is the reference: "of axpy" is (GB/s of the row) / (GB/s of axpy with
//! the same threads). At and above the threshold, the fused step and axpy also run inside a
//! one-thread pool. All variants of one size are timed round-robin, `REPS` samples each (the
//! order rotates every round), and the table gives the median and the best sample. A last
//! section times fused Adam at 2^17..2^21 elements, around `PARALLEL_THRESHOLD` (2^19), with
//! rayon forced off and on.
//!
//! The whole run takes about half a minute on two cores and needs about 1.5 GB of memory.

#[path = "../benches/support/unfused.rs"]
mod unfused;

use fusegraph::optim::keras::{Adam, SgdMomentum};
use fusegraph::optim::{Optimizer, PARALLEL_CHUNK, PARALLEL_THRESHOLD};
use rayon::prelude::*;
use std::hint::black_box;
use std::time::Instant;
use unfused::{axpy, UnfusedAdam, UnfusedSgdMomentum};

/// Timed samples per variant.
const REPS: usize = 15;
/// Elements one sample processes: a sample repeats the step `SAMPLE_ELEMS / n` times.
const SAMPLE_ELEMS: usize = 50_000_000;
/// Bytes moved per element.
const ADAM_BYTES: f64 = 28.0;
const SGD_BYTES: f64 = 20.0;
const AXPY_BYTES: f64 = 12.0;

/// A deterministic value in `±[0.1, 1.1)`: no zeros, no subnormals.
fn value(i: usize, salt: u64) -> f32 {
    let mut x = (i as u64 ^ salt).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 29;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 32;
    let u = (x >> 40) as f32 / (1u64 << 24) as f32;
    let sign = if x & 1 == 0 { 1.0 } else { -1.0 };
    sign * (0.1 + u)
}

fn buffer(n: usize, salt: u64) -> Vec<f32> {
    (0..n).map(|i| value(i, salt)).collect()
}

/// What a row of the table runs.
struct Variant<'a> {
    kernel: &'static str,
    bytes: f64,
    parallel: bool,
    run: Box<dyn FnMut() + 'a>,
    ns: Vec<f64>,
}

fn variant<'a>(
    kernel: &'static str,
    bytes: f64,
    parallel: bool,
    run: impl FnMut() + 'a,
) -> Variant<'a> {
    Variant {
        kernel,
        bytes,
        parallel,
        run: Box::new(run),
        ns: Vec::with_capacity(REPS),
    }
}

/// The medians and bests of one variant, in ns per element.
struct Timing {
    kernel: &'static str,
    bytes: f64,
    parallel: bool,
    median: f64,
    best: f64,
}

impl Timing {
    fn gbs(&self, ns: f64) -> f64 {
        self.bytes / ns
    }
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let k = s.len();
    if k % 2 == 1 {
        s[k / 2]
    } else {
        0.5 * (s[k / 2 - 1] + s[k / 2])
    }
}

/// Runs every variant `REPS` times, round-robin, after one untimed warm-up round.
fn measure(mut variants: Vec<Variant<'_>>, n: usize, iters: usize) -> Vec<Timing> {
    for v in &mut variants {
        for _ in 0..iters {
            (v.run)();
        }
    }
    let k = variants.len();
    for rep in 0..REPS {
        for j in 0..k {
            let v = &mut variants[(j + rep) % k];
            let t0 = Instant::now();
            for _ in 0..iters {
                (v.run)();
            }
            v.ns.push(t0.elapsed().as_secs_f64() * 1e9 / (iters * n) as f64);
        }
    }
    variants
        .into_iter()
        .map(|v| Timing {
            kernel: v.kernel,
            bytes: v.bytes,
            parallel: v.parallel,
            median: median(&v.ns),
            best: v.ns.iter().copied().fold(f64::INFINITY, f64::min),
        })
        .collect()
}

fn find<'t>(ts: &'t [Timing], kernel: &str, parallel: bool) -> &'t Timing {
    ts.iter()
        .find(|t| t.kernel == kernel && t.parallel == parallel)
        .expect("a measured variant")
}

fn threads(parallel: bool) -> &'static str {
    if parallel {
        "rayon"
    } else {
        "1"
    }
}

/// The rules, with the hyper-parameters every variant shares.
fn rules() -> (Adam, SgdMomentum) {
    (
        Adam::default().with_lr(1e-3),
        SgdMomentum::default().with_lr(1e-2).with_momentum(0.9),
    )
}

/// Measures one size and prints its table; returns the timings.
fn bench_size(n: usize, label: &str, pool1: &rayon::ThreadPool) -> Vec<Timing> {
    let (adam, sgd) = rules();
    let par = n >= PARALLEL_THRESHOLD;
    let iters = (SAMPLE_ELEMS / n).max(1);
    let g = buffer(n, 1);
    let g = g.as_slice();
    let mut vs: Vec<Variant<'_>> = Vec::new();
    // The fused step as a user runs it, and (at and above the threshold) in a 1-thread pool.
    let fused_threads: &[bool] = if par { &[true, false] } else { &[false] };
    for &on in fused_threads {
        // Below the threshold the step never touches rayon: no pool hand-off to time.
        let in_pool1 = par && !on;
        let mut a = buffer(n, 2);
        vs.push(variant("axpy a += s*b", AXPY_BYTES, on, move || {
            // Alternate the sign so that the values do not drift.
            axpy(on, black_box(&mut a), 1e-3, black_box(g));
            axpy(on, black_box(&mut a), -1e-3, black_box(g));
        }));
        let mut opt = Optimizer::new(adam, &[n]);
        let mut p = buffer(n, 3);
        vs.push(variant("adam fused", ADAM_BYTES, on, move || {
            if in_pool1 {
                pool1.install(|| opt.step(black_box(&mut p), black_box(g)));
            } else {
                opt.step(black_box(&mut p), black_box(g));
            }
        }));
        let mut opt = Optimizer::new(sgd, &[n]);
        let mut p = buffer(n, 4);
        vs.push(variant("sgd-momentum fused", SGD_BYTES, on, move || {
            if in_pool1 {
                pool1.install(|| opt.step(black_box(&mut p), black_box(g)));
            } else {
                opt.step(black_box(&mut p), black_box(g));
            }
        }));
    }
    let unfused_threads: &[bool] = if par { &[false, true] } else { &[false] };
    for &on in unfused_threads {
        let mut u = UnfusedAdam::new(adam, n);
        let mut p = buffer(n, 3);
        vs.push(variant("adam unfused", ADAM_BYTES, on, move || {
            u.step(on, black_box(&mut p), black_box(g));
        }));
        let mut u = UnfusedSgdMomentum::new(sgd, n);
        let mut p = buffer(n, 4);
        vs.push(variant("sgd-momentum unfused", SGD_BYTES, on, move || {
            u.step(on, black_box(&mut p), black_box(g));
        }));
    }
    // The axpy variant runs two steps per call.
    let ts = measure(vs, n, iters);
    let ts: Vec<Timing> = ts
        .into_iter()
        .map(|t| {
            if t.kernel.starts_with("axpy") {
                Timing {
                    median: t.median / 2.0,
                    best: t.best / 2.0,
                    ..t
                }
            } else {
                t
            }
        })
        .collect();

    println!(
        "\nN = {label} ({n} elements, {:.1} MB of Adam state and gradient), {iters} step(s) per sample",
        n as f64 * 16.0 / 1e6
    );
    println!(
        "  {:<22} {:>7} {:>20} {:>18} {:>8}",
        "kernel", "threads", "ns/elem med (best)", "GB/s med (best)", "of axpy"
    );
    for t in &ts {
        let ax = find(&ts, "axpy a += s*b", t.parallel);
        println!(
            "  {:<22} {:>7} {:>10.3} ({:>6.3}) {:>9.1} ({:>5.1}) {:>7.0}%",
            t.kernel,
            threads(t.parallel),
            t.median,
            t.best,
            t.gbs(t.median),
            t.gbs(t.best),
            100.0 * t.gbs(t.median) / ax.gbs(ax.median),
        );
    }
    for rule in ["adam", "sgd-momentum"] {
        let fused = find(&ts, &format!("{rule} fused"), par);
        let ax = find(&ts, "axpy a += s*b", par);
        let mut line = format!(
            "  {rule}: fused = {:.0}% of the in-place bandwidth; speed-up over unfused: {:.1}x (1 thread)",
            100.0 * fused.gbs(fused.median) / ax.gbs(ax.median),
            find(&ts, &format!("{rule} unfused"), false).median
                / find(&ts, &format!("{rule} fused"), false).median,
        );
        if par {
            line += &format!(
                ", {:.1}x (rayon)",
                find(&ts, &format!("{rule} unfused"), true).median / fused.median
            );
        }
        println!("{line}");
    }
    ts
}

/// Fused Adam around `PARALLEL_THRESHOLD`, rayon forced off and on.
///
/// `Optimizer` decides by length alone, so both forced columns run one optimizer per
/// `PARALLEL_CHUNK`-element piece (the pieces the fused pass splits into): "off" one after the
/// other, "on" with `par_iter`. Same lane code, same pieces; only the threads differ.
fn bench_threshold() {
    let (adam, _) = rules();
    println!(
        "\nPARALLEL_THRESHOLD = {PARALLEL_THRESHOLD} (2^{}): fused Adam, ns/element, median (best)",
        PARALLEL_THRESHOLD.trailing_zeros()
    );
    println!(
        "  {:<6} {:>18} {:>18} {:>18} {:>15}",
        "N", "as shipped", "rayon off", "rayon on", "off / on time"
    );
    for log2 in 17..=21 {
        let n = 1usize << log2;
        let iters = (SAMPLE_ELEMS / n).max(1);
        let g = buffer(n, 1);
        let g = g.as_slice();
        let mut opt = Optimizer::new(adam, &[n]);
        let mut p = buffer(n, 3);
        let shipped = variant(
            "as shipped",
            ADAM_BYTES,
            n >= PARALLEL_THRESHOLD,
            move || {
                opt.step(black_box(&mut p), black_box(g));
            },
        );
        let chunked = || -> Vec<Optimizer<Adam>> {
            (0..n.div_ceil(PARALLEL_CHUNK))
                .map(|i| Optimizer::new(adam, &[PARALLEL_CHUNK.min(n - i * PARALLEL_CHUNK)]))
                .collect()
        };
        let mut opts = chunked();
        let mut p = buffer(n, 3);
        let off = variant("off", ADAM_BYTES, false, move || {
            black_box(&mut p)
                .chunks_mut(PARALLEL_CHUNK)
                .zip(black_box(g).chunks(PARALLEL_CHUNK))
                .zip(opts.iter_mut())
                .for_each(|((p, g), o)| o.step(p, g));
        });
        let mut opts = chunked();
        let mut p = buffer(n, 3);
        let on = variant("on", ADAM_BYTES, true, move || {
            black_box(&mut p)
                .par_chunks_mut(PARALLEL_CHUNK)
                .zip(black_box(g).par_chunks(PARALLEL_CHUNK))
                .zip(opts.par_iter_mut())
                .for_each(|((p, g), o)| o.step(p, g));
        });
        let ts = measure(vec![shipped, off, on], n, iters);
        let cell = |t: &Timing| format!("{:.3} ({:.3})", t.median, t.best);
        println!(
            "  2^{log2:<3} {:>18} {:>18} {:>18} {:>14.2}x",
            format!(
                "{} {}",
                cell(&ts[0]),
                if ts[0].parallel { "on" } else { "off" }
            ),
            cell(&ts[1]),
            cell(&ts[2]),
            ts[1].median / ts[2].median,
        );
    }
}

/// The unfused baselines must compute the same rules as the fused built-ins.
fn check_baselines() {
    let n = 1003;
    let (adam, sgd) = rules();
    let g = buffer(n, 1);
    let mut pf = buffer(n, 3);
    let mut pu = pf.clone();
    let mut opt = Optimizer::new(adam, &[n]);
    let mut u = UnfusedAdam::new(adam, n);
    let mut qf = buffer(n, 4);
    let mut qu = qf.clone();
    let mut sopt = Optimizer::new(sgd, &[n]);
    let mut su = UnfusedSgdMomentum::new(sgd, n);
    for _ in 0..10 {
        opt.step(&mut pf, &g);
        u.step(false, &mut pu, &g);
        sopt.step(&mut qf, &g);
        su.step(false, &mut qu, &g);
    }
    let diff = |a: &[f32], b: &[f32]| {
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs() / y.abs().max(1e-3))
            .fold(0.0f32, f32::max)
    };
    let (da, ds) = (diff(&pf, &pu), diff(&qf, &qu));
    println!("baselines: after 10 steps, fused vs unfused max relative difference: Adam {da:.1e}, SGD-momentum {ds:.1e}");
    assert!(
        da < 1e-4 && ds < 1e-4,
        "the unfused baselines do not compute the built-in rules"
    );
}

fn main() {
    println!(
        "bench_optim: {} rayon threads; compiled with avx2 {}, fma {}, avx512f {}; {REPS} interleaved samples per variant",
        rayon::current_num_threads(),
        cfg!(target_feature = "avx2"),
        cfg!(target_feature = "fma"),
        cfg!(target_feature = "avx512f"),
    );
    // The machine should be otherwise idle; the load average says whether it was.
    if let Ok(load) = std::fs::read_to_string("/proc/loadavg") {
        println!("load average at start: {}", load.trim());
    }
    let pool1 = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("a one-thread pool");
    check_baselines();
    let small = bench_size(10_000, "1e4", &pool1);
    let mid = bench_size(1_000_000, "1e6", &pool1);
    let large = bench_size(10_000_000, "1e7", &pool1);
    bench_threshold();

    let par_large = 10_000_000 >= PARALLEL_THRESHOLD;
    let fused = find(&large, "adam fused", par_large);
    let ax = find(&large, "axpy a += s*b", par_large);
    let frac = fused.gbs(fused.median) / ax.gbs(ax.median);
    let speedup = find(&mid, "adam unfused", false).median / find(&mid, "adam fused", false).median;
    let in_cache = find(&small, "adam fused", false).median;
    let verdict = |ok: bool| if ok { "met" } else { "NOT met" };
    println!("\ntargets (medians):");
    println!(
        "  fused Adam >= 90% of the in-place bandwidth at N=1e7: {:.0}% -> {}",
        100.0 * frac,
        verdict(frac >= 0.9)
    );
    println!(
        "  fused Adam >= 5x unfused at N=1e6:                  {speedup:.1}x -> {}",
        verdict(speedup >= 5.0)
    );
    println!(
        "  fused Adam <= 0.45 ns/element in cache (N=1e4):     {in_cache:.3} ns -> {}",
        verdict(in_cache <= 0.45)
    );
}
