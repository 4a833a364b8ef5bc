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
//! - W4, a LeNet-like network on 28x28x1 images: conv 5x5, 16 filters, valid, ReLU; max pool
//!   2; conv 5x5, 32 filters, valid, ReLU; max pool 2; flatten (4·4·32 = 512); dense 128 ReLU;
//!   dense 10; softmax cross-entropy, Adam (Keras, lr 1e-3), batch 8 and 64, one thread then
//!   two: microseconds per step, the step's matrix-product FLOPs (`w4_flops`: forward,
//!   weight-gradient and input-gradient products from the layer shapes, no input gradient for
//!   the first layer; 399 MFLOP at batch 64), GFLOP/s, and, against a variant that makes the
//!   step's `gemm` calls alone (same shapes and layouts, timed in the same round-robin), the
//!   fraction of their rate the step reaches ("of gemm") and the share of the step spent
//!   outside the products (im2col/col2im, pooling, activations, biases, loss, update). With
//!   the argument `products`, each of the step's products at batch 64 is also timed on its
//!   own (shape, with `ᵀ` on an operand the layer passes transposed; GFLOP/s).
//!   outside the products (im2col/col2im, pooling, activations, biases, loss, update).
//! - W5, a causal transformer language model (`support/w5.rs`): vocabulary 64, width 64, 4
//!   heads, 2 pre-LayerNorm blocks, sequence 64, batch 16, AdamW, one thread then two:
//!   microseconds per step, its products' FLOPs (`w5_flops`, 729 MFLOP), GFLOP/s, and that
//!   rate as a fraction of the GEMM's on the step's largest product (the MLP's `X·W`, 1024x64
//!   by 64x256) timed in the same run.
//! - W6, a GRU over 32 steps of 16 features with 64 hidden units, its last hidden state read by
//!   a dense 10, softmax cross-entropy, Adam, batch 32, one thread then two: microseconds per
//!   step, the step's matrix-product FLOPs (`w6_flops`), GFLOP/s, and that rate as a fraction of
//!   the GEMM's on the step's largest product (`dW_hh = dGhᵀ·H_prev`, 192x1024 by 1024x64) timed
//!   in the same run.
//!
//! Variants of one table are timed round-robin, `REPS` samples each (`support/timing.rs`); the
//! table gives the median and the best sample, so that a noisy neighbour shows as a gap
//! between the two.

#[path = "support/against_gemm.rs"]
mod against_gemm;
#[path = "support/timing.rs"]
mod timing;
#[path = "support/w5.rs"]
mod w5;

use against_gemm::against_gemm;
use fusegraph::kernels::gemm::{gemm, workspace_len, MatMut, MatRef};
use fusegraph::lane::Capability;
use fusegraph::optim::keras::{Adam, SgdMomentum};
use fusegraph::optim::Rule;
use fusegraph::optim::{Full, Fused, UpdateMode};
use fusegraph::prelude::*;
use fusegraph::train::{Bytes, EmbeddedStep};
use std::hint::black_box;
use timing::{measure, stats, value, Variant, REPS};

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

/// Workload W4: a LeNet-like convolutional network on 28x28x1 images.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
struct W4 {
    conv1: Conv2d<28, 28, 1, 16, 5, 5, 1, Valid, Relu>,
    pool1: MaxPool2d<24, 24, 16, 2>,
    conv2: Conv2d<12, 12, 16, 32, 5, 5, 1, Valid, Relu>,
    pool2: MaxPool2d<8, 8, 32, 2>,
    flat: Flatten<512>,
    fc1: Dense<512, 128, Relu>,
    fc2: Dense<128, 10>,
}

/// A rayon pool of `threads` threads, for one table.
fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
}

/// Workload W6: a GRU (input 16, hidden 64, sequence 32) and a classifier.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
struct W6 {
    gru: Gru<32, 16, 64>,
    fc: Dense<64, 10>,
}

/// W6's time steps, input features, hidden units and batch.
const W6_SIZES: (usize, usize, usize, usize) = (32, 16, 64, 32);

