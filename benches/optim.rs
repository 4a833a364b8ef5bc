//! Criterion benches of the optimizer step: fused (`Optimizer::step`) against the same rule run
//! unfused (one pass per operator) and against the in-place `a += s * b` kernel, for Adam and
//! SGD with momentum at 1e4 and 1e6 elements. Throughput is given in the bytes each rule moves
//! per element (Adam 28, SGD-momentum 20, axpy 12).
//!
//! `cargo bench --bench optim` (a few minutes). For the summary table, measured in one run with
//! the variants interleaved, use `cargo run --release --example bench_optim`. Build both with
//! `RUSTFLAGS="-C target-cpu=native"` to measure AVX2 rather than SSE2 code.

#[path = "support/unfused.rs"]
mod unfused;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use fusegraph::optim::keras::{Adam, SgdMomentum};
use fusegraph::optim::Optimizer;
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

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
}

criterion_group! {
    name = benches;
    config = config();
    targets = adam, sgd_momentum, in_place
}
criterion_main!(benches);
