//! Training on a target without an allocator: an 8-16(ReLU)-4 MLP, its SGD-momentum state,
//! its activations, its workspace and its gradients live in two `static`s whose sizes are
//! constants of the model's type. This crate is `#![no_std]` and does not link `alloc`;
//! `src/bin/host.rs` runs [`train`] on the host. [`digits`] is a real task the same way: the
//! UCI handwritten digits, in flash, learned by a 64-32-16-10 MLP within 64 KB.
//!
//! The model's memory budget is checked when the crate compiles: `max_bytes` below is the
//! budget, and a model, batch or optimizer that needs more is a compile error that gives the
//! total and each part.
#![no_std]

use fusegraph::optim::torch::SgdMomentum;
use fusegraph::optim::{Fused, Plain};
use fusegraph::prelude::*;
use fusegraph::train::{EmbeddedStep, Static};

/// Declares `Step`, the train step of `$model` with rule `$rule` at batch `$batch` (each layer
/// updated as soon as its gradient is known), the two statics it trains from (the model and the
/// step's arena) and `take_step`, which hands them out once: the model initialized from a seed
/// and its step.
macro_rules! static_training {
    ($model:ty, $rule:ty, $batch:expr) => {
        /// The train step: each layer updated as soon as its gradient is known, by the rule
        /// alone (no clipping, weight decay, EMA or schedule compiled in).
        pub type Step = EmbeddedStep<'static, $model, $rule, { $batch }, Fused<Plain>>;

        static MODEL: Static<$model> = Static::new(<$model>::zeroed());
        static ARENA: Static<[f32; Step::FLOATS]> = Static::new([0.0; Step::FLOATS]);

        /// The model, initialized from `seed`, and its step with `rule`, from the statics;
        /// `None` if they were already taken (they are handed out once).
        fn take_step(seed: Seed, rule: $rule) -> Option<(&'static mut $model, Step)> {
            let model = MODEL.take()?;
            model.init_in_place(seed);
            let step = Step::new(model, rule, ARENA.take()?).ok()?;
            Some((model, step))
        }
    };
}

pub mod digits;
pub mod finetune;

/// A training that the firmware runs and the host build checks, a step at a time: the digits
/// ([`digits::Training`]) and their fine-tuning ([`finetune::Tuning`]).
pub trait Task: Sized {
    /// What the training measured: the line both builds print.
    type Report: core::fmt::Display;
    /// Steps in one pass over the training images.
    const STEPS_PER_EPOCH: usize;
    /// Passes over the training images.
    const EPOCHS: usize;
    /// Floating-point operations of one step, from the layers' shapes.
    const FLOPS_PER_STEP: usize;
    /// Bytes of the model and its train step.
    const STEP_BYTES: usize;

    /// The training from its statics; `None` if they were already taken.
    fn take() -> Option<Self>;
    /// Trains on batch `k` of an epoch (`0..STEPS_PER_EPOCH`).
    fn step(&mut self, k: usize);
    /// What the training measured so far, and whether it reached its target.
    fn measure(&mut self) -> (Self::Report, bool);

    /// One pass over the training images, [`STEPS_PER_EPOCH`](Self::STEPS_PER_EPOCH) steps.
    fn epoch(&mut self) {
        for k in 0..Self::STEPS_PER_EPOCH {
            self.step(k);
        }
    }

    /// Trains for [`EPOCHS`](Self::EPOCHS) passes from the static memory and reports; `None`
    /// if the statics were already taken (they are handed out once).
    fn train() -> Option<Self::Report> {
        let mut task = Self::take()?;
        for _ in 0..Self::EPOCHS {
            task.epoch();
        }
        Some(task.measure().0)
    }
}

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

static_training!(Tiny, SgdMomentum, BATCH);

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

/// Floating-point operations of one train step at batch [`BATCH`], from the layers' shapes
/// ([`mlp_flops_per_step`]).
pub const FLOPS_PER_STEP: usize = mlp_flops_per_step(&[8, 16, 4], BATCH);

/// Floating-point operations of one train step of an MLP of dense layers between `widths`
/// (inputs first, classes last; ReLU after every hidden layer, softmax cross-entropy at the end,
/// SGD with momentum) at batch `batch`, every layer trained: [`tuned_mlp_flops_per_step`] with
/// no frozen layer.
pub const fn mlp_flops_per_step(widths: &[usize], batch: usize) -> usize {
    tuned_mlp_flops_per_step(widths, 0, batch)
}

/// Floating-point operations of one train step of the MLP of [`mlp_flops_per_step`] whose
/// first `frozen` layers are frozen: the forward products and biases of every layer; the weight
/// and bias gradients of the trained layers; the input gradients of the layers above a trained
/// one (none below the lowest trained layer, none for the first layer); ReLU, and its
/// derivative after the trained hidden layers; the softmax and cross-entropy with its gradient
/// (`exp`, a sum, a division and a subtraction per logit); and the update of the trained
/// parameters (`buf = m buf + g`, `p -= lr buf`: four per parameter).
pub const fn tuned_mlp_flops_per_step(widths: &[usize], frozen: usize, batch: usize) -> usize {
    let (mut products, mut biases, mut hidden) = (0, 0, 0);
    let (mut trained_products, mut trained_biases, mut input_gradients, mut trained_hidden) =
        (0, 0, 0, 0);
    let mut layer = 1;
    while layer < widths.len() {
        let (inputs, outputs) = (widths[layer - 1], widths[layer]);
        let is_hidden = layer + 1 < widths.len();
        products += inputs * outputs;
        biases += outputs;
        if is_hidden {
            hidden += outputs;
        }
        if layer > frozen {
            trained_products += inputs * outputs;
            trained_biases += outputs;
            if is_hidden {
                trained_hidden += outputs;
            }
        }
        if layer > frozen + 1 {
            input_gradients += inputs * outputs;
        }
        layer += 1;
    }
    let classes = widths[widths.len() - 1];
    let forward = 2 * batch * products + batch * biases;
    let backward =
        2 * batch * trained_products + batch * trained_biases + 2 * batch * input_gradients;
    let relu = batch * hidden + batch * trained_hidden;
    let loss = 4 * batch * classes;
    let update = 4 * (trained_products + trained_biases);
    forward + backward + relu + loss + update
}

