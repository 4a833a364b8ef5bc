//! Benches of the optimizer step.
//!
//! Criterion rows: fused (`Optimizer::step`) against the same rule run unfused (one pass per
//! operator) and against the in-place `a += s * b` kernel, for Adam and SGD with momentum at
//! 1e4 and 1e6 elements (throughput in the bytes each rule moves per element: Adam 28,
//! SGD-momentum 20, axpy 12); and the tensor-wise rules `keras::Lamb`, `keras::Adafactor`
//! (factored) and `keras::Muon` (its element passes: `ns_steps` 0) on 512x512 and 1024x1024
//! matrices, fused against the same passes written as plain loops
//! (`benches/support/plain_tensorwise.rs`).
//!
//! After the criterion rows, tables measured with the variants interleaved
//! (`examples/support/timing.rs`: round-robin, 21 samples each) print ratios:
//! - the tensor-wise rules fused against their plain loops at 100x100, 512x512, 1000x1000 and
//!   1024x1024 (one thread; the speed of the fused step as a share of the plain loop's, the
//!   median over rounds of plain time / fused time; target >= 95%);
//! - Muon's Newton-Schulz iteration (`optim::newton_schulz`, 5 steps) against the GEMM
//!   (`kernels::gemm::gemm`) running the same matrix products alone, on 1 and 2 threads
//!   (target >= 80% of the GEMM's FLOP rate), beside whole Muon steps, fused and plain.
//!
//! `cargo bench --bench optim` (about three minutes on two cores); a filter argument
//! (`cargo bench --bench optim -- lamb`) selects criterion rows by name, as criterion does, and
//! the interleaved tables whose name holds it (`tensorwise`, `newton_schulz`, or a rule's name:
//! `lamb`, `adafactor`, `muon`; `interleaved` runs both tables and no criterion row).
//! `cargo test --benches` checks that the plain loops compute the built-ins bit for bit and
//! times nothing. For the interleaved tables of the element-wise rules use `cargo run --release
//! --example bench_optim`. Build with `RUSTFLAGS="-C target-cpu=native"` to hold the fused
//! passes to plain loops compiled for the machine (the default build's plain loops are SSE2
//! code, while the fused passes dispatch to AVX2 or AVX-512 at run time).

#[path = "support/buffers.rs"]
mod buffers;
#[path = "support/plain_tensorwise.rs"]
mod plain_tensorwise;
#[path = "support/tensorwise_tables.rs"]
mod tensorwise_tables;
// The example's round-robin timing; its `value` is not used here.
#[allow(dead_code)]
#[path = "../examples/support/timing.rs"]
mod timing;
#[path = "support/unfused.rs"]
mod unfused;

use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use fusegraph::optim::keras::{Adafactor, Adam, Lamb, Muon, SgdMomentum};
use fusegraph::optim::{Config, Optimizer, Shape};
use plain_tensorwise::{PlainAdafactor, PlainLamb, PlainMuon};
use std::hint::black_box;
use std::time::Duration;
use unfused::{axpy, UnfusedAdam, UnfusedSgdMomentum};

const SIZES: [(usize, &str); 2] = [(10_000, "1e4"), (1_000_000, "1e6")];

/// Deterministic gradients in `±[0.1, 1.1)`.
fn buffer(n: usize, salt: u32) -> Vec<f32> {
    (0..n as u32)
        .map(|i| {
            let x = (i ^ salt).wrapping_mul(0x9E37_79B9).rotate_left(13);
            let u = (x >> 8) as f32 / (1u32 << 24) as f32;
            if x & 1 == 0 {
                0.1 + u
            } else {
                -0.1 - u
            }
        })
        .collect()
}

fn adam(c: &mut Criterion) {
    let rule = Adam::default().with_lr(1e-3);
    let mut group = c.benchmark_group("adam");
    for (n, label) in SIZES {
        group.throughput(Throughput::Bytes(28 * n as u64));
        let g = buffer(n, 1);
        let mut p = buffer(n, 2);
        let mut opt = Optimizer::new(rule, &[n]);
        group.bench_function(BenchmarkId::new("fused", label), |b| {
            b.iter(|| opt.step(black_box(&mut p), black_box(&g)))
        });
        let mut u = UnfusedAdam::new(rule, n);
        group.bench_function(BenchmarkId::new("unfused", label), |b| {
            b.iter(|| u.step(false, black_box(&mut p), black_box(&g)))
        });
    }
    group.finish();
}

