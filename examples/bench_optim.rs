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
//! For N = 1e4 (in cache), 1e6 (L3) and 1e7 (memory) elements, Adam (`keras::Adam`, 28 bytes
//! moved per element: read p, g, m, v, write p, m, v) and SGD with momentum
//! (`keras::SgdMomentum`, 20 bytes) run, on 1 and on 2 threads,
//! - fused: `Optimizer::step`, one pass in `f32x8` lanes. As shipped it is split across rayon
//!   at and above `PARALLEL_THRESHOLD` elements (the "2 threads" rows; below the threshold they
//!   run on one thread as the step does); the "1 thread" rows run it inside a one-thread pool;
//! - plain: the same rule as a plain `for` loop over zipped slices that the compiler
//!   auto-vectorizes with the same flags (`benches/support/plain.rs`, bit for bit the
//!   built-ins), on 2 threads split into two halves with `rayon::join`; its "1 thread" rows run
//!   inside the same one-thread pool as the fused step's, so that both run on the same kind of
//!   thread (with the plain loop on the calling thread, one run gave the fused step 67-94% of
//!   its speed at 1e6 and 1e7; with both on the worker, the next run gave 94-101%). "of plain" is the fused
//!   step's speed as a share of it, the median over rounds of (plain time / fused time), and
//!   the closing table gathers it for every size;
//! - unfused (1 thread): one plain scalar pass per operator over the buffers, temporaries
//!   allocated beforehand (Adam: 12 passes, SGD-momentum: 4);
//!
//! beside the in-place kernel `a += s * b` (`f32x8` lanes, 12 bytes per element, split the same
//! way as the fused step), whose bandwidth is the reference: "of axpy" is (GB/s of the row) /
//! (GB/s of axpy with the same threads). All variants of one size are timed round-robin, `REPS`
//! samples each (the order rotates every round), and the table gives the median and the best
//! sample. A last section times fused Adam at 2^17..2^21 elements, around
//! `PARALLEL_THRESHOLD` (2^19), with rayon forced off and on.
//!
//! The whole run takes about a minute and a half on two cores and needs about 1.5 GB of memory.

#[path = "../benches/support/buffers.rs"]
mod buffers;
#[path = "../benches/support/plain.rs"]
mod plain;
#[path = "../benches/support/unfused.rs"]
mod unfused;

use buffers::buffer;
use fusegraph::optim::keras::{Adam, SgdMomentum};
use fusegraph::optim::{Optimizer, PARALLEL_CHUNK, PARALLEL_THRESHOLD};
use plain::{PlainAdam, PlainSgdMomentum};
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

/// What a row of the table runs.
struct Variant<'a> {
    kernel: &'static str,
    bytes: f64,
    threads: usize,
    run: Box<dyn FnMut() + 'a>,
    ns: Vec<f64>,
}

fn variant<'a>(
    kernel: &'static str,
    bytes: f64,
    threads: usize,
    run: impl FnMut() + 'a,
) -> Variant<'a> {
    Variant {
        kernel,
        bytes,
        threads,
        run: Box::new(run),
        ns: Vec::with_capacity(REPS),
    }
}

/// The samples of one variant, in ns per element (sample `r` was taken in round `r`).
struct Timing {
    kernel: &'static str,
    bytes: f64,
    threads: usize,
    ns: Vec<f64>,
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

/// The speed of `a` relative to `b` (time of `b` / time of `a`): the median over the rounds
/// of the ratio within a round, where both ran on the same machine state.
fn speed_ratio(a: &Timing, b: &Timing) -> f64 {
    let r: Vec<f64> = a.ns.iter().zip(&b.ns).map(|(a, b)| b / a).collect();
    median(&r)
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
            threads: v.threads,
            median: median(&v.ns),
            best: v.ns.iter().copied().fold(f64::INFINITY, f64::min),
            ns: v.ns,
        })
        .collect()
}

fn find<'t>(ts: &'t [Timing], kernel: &str, threads: usize) -> &'t Timing {
    ts.iter()
        .find(|t| t.kernel == kernel && t.threads == threads)
        .expect("a measured variant")
}

/// The rules, with the hyper-parameters every variant shares.
fn rules() -> (Adam, SgdMomentum) {
    (
        Adam::default().with_lr(1e-3),
        SgdMomentum::default().with_lr(1e-2).with_momentum(0.9),
    )
}