/// The matrix-product FLOPs of one W6 train step, `2·m·k·n` each: the input projections of all
/// steps (`batch·T` x 16 x 192), the recurrent product of every step but the first and its
/// gradient (`batch` x 64 x 192, twice per step), `dW_ih` and `dW_hh` (192 x `batch·T` x 16 and
/// x 64), and the dense layer's three products; no input gradient for the GRU.
fn w6_flops() -> f64 {
    let (t, i, h, b) = W6_SIZES;
    let (g, rows) = (3 * h, b * t);
    let gru = rows * i * g + 2 * (t - 1) * b * h * g + g * rows * i + g * rows * h;
    2.0 * (gru + 3 * b * h * 10) as f64
}

fn w6_variant<'a>() -> Variant<'a> {
    const B: usize = W6_SIZES.3;
    let mut model = W6::init(Seed(6));
    let mut step = TrainStep::<W6, Adam, B>::new(&model, Adam::default());
    let x: Vec<f32> = (0..B * W6::IN).map(value).collect();
    let y: Vec<u32> = (0..B as u32).map(|i| i % 10).collect();
    Variant::new(format!("train step, batch {B}, adam"), move || {
        black_box(step.run(&mut model, &x, &y));
    })
}

/// W6's largest product alone, as the layer makes it: `dW_hh = dGhᵀ·H_prev`.
fn w6_gemm_variant<'a>() -> Variant<'a> {
    let (t, _, h, b) = W6_SIZES;
    let (g, rows) = (3 * h, b * t);
    let dg: Vec<f32> = (0..rows * g).map(value).collect();
    let hp: Vec<f32> = (0..rows * h).map(|i| value(i + 5)).collect();
    let mut dw = vec![0.0f32; g * h];
    let mut ws = vec![0.0f32; workspace_len(g, rows, h)];
    Variant::new(format!("gemm {g}x{rows} · {rows}x{h}"), move || {
        gemm(
            1.0,
            MatRef::row_major(&dg, rows, g).t(),
            MatRef::row_major(&hp, rows, h),
            0.0,
            MatMut::row_major(&mut dw, g, h),
            &mut ws,
        );
        black_box(&dw);
    })
}

/// W6 on `threads` threads; returns the step's fraction of the GEMM's rate.
fn w6_table(threads: usize) -> f64 {
    let title = format!(
        "W6 GRU 16 -> 64 over 32 steps - dense 10, softmax cross-entropy, Adam, {threads} \
         thread(s)"
    );
    let (t, _, h, b) = W6_SIZES;
    let gemm_flops = 2.0 * (3 * h * b * t * h) as f64;
    pool(threads).install(|| {
        let (gemm, step) = (w6_gemm_variant(), w6_variant());
        against_gemm(&title, gemm, step, [gemm_flops, w6_flops()], 4)
    })
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
    Variant::new(name, move || {
        black_box(step.run(&mut model, &x, &y));
    })
}

fn gemm_variant<'a>(batch: usize) -> Variant<'a> {
    let x: Vec<f32> = (0..batch * 784).map(value).collect();
    let w: Vec<f32> = (0..784 * 128).map(|i| value(i + 7)).collect();
    let mut y = vec![0.0f32; batch * 128];
    let mut ws = vec![0.0f32; workspace_len(batch, 784, 128)];
    Variant::new(format!("gemm {batch}x784 · 784x128"), move || {
        gemm(
            1.0,
            MatRef::row_major(&x, batch, 784),
            MatRef::row_major(&w, 784, 128),
            0.0,
            MatMut::row_major(&mut y, batch, 128),
            &mut ws,
        );
        black_box(&y);
    })
}

