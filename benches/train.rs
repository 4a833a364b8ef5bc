//! Criterion benches of whole train steps (`TrainStep::run`: forward, loss, backward, fused
//! optimizer pass) of generated models: the MLP 784-128(ReLU)-10 at batch 32 and 256 with
//! SGD-momentum and Adam, and the tiny 8-16(ReLU)-4 at batch 1 and 8.
//!
//! `cargo bench --bench train`. The summary (GFLOP/s, fraction of the GEMM rate, steps per
//! second, targets) is `cargo run --release --example bench_train`; build both with
//! `RUSTFLAGS="-C target-cpu=native"`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use fusegraph::optim::keras::{Adam, SgdMomentum};
use fusegraph::optim::Rule;
use fusegraph::prelude::*;
use std::hint::black_box;
use std::time::Duration;

/// The MLP of the benchmark suite.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
struct Mnist {
    fc1: Dense<784, 128, Relu>,
    fc2: Dense<128, 10>,
}

/// The embedded-size MLP.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
struct Tiny {
    fc1: Dense<8, 16, Relu>,
    fc2: Dense<16, 4>,
}

fn value(i: usize) -> f32 {
    ((i * 7919) % 1000) as f32 / 500.0 - 1.0
}

fn bench_step<M: Model<Loss = SoftmaxCrossEntropy, Input = f32>, R: Rule, const B: usize>(
    c: &mut Criterion,
    group: &str,
    name: &str,
    mut model: M,
    rule: R,
) {
    let mut step = TrainStep::<M, R, B>::new(&model, rule);
    let x: Vec<f32> = (0..B * M::IN).map(value).collect();
    let y: Vec<u32> = (0..B as u32).map(|i| i % M::OUT as u32).collect();
    let mut g = c.benchmark_group(group);
    g.throughput(Throughput::Elements(B as u64));
    g.measurement_time(Duration::from_secs(3));
    g.bench_function(name, |b| b.iter(|| black_box(step.run(&mut model, &x, &y))));
    g.finish();
}

fn mnist(c: &mut Criterion) {
    bench_step::<_, _, 32>(
        c,
        "mlp784",
        "batch32/sgd_momentum",
        Mnist::init(Seed(1)),
        SgdMomentum::default(),
    );
    bench_step::<_, _, 32>(
        c,
        "mlp784",
        "batch32/adam",
        Mnist::init(Seed(1)),
        Adam::default(),
    );
    bench_step::<_, _, 256>(
        c,
        "mlp784",
        "batch256/sgd_momentum",
        Mnist::init(Seed(1)),
        SgdMomentum::default(),
    );
    bench_step::<_, _, 256>(
        c,
        "mlp784",
        "batch256/adam",
        Mnist::init(Seed(1)),
        Adam::default(),
    );
}

fn tiny(c: &mut Criterion) {
    bench_step::<_, _, 1>(
        c,
        "mlp8",
        "batch1/sgd_momentum",
        Tiny::init(Seed(2)),
        SgdMomentum::default(),
    );
    bench_step::<_, _, 1>(
        c,
        "mlp8",
        "batch1/adam",
        Tiny::init(Seed(2)),
        Adam::default(),
    );
    bench_step::<_, _, 8>(
        c,
        "mlp8",
        "batch8/sgd_momentum",
        Tiny::init(Seed(2)),
        SgdMomentum::default(),
    );
    bench_step::<_, _, 8>(
        c,
        "mlp8",
        "batch8/adam",
        Tiny::init(Seed(2)),
        Adam::default(),
    );
}

criterion_group!(benches, mnist, tiny);
criterion_main!(benches);