fn sgd_momentum(c: &mut Criterion) {
    let rule = SgdMomentum::default().with_lr(1e-2).with_momentum(0.9);
    let mut group = c.benchmark_group("sgd_momentum");
    for (n, label) in SIZES {
        group.throughput(Throughput::Bytes(20 * n as u64));
        let g = buffer(n, 1);
        let mut p = buffer(n, 2);
        let mut opt = Optimizer::new(rule, &[n]);
        group.bench_function(BenchmarkId::new("fused", label), |b| {
            b.iter(|| opt.step(black_box(&mut p), black_box(&g)))
        });
        let mut u = UnfusedSgdMomentum::new(rule, n);
        group.bench_function(BenchmarkId::new("unfused", label), |b| {
            b.iter(|| u.step(false, black_box(&mut p), black_box(&g)))
        });
    }
    group.finish();
}

fn in_place(c: &mut Criterion) {
    let mut group = c.benchmark_group("axpy");
    for (n, label) in SIZES {
        group.throughput(Throughput::Bytes(12 * n as u64));
        let b_buf = buffer(n, 1);
        let mut a = buffer(n, 2);
        let mut s = 1e-3;
        group.bench_function(BenchmarkId::new("in_place", label), |b| {
            b.iter(|| {
                // Alternate the sign so that the values do not drift.
                s = -s;
                axpy(false, black_box(&mut a), s, black_box(&b_buf));
            })
        });
    }
    group.finish();
}

/// The matrices of the tensor-wise criterion rows.
const MATRICES: [(usize, usize, &str); 2] = [(512, 512, "512x512"), (1024, 1024, "1024x1024")];

/// Keras LAMB, Adafactor on a factored matrix and Muon's element passes (`ns_steps` 0, so
/// that its Newton-Schulz call returns at once), fused against plain loops of the same passes.
fn tensorwise(c: &mut Criterion) {
    let mut group = c.benchmark_group("tensorwise");
    for (rows, cols, label) in MATRICES {
        let n = rows * cols;
        group.throughput(Throughput::Elements(n as u64));
        let shape = [Shape::matrix(rows, cols)];
        let g = buffer(n, 1);
        let mut p = buffer(n, 2);
        let lamb = Lamb::default();
        let mut opt = Optimizer::with_shapes(lamb, &shape, Config::default());
        group.bench_function(BenchmarkId::new("lamb/fused", label), |b| {
            b.iter(|| opt.step(black_box(&mut p), black_box(&g)))
        });
        let mut plain = PlainLamb::new(lamb, n);
        group.bench_function(BenchmarkId::new("lamb/plain", label), |b| {
            b.iter(|| plain.step(black_box(&mut p), black_box(&g)))
        });
        let adafactor = Adafactor::default();
        let mut opt = Optimizer::with_shapes(adafactor, &shape, Config::default());
        group.bench_function(BenchmarkId::new("adafactor/fused", label), |b| {
            b.iter(|| opt.step(black_box(&mut p), black_box(&g)))
        });
        let mut plain = PlainAdafactor::new(adafactor, rows, cols);
        group.bench_function(BenchmarkId::new("adafactor/plain", label), |b| {
            b.iter(|| plain.step(black_box(&mut p), black_box(&g)))
        });
        let muon = Muon::default().with_ns_steps(0.0);
        let mut opt = Optimizer::with_shapes(muon, &shape, Config::default());
        group.bench_function(BenchmarkId::new("muon_passes/fused", label), |b| {
            b.iter(|| opt.step(black_box(&mut p), black_box(&g)))
        });
        let mut plain = PlainMuon::new(muon, rows, cols);
        group.bench_function(BenchmarkId::new("muon_passes/plain", label), |b| {
            b.iter(|| plain.step(black_box(&mut p), black_box(&g)))
        });
    }
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
}

criterion_group! {
    name = benches;
    config = config();
    targets = adam, sgd_momentum, in_place, tensorwise
}

/// What the command line asks of the interleaved tables: `--bench` to time them (without it,
/// as under `cargo test --benches`, only the checks run), and criterion's filter.
fn arguments() -> (bool, Option<String>) {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let timed = args.iter().any(|a| a == "--bench");
    let filter = args.into_iter().find(|a| !a.starts_with('-'));
    (timed, filter)
}

fn main() {
    let (timed, filter) = arguments();
    tensorwise_tables::check_plain_loops();
    benches();
    if timed {
        tensorwise_tables::run(filter.as_deref());
    }
    Criterion::default().configure_from_args().final_summary();
}
