//! Training on a target without an allocator: an 8-16(ReLU)-4 MLP, its SGD-momentum state,
//! its activations, its workspace and its gradients live in two `static`s whose sizes are
//! constants of the model's type. This crate is `#![no_std]` and does not link `alloc`;
//! `src/bin/host.rs` runs [`train`] on the host.
//!
//! The model's memory budget is checked when the crate compiles: `max_bytes` below is the
//! budget, and a model, batch or optimizer that needs more is a compile error that gives the
//! total and each part.
#![no_std]

use fusegraph::optim::torch::SgdMomentum;
use fusegraph::optim::{Fused, Plain};
use fusegraph::prelude::*;
use fusegraph::train::{EmbeddedStep, Static};

/// Samples per batch.
pub const BATCH: usize = 8;

/// Four classes from eight features, stored inline: no heap.
#[fusegraph::model(
    loss = SoftmaxCrossEntropy,
    inline,
    max_bytes = 8192,
    batch = 8,
    optimizer = SgdMomentum,
    fused
)]
pub struct Tiny {
    fc1: Dense<8, 16, Relu>,
    fc2: Dense<16, 4>,
}

/// The train step: each layer updated as soon as its gradient is known, by the rule alone (no
/// clipping, weight decay or EMA compiled in).
pub type Step = EmbeddedStep<'static, Tiny, SgdMomentum, BATCH, Fused<Plain>>;

static MODEL: Static<Tiny> = Static::new(Tiny::zeroed());
static ARENA: Static<[f32; Step::FLOATS]> = Static::new([0.0; Step::FLOATS]);

/// Samples of the fixed data set.
pub const SAMPLES: usize = 32;

/// The data set: sample `i` is class `i % 4`, two features set for its class (`2c` and
/// `2c + 1`) plus a small deterministic perturbation of every feature.
pub fn data() -> ([f32; SAMPLES * 8], [u32; SAMPLES]) {
    let mut x = [0.0f32; SAMPLES * 8];
    let mut y = [0u32; SAMPLES];
    let mut rng = Rng::new(Seed(11));
    for i in 0..SAMPLES {
        let class = i % 4;
        y[i] = class as u32;
        for j in 0..8 {
            let base = if j / 2 == class { 1.0 } else { 0.0 };
            x[i * 8 + j] = base + 0.2 * (rng.next_f32() - 0.5);
        }
    }
    (x, y)
}

/// What [`train`] measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Report {
    /// Mean loss over the data set before training.
    pub first_loss: f32,
    /// Mean loss after training.
    pub last_loss: f32,
    /// Samples classified right after training.
    pub correct: usize,
    /// Optimizer steps taken.
    pub steps: u64,
}

/// Trains the model for `epochs` passes over the data set, from the static memory; `None` if
/// it was already called (the statics are handed out once).
pub fn train(epochs: usize) -> Option<Report> {
    let model = MODEL.take()?;
    model.init_in_place(Seed(7));
    let arena = ARENA.take()?;
    let rule = SgdMomentum::default().with_lr(0.1);
    let mut step = Step::new(model, rule, arena).ok()?;
    let (x, y) = data();
    let first_loss = step.evaluate(model, &x, &y).loss;
    for _ in 0..epochs {
        for (xs, ys) in x.chunks(BATCH * 8).zip(y.chunks(BATCH)) {
            step.run(model, xs, ys);
        }
    }
    let last_loss = step.evaluate(model, &x, &y).loss;
    let mut correct = 0;
    for (xs, ys) in x.chunks(BATCH * 8).zip(y.chunks(BATCH)) {
        let out = step.predict(model, xs);
        for (o, &label) in out.chunks(4).zip(ys) {
            let mut best = 0;
            for k in 1..4 {
                if o[k] > o[best] {
                    best = k;
                }
            }
            correct += usize::from(best as u32 == label);
        }
    }
    Some(Report {
        first_loss,
        last_loss,
        correct,
        steps: step.optimizer().iterations(),
    })
}