/// Samples of `labels` whose row of `outputs` (`classes` scores each) is highest at the label
/// (the first highest, where several tie).
pub fn correct_in(outputs: &[f32], classes: usize, labels: &[u32]) -> usize {
    let mut correct = 0;
    for (scores, &label) in outputs.chunks(classes).zip(labels) {
        let mut best = 0;
        for k in 1..classes {
            if scores[k] > scores[best] {
                best = k;
            }
        }
        correct += usize::from(best as u32 == label);
    }
    correct
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

/// The line both builds print, the host's and the firmware's: the losses as bits, so that the
/// two can be compared exactly (and no float is formatted on the microcontroller).
impl core::fmt::Display for Report {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "steps {} first_loss_bits {:#010x} last_loss_bits {:#010x} correct {}",
            self.steps,
            self.first_loss.to_bits(),
            self.last_loss.to_bits(),
            self.correct
        )
    }
}

/// The demo's training, a step at a time: the model and its step in static memory, and the
/// data set.
pub struct Demo {
    model: &'static mut Tiny,
    step: Step,
    x: [f32; SAMPLES * 8],
    y: [u32; SAMPLES],
}

impl Demo {
    /// Steps in one pass over the data set.
    pub const STEPS_PER_EPOCH: usize = SAMPLES / BATCH;

    /// The initialized model and its step; `None` if the statics were already taken (they are
    /// handed out once).
    pub fn new() -> Option<Self> {
        let (model, step) = take_step(Seed(7), SgdMomentum::default().with_lr(0.1))?;
        let (x, y) = data();
        Some(Demo { model, step, x, y })
    }

    /// One pass over the data set, [`Self::STEPS_PER_EPOCH`] steps.
    pub fn epoch(&mut self) {
        for (xs, ys) in self.x.chunks(BATCH * 8).zip(self.y.chunks(BATCH)) {
            self.step.run(self.model, xs, ys);
        }
    }

    /// The mean loss over the data set.
    pub fn loss(&mut self) -> f32 {
        self.step.evaluate(self.model, &self.x, &self.y).loss
    }

    /// The samples of the data set classified right.
    pub fn correct(&mut self) -> usize {
        let mut correct = 0;
        for (xs, ys) in self.x.chunks(BATCH * 8).zip(self.y.chunks(BATCH)) {
            correct += correct_in(self.step.predict(self.model, xs), 4, ys);
        }
        correct
    }

    /// Optimizer steps taken.
    pub fn steps(&self) -> u64 {
        self.step.optimizer().iterations()
    }
}

/// Trains the model for `epochs` passes over the data set, from the static memory; `None` if
/// it was already called (the statics are handed out once).
pub fn train(epochs: usize) -> Option<Report> {
    let mut demo = Demo::new()?;
    let first_loss = demo.loss();
    for _ in 0..epochs {
        demo.epoch();
    }
    Some(Report {
        first_loss,
        last_loss: demo.loss(),
        correct: demo.correct(),
        steps: demo.steps(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The demo's step counted by hand: forward 2*8*(8*16 + 16*4) + 8*(16 + 4) = 3,232;
    /// backward 3,072 + 160 + 2*8*16*4 = 4,256; ReLU 2*8*16 = 256; loss 4*8*4 = 128; update
    /// 4*(128 + 16 + 64 + 4) = 848.
    #[test]
    fn flops_of_the_demo_step() {
        assert_eq!(FLOPS_PER_STEP, 3232 + 4256 + 256 + 128 + 848);
    }

    /// The digits' step counted by hand (64-32-16-10 at batch 16): forward 2*16*2,720 + 16*58
    /// = 87,968; backward 87,040 + 928 + 2*16*(32*16 + 16*10) = 109,472; ReLU 2*16*48 = 1,536;
    /// loss 4*16*10 = 640; update 4*2,778 = 11,112.
    #[test]
    fn flops_of_the_digits_step() {
        assert_eq!(digits::FLOPS_PER_STEP, 87968 + 109472 + 1536 + 640 + 11112);
    }

    /// The fine-tuning's step counted by hand (64-32-16 frozen, the 16-10 head trained, batch
    /// 16): forward 87,968 as the digits'; backward through the head alone, 2*16*160 + 16*10 =
    /// 5,280, no input gradient; ReLU without its derivative 16*48 = 768; loss 640; update
    /// 4*170 = 680.
    #[test]
    fn flops_of_the_fine_tuning_step() {
        assert_eq!(finetune::FLOPS_PER_STEP, 87968 + 5280 + 768 + 640 + 680);
    }

    /// The first highest score is the prediction: ties go to the lower class.
    #[test]
    fn a_sample_is_right_where_its_label_scores_first_highest() {
        let outputs = [0.1, 0.7, 0.2, 0.5, 0.5, 0.0, -1.0, -2.0, -0.5];
        assert_eq!(correct_in(&outputs, 3, &[1, 0, 2]), 3);
        assert_eq!(correct_in(&outputs, 3, &[1, 1, 0]), 1);
    }
}