fn mnist_table(threads: usize) -> Vec<(String, f64)> {
    let pool = pool(threads);
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

/// One `gemm` call of a train step: `C = A·B`, `m`x`k` by `k`x`n` into a fresh `C` (beta 0),
/// with `A` stored as its `k`x`m` transpose when `at` and `B` as its `n`x`k` transpose when
/// `bt`, as the layers pass them.
#[derive(Clone, Copy)]
struct Mm {
    m: usize,
    k: usize,
    n: usize,
    at: bool,
    bt: bool,
}

/// The `gemm` calls of one W4 train step over `batch` samples, in the order the step makes
/// them. Each layer with parameters is a product of `rows` x `k` by `k` x `n` per sample: a
/// convolution's rows are its output positions and `k` its patch (5 * 5 * channels in), a
/// dense layer has one row. Forward `P·W` for every layer; backward, from the last layer,
/// `Pᵀ·dz` (weight gradient, `A` transposed) and `dz·Wᵀ` (input gradient, `B` transposed),
/// which the first layer does not compute (`TrainStep::run` passes it `Grad::Skip`). Pooling,
/// flattening, activations, biases, the loss, im2col/col2im and the update are not products.
fn w4_products(batch: usize) -> Vec<Mm> {
    let layers = [
        (24 * 24, 5 * 5, 16),
        (8 * 8, 5 * 5 * 16, 32),
        (1, 512, 128),
        (1, 128, 10),
    ];
    let mm = |m, k, n, at, bt| Mm { m, k, n, at, bt };
    let mut calls: Vec<Mm> = layers
        .iter()
        .map(|&(r, k, n)| mm(r * batch, k, n, false, false))
        .collect();
    for (i, &(r, k, n)) in layers.iter().enumerate().rev() {
        calls.push(mm(k, r * batch, n, true, false));
        if i > 0 {
            calls.push(mm(r * batch, n, k, false, true));
        }
    }
    calls
}

/// The matrix-product FLOPs of one W4 train step, `2·m·k·n` summed over [`w4_products`]: per
/// sample 2·576·25·16 twice (conv1: forward, weight gradient), 2·64·400·32 three times (conv2),
/// 2·512·128 and 2·128·10 three times each (fc1, fc2), 6,237,696 in all; 399,212,544 at
/// batch 64.
fn w4_flops(batch: usize) -> f64 {
    w4_products(batch)
        .iter()
        .map(|p| 2.0 * (p.m * p.k * p.n) as f64)
        .sum()
}

fn w4_variant<'a, const B: usize>() -> Variant<'a> {
    let mut model = W4::init(Seed(4));
    let mut step = TrainStep::<W4, Adam, B>::new(&model, Adam::default());
    let x: Vec<f32> = (0..B * 784).map(value).collect();
    let y: Vec<u32> = (0..B as u32).map(|i| i % 10).collect();
    Variant::new(format!("train step, batch {B}, adam"), move || {
        black_box(step.run(&mut model, &x, &y));
    })
}

/// Operands and result of one [`Mm`], filled from `seed`.
struct MmBuffers {
    a: Vec<f32>,
    b: Vec<f32>,
    c: Vec<f32>,
}

impl Mm {
    /// Buffers for this product, with values that depend on `seed`.
    fn buffers(&self, seed: usize) -> MmBuffers {
        MmBuffers {
            a: (0..self.m * self.k).map(|j| value(j + seed)).collect(),
            b: (0..self.k * self.n)
                .map(|j| value(j + 7 * seed + 3))
                .collect(),
            c: vec![0.0; self.m * self.n],
        }
    }

    /// `C = A·B` on `bufs`, with the layouts the layers pass.
    fn run(&self, bufs: &mut MmBuffers, ws: &mut [f32]) {
        let a = match self.at {
            true => MatRef::row_major(&bufs.a, self.k, self.m).t(),
            false => MatRef::row_major(&bufs.a, self.m, self.k),
        };
        let b = match self.bt {
            true => MatRef::row_major(&bufs.b, self.n, self.k).t(),
            false => MatRef::row_major(&bufs.b, self.k, self.n),
        };
        gemm(
            1.0,
            a,
            b,
            0.0,
            MatMut::row_major(&mut bufs.c, self.m, self.n),
            ws,
        );
        black_box(&bufs.c);
    }

    /// How the table names this product: its shape, with `ᵀ` on an operand stored transposed.
    fn label(&self) -> String {
        let t = |on: bool| if on { "ᵀ" } else { "" };
        format!(
            "{}x{}{} · {}x{}{}",
            self.m,
            self.k,
            t(self.at),
            self.k,
            self.n,
            t(self.bt)
        )
    }
}

/// The step's [`w4_products`] alone, each into its own buffers, with one workspace long enough
/// for all of them.
fn products_variant<'a>(batch: usize) -> Variant<'a> {
    let calls = w4_products(batch);
    let mut bufs: Vec<_> = calls
        .iter()
        .enumerate()
        .map(|(i, p)| p.buffers(i))
        .collect();
    let ws_len = calls.iter().map(|p| workspace_len(p.m, p.k, p.n)).max();
    let mut ws = vec![0.0f32; ws_len.unwrap_or(0)];
    Variant::new(format!("products alone, batch {batch}"), move || {
        for (p, bufs) in calls.iter().zip(&mut bufs) {
            p.run(bufs, &mut ws);
        }
    })
}

/// Each of the W4 step's products at batch 64 on its own, interleaved: microseconds and
/// GFLOP/s, on the current pool.
fn w4_product_table() {
    let calls = w4_products(64);
    let mut vs: Vec<Variant<'_>> = calls
        .iter()
        .enumerate()
        .map(|(i, &p)| {
            let mut bufs = p.buffers(i);
            let mut ws = vec![0.0f32; workspace_len(p.m, p.k, p.n)];
            Variant::new(p.label(), move || p.run(&mut bufs, &mut ws))
        })
        .collect();
    measure(&mut vs, 4);
    println!(
        "  {:<28} {:>18} {:>12}",
        "product, batch 64", "us med (best)", "GFLOP/s med"
    );
    for (p, v) in calls.iter().zip(&vs) {
        let (med, best) = stats(v);
        let flops = 2.0 * (p.m * p.k * p.n) as f64;
        println!(
            "  {:<28} {:>8.0} ({:>7.0}) {:>12.1}",
            v.name,
            med * 1e6,
            best * 1e6,
            flops / med / 1e9
        );
    }
}

fn w4_table(threads: usize) {
    let pool = pool(threads);
    pool.install(|| {
        println!(
            "\nW4 conv 5x5x16 - pool - conv 5x5x32 - pool - 512-128(ReLU)-10, softmax \
             cross-entropy, Adam, {threads} thread(s)"
        );
        println!(
            "  {:<28} {:>18} {:>8} {:>12} {:>9} {:>9}",
            "variant", "us/step med (best)", "MFLOP", "GFLOP/s med", "of gemm", "outside"
        );
        for batch in [8usize, 64] {
            let mut vs = vec![products_variant(batch)];
            vs.push(match batch {
                8 => w4_variant::<8>(),
                _ => w4_variant::<64>(),
            });
            measure(&mut vs, if batch == 8 { 16 } else { 2 });
            let flops = w4_flops(batch);
            let (p_med, _) = stats(&vs[0]);
            for v in &vs {
                let (med, best) = stats(v);
                println!(
                    "  {:<28} {:>8.0} ({:>7.0}) {:>8.1} {:>12.1} {:>8.0}% {:>8.0}%",
                    v.name,
                    med * 1e6,
                    best * 1e6,
                    flops / 1e6,
                    flops / med / 1e9,
                    p_med / med * 100.0,
                    (1.0 - p_med / med) * 100.0
                );
            }
        }
        if wanted("products") {
            w4_product_table();
        }
    });
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
    let v = Variant::new(format!("batch {B}, {name}, TrainStep"), move || {
        black_box(step.run(&mut model, &x, &y));
    });
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
    let v = Variant::new(format!("batch {B}, {name}, {mode}"), move || {
        black_box(step.run(&mut model, &x, &y));
    });
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
    let pool = pool(1);
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

/// Whether the table `name` was asked for: every table without arguments, else the ones
/// named (`mlp`, `w4`, `w5`, `w6`, `tiny`).
fn wanted(name: &str) -> bool {
    let args: Vec<String> = std::env::args().skip(1).collect();
    args.is_empty() || args.iter().any(|a| a == name)
}

fn main() {
    println!(
        "bench_train: compiled with avx2 {}, fma {}; GEMM kernel {} (compiled: {}); {REPS} \
         interleaved samples per variant",
        cfg!(target_feature = "avx2"),
        cfg!(target_feature = "fma"),
        Capability::active(),
        Capability::compiled(),
    );
    let fractions = if wanted("mlp") {
        let f = mnist_table(1);
        mnist_table(2);
        f
    } else {
        Vec::new()
    };
    if wanted("w4") {
        w4_table(1);
        w4_table(2);
    }
    if wanted("w5") {
        let fraction = w5::w5_table(1);
        w5::w5_table(2);
        let ok = if fraction >= 0.6 { "met" } else { "missed" };
        println!(
            "  W5 step >= 60% of the GEMM rate on its largest product: {:.0}% -> {ok}",
            fraction * 100.0
        );
    }
    if wanted("w6") {
        let fraction = w6_table(1);
        w6_table(2);
        let ok = if fraction >= 0.6 { "met" } else { "missed" };
        println!(
            "  W6 step >= 60% of the GEMM rate on its largest product: {:.0}% -> {ok}",
            fraction * 100.0
        );
    }
    if !wanted("tiny") {
        return;
    }
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
