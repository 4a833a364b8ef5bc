//! A real task on a microcontroller: the UCI handwritten digits (8x8 images, ten classes)
//! learned by a 64-32(ReLU)-16(ReLU)-10 MLP with SGD and momentum at batch 16, every buffer in
//! static memory within a 64 KB budget, the data set in flash.
//!
//! The data are `data/digits.csv` of this repository: the test set of "Optical Recognition of
//! Handwritten Digits" (E. Alpaydin, C. Kaynak, 1998; UCI Machine Learning Repository,
//! CC BY 4.0), 1,797 images, as scikit-learn's `load_digits` distributes it (see
//! `data/README.md`). `build.rs` turns it into a byte a pixel (0..=16) and a byte a label, 113 KB
//! of flash that no step copies: a batch is scaled to `pixel / 8 - 1` (-1 to 1) as it is trained on.
//!
//! The split is fixed: every fifth image (the first, the sixth, ...: [`HELD_OUT`] of them) is
//! never trained on and measures the accuracy; the other [`TRAINING`] train, in the file's order
//! without shuffling, so that every build (host or microcontroller) takes the same steps and
//! gives the same bits.

use fusegraph::optim::torch::SgdMomentum;
use fusegraph::optim::{Fused, Plain};
use fusegraph::prelude::*;
use fusegraph::train::{EmbeddedStep, Static};

/// Pixels of an image.
pub const PIXELS: usize = 64;
/// Classes (the digits 0 to 9).
pub const CLASSES: usize = 10;
/// Images in the data set.
pub const IMAGES: usize = 1797;
/// One image in this many is held out.
const HOLD_OUT_EVERY: usize = 5;
/// The images held out: every fifth.
pub const HELD_OUT: usize = IMAGES.div_ceil(HOLD_OUT_EVERY);
/// The images trained on: the others.
pub const TRAINING: usize = IMAGES - HELD_OUT;
/// Samples per batch.
pub const BATCH: usize = 16;
/// Passes over the training images.
pub const EPOCHS: usize = 8;
/// The held-out accuracy the training must reach, in percent.
pub const TARGET_ACCURACY_PERCENT: usize = 92;

/// Every image's pixels, row by row, 0..=16 (a byte each), in flash.
static PIXELS_U8: [u8; IMAGES * PIXELS] =
    *include_bytes!(concat!(env!("OUT_DIR"), "/digits_pixels.bin"));
/// Every image's label, 0..=9.
static LABELS: [u8; IMAGES] = *include_bytes!(concat!(env!("OUT_DIR"), "/digits_labels.bin"));

/// Ten digit scores from 64 pixels, stored inline, in at most 64 KB with its train step.
#[fusegraph::model(
    loss = SoftmaxCrossEntropy,
    inline,
    max_bytes = 65536,
    batch = 16,
    optimizer = SgdMomentum,
    fused
)]
pub struct Mlp {
    fc1: Dense<64, 32, Relu>,
    fc2: Dense<32, 16, Relu>,
    fc3: Dense<16, 10>,
}

static_training!(Mlp, SgdMomentum, BATCH);

/// Floating-point operations of one train step, from the layers' shapes.
pub const FLOPS_PER_STEP: usize = crate::mlp_flops_per_step(&[PIXELS, 32, 16, CLASSES], BATCH);

/// What the training measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Report {
    /// Optimizer steps taken.
    pub steps: u64,
    /// The loss of the last batch trained on (before its update).
    pub last_loss: f32,
    /// Held-out images classified right.
    pub correct: usize,
}

impl Report {
    /// Whether the held-out accuracy reached [`TARGET_ACCURACY_PERCENT`].
    pub fn reached_target(&self) -> bool {
        self.correct * 100 >= TARGET_ACCURACY_PERCENT * HELD_OUT
    }
}

/// The line the host build and the firmware both print: the loss as bits, compared exactly.
impl core::fmt::Display for Report {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "steps {} last_loss_bits {:#010x} held_out_correct {} of {}",
            self.steps,
            self.last_loss.to_bits(),
            self.correct,
            HELD_OUT
        )
    }
}

/// The index in the data set of training image `k`.
fn training_image(k: usize) -> usize {
    let kept = HOLD_OUT_EVERY - 1;
    k / kept * HOLD_OUT_EVERY + k % kept + 1
}

/// The index in the data set of held-out image `k`.
fn held_out_image(k: usize) -> usize {
    k * HOLD_OUT_EVERY
}

