//! Whole train steps of generated models, measured in one run.
//!
//! ```text
//! RUSTFLAGS="-C target-cpu=native" CARGO_TARGET_DIR=target/native \
//!     cargo run --release --example bench_train
//! ```
//!
//! - The MLP 784-128(ReLU)-10 with softmax cross-entropy at batch 32 and 256, with SGD-momentum
//!   and Adam: microseconds per `TrainStep::run` (forward, loss, backward, fused optimizer
//!   pass), GFLOP/s of the whole step (its matrix products: forward `x·W` for both layers,
//!   `xᵀ·dz` for both weight gradients, `dz·Wᵀ` for the second layer's input gradient), and
//!   that rate as a fraction of fusegraph's GEMM on the step's largest product (`x·W1`,
//!   batch×784 by 784×128) timed in the same run. One thread (a one-thread pool), then two.
//! - The tiny 8-16(ReLU)-4 MLP at batch 1 and 8: steps per second and bytes of state (model,
//!   gradients, activations, workspace, optimizer slots) of `TrainStep` and of the
//!   allocation-free `EmbeddedStep` in both update modes: `Full` (all gradients, then one
//!   update) and `Fused` (each layer updated during the backward pass, no full gradient
//!   buffer).
//!
//! Variants of one table are timed round-robin, `REPS` samples each; the table gives the
//! median and the best sample, so that a noisy neighbour shows as a gap between the two.

use fusegraph::kernels::gemm::{gemm, workspace_len, MatMut, MatRef};
use fusegraph::optim::keras::{Adam, SgdMomentum};
use fusegraph::optim::Rule;
use fusegraph::optim::{Full, Fused, UpdateMode};
use fusegraph::prelude::*;
use fusegraph::train::{Bytes, EmbeddedStep};
use std::hint::black_box;
use std::time::Instant;

/// Timed samples per variant.
const REPS: usize = 21;

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

/// A deterministic value in `[-1, 1)`.
fn value(i: usize) -> f32 {
    let x = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
    x as f32 / (1u64 << 23) as f32 - 1.0
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A variant: runs `iters` units of work per call.
struct Variant<'a> {
    name: String,
    run: Box<dyn FnMut() + 'a>,
    samples: Vec<f64>,
}

/// Times every variant round-robin; a sample is the time of `iters` calls, in seconds per call.
fn measure(variants: &mut [Variant<'_>], iters: usize) {
    for v in variants.iter_mut() {
        (v.run)();
    }
    for round in 0..REPS {
        let n = variants.len();
        for k in 0..n {
            let v = &mut variants[(k + round) % n];
            let t = Instant::now();
            for _ in 0..iters {
                (v.run)();
            }
            v.samples.push(t.elapsed().as_secs_f64() / iters as f64);
        }
    }
}

fn stats(v: &Variant<'_>) -> (f64, f64) {
    let mut s = v.samples.clone();
    let best = s.iter().copied().fold(f64::INFINITY, f64::min);
    (median(&mut s), best)
}

/// The matrix-product FLOPs of one MLP train step (layer 1's input gradient is not computed).
fn step_flops(batch: usize) -> f64 {
    let (i, h, o) = (784.0, 128.0, 10.0);
    let b = batch as f64;
    2.0 * b * (i * h + h * o) + 2.0 * b * (i * h + h * o) + 2.0 * b * h * o
}

fn mnist_variant<'a, R: Rule + 'a, const B: usize>(name: &str, rule: R) -> Variant<'a> {
    let mut model = Mnist::init(Seed(1));
    let mut step = TrainStep::<Mnist, R, B>::new(&model, rule);
    let x: Vec<f32> = (0..B * 784).map(value).collect();
    let y: Vec<u32> = (0..B as u32).map(|i| i % 10).collect();
    Variant {
        name: name.into(),
        run: Box::new(move || {
            black_box(step.run(&mut model, &x, &y));
        }),
        samples: Vec::new(),
    }
}

fn gemm_variant<'a>(batch: usize) -> Variant<'a> {
    let x: Vec<f32> = (0..batch * 784).map(value).collect();
    let w: Vec<f32> = (0..784 * 128).map(|i| value(i + 7)).collect();
    let mut y = vec![0.0f32; batch * 128];
    let mut ws = vec![0.0f32; workspace_len(batch, 784, 128)];
    Variant {
        name: format!("gemm {batch}x784 · 784x128"),
        run: Box::new(move || {
            gemm(
                1.0,
                MatRef::row_major(&x, batch, 784),
                MatRef::row_major(&w, 784, 128),
                0.0,
                MatMut::row_major(&mut y, batch, 128),
                &mut ws,
            );
            black_box(&y);
        }),
        samples: Vec::new(),
    }
}