/// Runs `step` as the given thread count asks: as called for 2 (`Optimizer::step` uses the
/// 2-thread global pool at and above `PARALLEL_THRESHOLD`), inside `pool1` for 1 there (the
/// fused and the plain step alike, on the same worker thread).
fn on_threads(threads: usize, n: usize, pool1: &rayon::ThreadPool, step: impl FnOnce() + Send) {
    if threads == 1 && n >= PARALLEL_THRESHOLD {
        pool1.install(step);
    } else {
        step();
    }
}

/// Measures one size and prints its table; returns the timings.
fn bench_size(n: usize, label: &str, pool1: &rayon::ThreadPool) -> Vec<Timing> {
    let (adam, sgd) = rules();
    let par = n >= PARALLEL_THRESHOLD;
    let iters = (SAMPLE_ELEMS / n).max(1);
    let g = buffer(n, 1);
    let g = &g[..];
    let mut vs: Vec<Variant<'_>> = Vec::new();
    for threads in [1, 2] {
        let mut a = buffer(n, 2);
        vs.push(variant("axpy a += s*b", AXPY_BYTES, threads, move || {
            // Alternate the sign so that the values do not drift.
            axpy(threads == 2, black_box(&mut a), 1e-3, black_box(g));
            axpy(threads == 2, black_box(&mut a), -1e-3, black_box(g));
        }));
        let mut opt = Optimizer::new(adam, &[n]);
        let mut p = buffer(n, 3);
        vs.push(variant("adam fused", ADAM_BYTES, threads, move || {
            on_threads(threads, n, pool1, || {
                opt.step(black_box(&mut p), black_box(g))
            });
        }));
        let mut plain = PlainAdam::new(adam, n);
        let mut p = buffer(n, 3);
        vs.push(variant("adam plain", ADAM_BYTES, threads, move || {
            on_threads(threads, n, pool1, || {
                plain.step(threads, black_box(&mut p), black_box(g))
            });
        }));
        let mut opt = Optimizer::new(sgd, &[n]);
        let mut p = buffer(n, 4);
        vs.push(variant(
            "sgd-momentum fused",
            SGD_BYTES,
            threads,
            move || {
                on_threads(threads, n, pool1, || {
                    opt.step(black_box(&mut p), black_box(g))
                });
            },
        ));
        let mut plain = PlainSgdMomentum::new(sgd, n);
        let mut p = buffer(n, 4);
        vs.push(variant(
            "sgd-momentum plain",
            SGD_BYTES,
            threads,
            move || {
                on_threads(threads, n, pool1, || {
                    plain.step(threads, black_box(&mut p), black_box(g))
                });
            },
        ));
    }
    let mut u = UnfusedAdam::new(adam, n);
    let mut p = buffer(n, 3);
    vs.push(variant("adam unfused", ADAM_BYTES, 1, move || {
        u.step(false, black_box(&mut p), black_box(g));
    }));
    let mut u = UnfusedSgdMomentum::new(sgd, n);
    let mut p = buffer(n, 4);
    vs.push(variant("sgd-momentum unfused", SGD_BYTES, 1, move || {
        u.step(false, black_box(&mut p), black_box(g));
    }));
    // The axpy variant runs two steps per call.
    let ts = measure(vs, n, iters);
    let ts: Vec<Timing> = ts
        .into_iter()
        .map(|t| {
            if t.kernel.starts_with("axpy") {
                Timing {
                    median: t.median / 2.0,
                    best: t.best / 2.0,
                    ns: t.ns.iter().map(|x| x / 2.0).collect(),
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
        "  {:<22} {:>7} {:>20} {:>18} {:>8} {:>9}",
        "kernel", "threads", "ns/elem med (best)", "GB/s med (best)", "of axpy", "of plain"
    );
    for t in &ts {
        let ax = find(&ts, "axpy a += s*b", t.threads);
        let of_plain = match t.kernel.strip_suffix(" fused") {
            Some(rule) => format!(
                "{:>8.0}%",
                100.0 * speed_ratio(t, find(&ts, &format!("{rule} plain"), t.threads))
            ),
            None => String::new(),
        };
        println!(
            "  {:<22} {:>7} {:>10.3} ({:>6.3}) {:>9.1} ({:>5.1}) {:>7.0}% {of_plain}",
            t.kernel,
            t.threads,
            t.median,
            t.best,
            t.gbs(t.median),
            t.gbs(t.best),
            100.0 * t.gbs(t.median) / ax.gbs(ax.median),
        );
    }
    if !par {
        println!("  (below PARALLEL_THRESHOLD the fused step runs on 1 thread in both rows)");
    }
    for rule in ["adam", "sgd-momentum"] {
        println!(
            "  {rule}: speed-up of fused over unfused: {:.1}x (1 thread)",
            find(&ts, &format!("{rule} unfused"), 1).median
                / find(&ts, &format!("{rule} fused"), 1).median,
        );
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
        let g = &g[..];
        let mut opt = Optimizer::new(adam, &[n]);
        let mut p = buffer(n, 3);
        let shipped = variant(
            "as shipped",
            ADAM_BYTES,
            if n >= PARALLEL_THRESHOLD { 2 } else { 1 },
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
        let off = variant("off", ADAM_BYTES, 1, move || {
            black_box(&mut p)
                .chunks_mut(PARALLEL_CHUNK)
                .zip(black_box(g).chunks(PARALLEL_CHUNK))
                .zip(opts.iter_mut())
                .for_each(|((p, g), o)| o.step(p, g));
        });
        let mut opts = chunked();
        let mut p = buffer(n, 3);
        let on = variant("on", ADAM_BYTES, 2, move || {
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
                if ts[0].threads == 2 { "on" } else { "off" }
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

/// The plain loops must compute the fused built-ins bit for bit, on 1 and 2 threads.
fn check_plain() {
    let n = 1003;
    let (adam, sgd) = rules();
    let g = buffer(n, 1);
    let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    for threads in [1, 2] {
        let mut pf = buffer(n, 3);
        let mut pp = pf.clone();
        let mut opt = Optimizer::new(adam, &[n]);
        let mut plain = PlainAdam::new(adam, n);
        let mut qf = buffer(n, 4);
        let mut qp = qf.clone();
        let mut sopt = Optimizer::new(sgd, &[n]);
        let mut splain = PlainSgdMomentum::new(sgd, n);
        for _ in 0..10 {
            opt.step(&mut pf, &g);
            plain.step(threads, &mut pp, &g);
            sopt.step(&mut qf, &g);
            splain.step(threads, &mut qp, &g);
        }
        assert!(
            bits(&pf) == bits(&pp) && bits(&qf) == bits(&qp),
            "the plain loops do not compute the built-in rules bit for bit"
        );
    }
    println!("plain loops: after 10 steps, bit for bit the fused built-ins (1 and 2 threads)");
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
    check_plain();
    let sizes = [(10_000, "1e4"), (1_000_000, "1e6"), (10_000_000, "1e7")];
    let tables: Vec<Vec<Timing>> = sizes
        .iter()
        .map(|&(n, label)| bench_size(n, label, &pool1))
        .collect();
    bench_threshold();

    println!(
        "\nfused vs plain loop: speed of the fused step as % of the plain loop's \
         (median over rounds of plain time / fused time; target >= 95%)"
    );
    println!(
        "  {:<14} {:>7} {:>7} {:>7} {:>7}",
        "rule", "threads", "1e4", "1e6", "1e7"
    );
    let mut worst = f64::INFINITY;
    for rule in ["adam", "sgd-momentum"] {
        for threads in [1, 2] {
            let mut line = format!("  {rule:<14} {threads:>7}");
            for ts in &tables {
                let fused = find(ts, &format!("{rule} fused"), threads);
                let r = speed_ratio(fused, find(ts, &format!("{rule} plain"), threads));
                worst = worst.min(r);
                line += &format!(" {:>6.0}%", 100.0 * r);
            }
            println!("{line}");
        }
    }

    let (small, mid, large) = (&tables[0], &tables[1], &tables[2]);
    let fused = find(large, "adam fused", 2);
    let ax = find(large, "axpy a += s*b", 2);
    let frac = fused.gbs(fused.median) / ax.gbs(ax.median);
    let speedup = find(mid, "adam unfused", 1).median / find(mid, "adam fused", 1).median;
    let in_cache = find(small, "adam fused", 1).median;
    let verdict = |ok: bool| if ok { "met" } else { "NOT met" };
    println!("\ntargets (medians):");
    println!(
        "  fused >= 95% of the plain loop (all rows above):    {:.0}% -> {}",
        100.0 * worst,
        verdict(worst >= 0.95)
    );
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