/// The images `image(first)`, `image(first + 1)`, ... (as many as `y` holds) scaled to
/// `pixel / 8 - 1` into `x`, their labels into `y`.
fn load(image: fn(usize) -> usize, first: usize, x: &mut [f32], y: &mut [u32]) {
    for (k, (row, label)) in x.chunks_mut(PIXELS).zip(y.iter_mut()).enumerate() {
        let index = image(first + k);
        for (value, &pixel) in row.iter_mut().zip(&PIXELS_U8[index * PIXELS..]) {
            *value = f32::from(pixel) / 8.0 - 1.0;
        }
        *label = u32::from(LABELS[index]);
    }
}

/// Batch `k` of the training images (`0..TRAINING.div_ceil(BATCH)`) scaled into `x`, its
/// labels into `y`; returns how many samples it has (fewer than [`BATCH`] in the last batch).
pub(crate) fn training_batch(
    k: usize,
    x: &mut [f32; BATCH * PIXELS],
    y: &mut [u32; BATCH],
) -> usize {
    let first = k * BATCH;
    let samples = BATCH.min(TRAINING - first);
    load(
        training_image,
        first,
        &mut x[..samples * PIXELS],
        &mut y[..samples],
    );
    samples
}

/// The held-out images classified right, summed over batches of at most [`BATCH`]:
/// `correct_in_batch` gets a batch's scaled pixels and labels and says how many it got right.
pub(crate) fn held_out_correct(mut correct_in_batch: impl FnMut(&[f32], &[u32]) -> usize) -> usize {
    let (mut x, mut y) = ([0.0f32; BATCH * PIXELS], [0u32; BATCH]);
    let mut correct = 0;
    for first in (0..HELD_OUT).step_by(BATCH) {
        let samples = BATCH.min(HELD_OUT - first);
        let (x, y) = (&mut x[..samples * PIXELS], &mut y[..samples]);
        load(held_out_image, first, x, y);
        correct += correct_in_batch(x, y);
    }
    correct
}

/// The digits' training, a step at a time: the model and its step in static memory.
pub struct Training {
    model: &'static mut Mlp,
    step: Step,
    last_loss: f32,
}

impl Training {
    /// The held-out images classified right.
    pub fn correct(&mut self) -> usize {
        held_out_correct(|x, y| crate::correct_in(self.step.predict(self.model, x), CLASSES, y))
    }

    /// What the training measured so far.
    pub fn report(&mut self) -> Report {
        Report {
            steps: self.step.optimizer().iterations(),
            last_loss: self.last_loss,
            correct: self.correct(),
        }
    }
}

impl crate::Task for Training {
    type Report = Report;
    const STEPS_PER_EPOCH: usize = TRAINING.div_ceil(BATCH);
    const EPOCHS: usize = EPOCHS;
    const FLOPS_PER_STEP: usize = FLOPS_PER_STEP;
    const STEP_BYTES: usize = Step::BYTES.total();

    /// The initialized model and its step; `None` if the statics were already taken.
    fn take() -> Option<Self> {
        let (model, step) = take_step(Seed(7), SgdMomentum::default().with_lr(0.03))?;
        Some(Training {
            model,
            step,
            last_loss: f32::NAN,
        })
    }

    /// Trains on batch `k` of the training images (`0..STEPS_PER_EPOCH`).
    fn step(&mut self, k: usize) {
        let (mut x, mut y) = ([0.0f32; BATCH * PIXELS], [0u32; BATCH]);
        let samples = training_batch(k, &mut x, &mut y);
        self.last_loss = self
            .step
            .run(self.model, &x[..samples * PIXELS], &y[..samples]);
    }

    fn measure(&mut self) -> (Report, bool) {
        let report = self.report();
        (report, report.reached_target())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The split puts every image in exactly one part, the held-out ones every fifth.
    #[test]
    fn every_image_is_trained_on_or_held_out_once() {
        let mut seen = [0u8; IMAGES];
        for k in 0..TRAINING {
            seen[training_image(k)] += 1;
        }
        for k in 0..HELD_OUT {
            assert_eq!(held_out_image(k) % HOLD_OUT_EVERY, 0);
            seen[held_out_image(k)] += 1;
        }
        assert!(seen.iter().all(|&n| n == 1));
        assert_eq!((TRAINING, HELD_OUT), (1437, 360));
    }

    /// A batch is the images' pixels scaled to -1..=1 and their labels: held-out images 0 and
    /// 1 are the first and the sixth rows of `data/digits.csv` (`0,0,0,5,13,9,1,0,0,...` and a
    /// 5).
    #[test]
    fn a_loaded_image_is_its_pixels_scaled() {
        let (mut x, mut y) = ([0.0f32; 2 * PIXELS], [0u32; 2]);
        load(held_out_image, 0, &mut x, &mut y);
        assert_eq!(
            x[..8],
            [-1.0, -1.0, -0.375, 0.625, 0.125, -0.875, -1.0, -1.0]
        );
        assert_eq!(y, [0, 5]);
    }
}