fn mnist_table(threads: usize) -> Vec<(String, f64)> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    let mut met = Vec::new();
    pool.install(|| {
        println!("\nMLP 784-128(ReLU)-10, softmax cross-entropy, {threads} thread(s)");
        println!(
            "  {:<34} {:>18} {:>16} {:>9}",
            "variant", "us/step med (best)", "GFLOP/s med", "of gemm"
        );
        for batch in [32usize, 256] {
            let mut vs = vec![gemm_variant(batch)];
            if batch == 32 {
                vs.push(mnist_variant::<_, 32>(
                    "sgd-momentum",
                    SgdMomentum::default(),
                ));
                vs.push(mnist_variant::<_, 32>("adam", Adam::default()));
            } else {
                vs.push(mnist_variant::<_, 256>(
                    "sgd-momentum",
                    SgdMomentum::default(),
                ));
                vs.push(mnist_variant::<_, 256>("adam", Adam::default()));
            }
            measure(&mut vs, if batch == 32 { 200 } else { 30 });
            let (g_med, _) = stats(&vs[0]);
            let gemm_flops = 2.0 * batch as f64 * 784.0 * 128.0;
            let gemm_rate = gemm_flops / g_med / 1e9;
            println!(
                "  {:<34} {:>8.1} ({:>7.1}) {:>16.1} {:>9}",
                vs[0].name,
                g_med * 1e6,
                stats(&vs[0]).1 * 1e6,
                gemm_rate,
                "100%"
            );
            for v in &vs[1..] {
                let (med, best) = stats(v);
                let rate = step_flops(batch) / med / 1e9;
                let frac = rate / gemm_rate;
                println!(
                    "  {:<34} {:>8.1} ({:>7.1}) {:>16.1} {:>8.0}%",
                    format!("train step, batch {batch}, {}", v.name),
                    med * 1e6,
                    best * 1e6,
                    rate,
                    frac * 100.0
                );
                if batch == 256 && threads == 1 {
                    met.push((v.name.clone(), frac));
                }
            }
        }
    });
    met
}

fn tiny_batch<const B: usize>() -> (Vec<f32>, Vec<u32>) {
    let x = (0..B * 8).map(value).collect();
    let y = (0..B as u32).map(|i| i % 4).collect();
    (x, y)
}

fn tiny_variant<'a, R: Rule + 'a, const B: usize>(name: &str, rule: R) -> (Variant<'a>, Bytes) {
    let mut model = Tiny::init(Seed(3));
    let mut step = TrainStep::<Tiny, R, B>::new(&model, rule);
    let (x, y) = tiny_batch::<B>();
    let v = Variant {
        name: format!("batch {B}, {name}, TrainStep"),
        run: Box::new(move || {
            black_box(step.run(&mut model, &x, &y));
        }),
        samples: Vec::new(),
    };
    (v, TrainStep::<Tiny, R, B>::BYTES)
}

fn embedded_variant<'a, R: Rule + 'a, const B: usize, U: UpdateMode + 'a>(
    name: &str,
    rule: R,
) -> (Variant<'a>, Bytes) {
    let mut model = Tiny::init(Seed(3));
    let arena = Box::leak(vec![0.0; EmbeddedStep::<Tiny, R, B, U>::FLOATS].into_boxed_slice());
    let mut step = EmbeddedStep::<Tiny, R, B, U>::new(&model, rule, arena).unwrap();
    let (x, y) = tiny_batch::<B>();
    let mode = if U::FUSED { "Fused" } else { "Full" };
    let v = Variant {
        name: format!("batch {B}, {name}, {mode}"),
        run: Box::new(move || {
            black_box(step.run(&mut model, &x, &y));
        }),
        samples: Vec::new(),
    };
    (v, EmbeddedStep::<Tiny, R, B, U>::BYTES)
}

/// The variants of one batch size and rule: `TrainStep`, then `EmbeddedStep` in both modes.
fn tiny_variants<'a, R: Rule + 'a, const B: usize>(
    name: &str,
    rule: R,
) -> Vec<(Variant<'a>, Bytes)> {
    vec![
        tiny_variant::<R, B>(name, rule),
        embedded_variant::<R, B, Full>(name, rule),
        embedded_variant::<R, B, Fused>(name, rule),
    ]
}

fn tiny_table() -> f64 {
    println!("\nMLP 8-16(ReLU)-4, softmax cross-entropy, 1 thread");
    println!(
        "  {:<40} {:>18} {:>12} {:>14}",
        "variant", "us/step med (best)", "steps/s med", "bytes of state"
    );
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    pool.install(|| {
        let mut all = Vec::new();
        all.extend(tiny_variants::<_, 1>(
            "sgd-momentum",
            SgdMomentum::default(),
        ));
        all.extend(tiny_variants::<_, 1>("adam", Adam::default()));
        all.extend(tiny_variants::<_, 8>(
            "sgd-momentum",
            SgdMomentum::default(),
        ));
        all.extend(tiny_variants::<_, 8>("adam", Adam::default()));
        let (mut vs, bytes): (Vec<_>, Vec<_>) = all.into_iter().unzip();
        measure(&mut vs, 20_000);
        let mut worst_b8 = 0.0f64;
        for (v, b) in vs.iter().zip(&bytes) {
            let (med, best) = stats(v);
            println!(
                "  {:<40} {:>8.2} ({:>7.2}) {:>12.0} {:>14}",
                v.name,
                med * 1e6,
                best * 1e6,
                1.0 / med,
                b.total()
            );
            if v.name.starts_with("batch 8") && v.name.ends_with("TrainStep") {
                worst_b8 = worst_b8.max(med);
            }
        }
        worst_b8
    })
}

fn main() {
    println!(
        "bench_train: compiled with avx2 {}, fma {}; {REPS} interleaved samples per variant",
        cfg!(target_feature = "avx2"),
        cfg!(target_feature = "fma"),
    );
    let fractions = mnist_table(1);
    mnist_table(2);
    let tiny = tiny_table();
    println!("\ntargets (medians, one thread):");
    for (name, frac) in fractions {
        let ok = if frac >= 0.6 { "met" } else { "missed" };
        println!(
            "  784-128-10 step at batch 256 ({name}) >= 60% of the GEMM rate: {:.0}% -> {ok}",
            frac * 100.0
        );
    }
    let ok = if tiny <= 2e-6 { "met" } else { "missed" };
    println!(
        "  8-16-4 step at batch 8 <= 2 us: {:.2} us -> {ok}",
        tiny * 1e6
    );
}
