//! Fine-tuning on a microcontroller: a model trained in PyTorch learns new classes on the
//! device, its backbone frozen in flash.
//!
//! `pretrain/pretrain.py` trained a 64-32(ReLU)-16(ReLU)-5 MLP in PyTorch on the digits 0 to 4
//! of the training split of [`digits`] and saved it as
//! `pretrain/digits_0_4.safetensors`. Here its `fc1` and `fc2` are read from that file when the
//! crate compiles into `static`s (flash: no RAM, no gradient, no optimizer slot), and a ten-class
//! head learns all ten digits on the same training images with SGD and momentum, from static
//! memory: only the head's 170 parameters, their gradients and slots, and the activations of a
//! batch take RAM.
//!
//! The head starts as shipped: its first five rows are the file's five-class head, the other
//! five rows (the new digits 5 to 9) are zero, weights and biases, so that a new digit scores 0
//! and wins only where every old score is below 0. The accuracy "before" is that model's on
//! the held-out images of all ten digits; "after" is after [`EPOCHS`] passes over the training
//! images in the file's order.

use crate::digits::{self, BATCH, CLASSES, HELD_OUT, PIXELS};
use fusegraph::optim::torch::SgdMomentum;
use fusegraph::optim::{Fused, Plain};
use fusegraph::prelude::*;
use fusegraph::train::{EmbeddedStep, Static};

/// Classes the shipped model knows (the digits 0 to 4).
pub const SHIPPED_CLASSES: usize = 5;
/// Passes over the training images.
pub const EPOCHS: usize = 6;
/// The learning rate of the head.
const LEARNING_RATE: f32 = 0.01;
/// The held-out accuracy over the ten digits the fine-tuning must reach, in percent.
pub const TARGET_ACCURACY_PERCENT: usize = 65;

/// The pretrained model with a ten-class head: `fc1` and `fc2` frozen in flash, read from the
/// PyTorch file, the head trained, in at most 32 KB with its train step.
#[fusegraph::model(
    loss = SoftmaxCrossEntropy,
    inline,
    max_bytes = 32768,
    batch = 16,
    optimizer = SgdMomentum,
    fused
)]
pub struct Tuned {
    #[frozen(torch = "pretrain/digits_0_4.safetensors")]
    fc1: Dense<64, 32, Relu>,
    #[frozen(torch = "pretrain/digits_0_4.safetensors")]
    fc2: Dense<32, 16, Relu>,
    head: Dense<16, 10>,
}

/// The shipped model's five-class head, read from the same file into a `static`: where the
/// ten-class head starts.
#[fusegraph::model(loss = SoftmaxCrossEntropy, inline)]
pub struct ShippedHead {
    #[frozen(torch = "pretrain/digits_0_4.safetensors")]
    head: Dense<16, 5>,
}

static_training!(Tuned, SgdMomentum, BATCH);

/// Floating-point operations of one train step: forward through the three layers, backward
/// through the head alone.
pub const FLOPS_PER_STEP: usize =
    crate::tuned_mlp_flops_per_step(&[PIXELS, 32, 16, CLASSES], 2, BATCH);

/// The ten-class head as shipped, in fusegraph's layout (weight `[in, out]`, then bias): the
/// file's five-class head in the first five outputs, zero in the others.
pub fn shipped_head() -> [f32; Tuned::PARAMS] {
    let shipped = ShippedHead::zeroed();
    let (weight, bias) = (shipped.head().weight(), shipped.head().bias());
    let mut head = [0.0; Tuned::PARAMS];
    let (head_weight, head_bias) = head.split_at_mut(16 * CLASSES);
    for (row, shipped_row) in head_weight
        .chunks_mut(CLASSES)
        .zip(weight.chunks(SHIPPED_CLASSES))
    {
        row[..SHIPPED_CLASSES].copy_from_slice(shipped_row);
    }
    head_bias[..SHIPPED_CLASSES].copy_from_slice(bias);
    head
}

/// What the fine-tuning measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Report {
    /// Optimizer steps taken.
    pub steps: u64,
    /// The loss of the last batch trained on (before its update).
    pub last_loss: f32,
    /// Held-out images (all ten digits) the shipped model classified right.
    pub correct_before: usize,
    /// Held-out images classified right after the fine-tuning.
    pub correct: usize,
}

impl Report {
    /// Whether the held-out accuracy after the fine-tuning reached [`TARGET_ACCURACY_PERCENT`].
    pub fn reached_target(&self) -> bool {
        self.correct * 100 >= TARGET_ACCURACY_PERCENT * HELD_OUT
    }
}

/// The line the host build and the firmware both print: the loss as bits, compared exactly.
impl core::fmt::Display for Report {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "steps {} last_loss_bits {:#010x} held_out_correct_before {} after {} of {}",
            self.steps,
            self.last_loss.to_bits(),
            self.correct_before,
            self.correct,
            HELD_OUT
        )
    }
}

/// The fine-tuning, a step at a time: the model and its step in static memory.
pub struct Tuning {
    model: &'static mut Tuned,
    step: Step,
    last_loss: f32,
    correct_before: usize,
}

impl Tuning {
    /// The held-out images (all ten digits) classified right.
    pub fn correct(&mut self) -> usize {
        digits::held_out_correct(|x, y| {
            crate::correct_in(self.step.predict(self.model, x), CLASSES, y)
        })
    }

    /// The model as it is now.
    pub fn model(&self) -> &Tuned {
        self.model
    }

    /// What the fine-tuning measured so far.
    pub fn report(&mut self) -> Report {
        Report {
            steps: self.step.optimizer().iterations(),
            last_loss: self.last_loss,
            correct_before: self.correct_before,
            correct: self.correct(),
        }
    }
}

impl crate::Task for Tuning {
    type Report = Report;
    const STEPS_PER_EPOCH: usize = digits::TRAINING.div_ceil(BATCH);
    const EPOCHS: usize = EPOCHS;
    const FLOPS_PER_STEP: usize = FLOPS_PER_STEP;
    const STEP_BYTES: usize = Step::BYTES.total();

    /// The shipped model with its ten-class head ([`shipped_head`]) and its step, its held-out
    /// accuracy measured; `None` if the statics were already taken.
    fn take() -> Option<Self> {
        let (model, step) = take_step(Seed(7), SgdMomentum::default().with_lr(LEARNING_RATE))?;
        model.params_mut().copy_from_slice(&shipped_head());
        let mut tuning = Tuning {
            model,
            step,
            last_loss: f32::NAN,
            correct_before: 0,
        };
        tuning.correct_before = tuning.correct();
        Some(tuning)
    }

    /// Trains the head on batch `k` of the training images (`0..STEPS_PER_EPOCH`).
    fn step(&mut self, k: usize) {
        let (mut x, mut y) = ([0.0f32; BATCH * PIXELS], [0u32; BATCH]);
        let samples = digits::training_batch(k, &mut x, &mut y);
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
    extern crate std;

    use super::*;
    use safetensors::SafeTensors;
    use std::vec::Vec;

    /// The PyTorch file, read as the tests' reference.
    const FILE: &[u8] = include_bytes!("../pretrain/digits_0_4.safetensors");

    /// Tensor `key` of the file as `f32`s, in PyTorch's layout, and its shape.
    fn torch(key: &str) -> (Vec<f32>, Vec<usize>) {
        let file = SafeTensors::deserialize(FILE).expect("a safetensors file");
        let tensor = file.tensor(key).expect("the key is in the file");
        let values = tensor
            .data()
            .chunks(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        (values, tensor.shape().to_vec())
    }

    /// A Linear layer's weight `[out, in]` of the file against fusegraph's `[in, out]`, and
    /// its bias.
    fn assert_is_transposed(key: &str, weight: &[f32], bias: &[f32]) {
        let (torch_weight, shape) = torch(&std::format!("{key}.weight"));
        let (outputs, inputs) = (shape[0], shape[1]);
        assert_eq!(weight.len(), inputs * outputs, "{key}.weight");
        for o in 0..outputs {
            for i in 0..inputs {
                assert_eq!(
                    weight[i * outputs + o].to_bits(),
                    torch_weight[o * inputs + i].to_bits(),
                    "{key}.weight[{o}][{i}]"
                );
            }
        }
        assert_eq!(bias, torch(&std::format!("{key}.bias")).0, "{key}.bias");
    }

    #[test]
    fn the_frozen_layers_and_the_shipped_head_are_the_files_tensors_transposed() {
        let model = Tuned::zeroed();
        assert_is_transposed("fc1", model.fc1().weight(), model.fc1().bias());
        assert_is_transposed("fc2", model.fc2().weight(), model.fc2().bias());
        let head = shipped_head();
        let (weight, bias) = head.split_at(16 * CLASSES);
        let shipped_weight: Vec<f32> = weight
            .chunks(CLASSES)
            .flat_map(|row| row[..SHIPPED_CLASSES].iter().copied())
            .collect();
        assert_is_transposed("head", &shipped_weight, &bias[..SHIPPED_CLASSES]);
        // The new digits start at zero.
        assert!(weight
            .chunks(CLASSES)
            .all(|row| row[SHIPPED_CLASSES..].iter().all(|&w| w == 0.0)));
        assert!(bias[SHIPPED_CLASSES..].iter().all(|&b| b == 0.0));
        // Only the head is in the parameter buffer, and the budget has no frozen bytes in RAM.
        assert_eq!(Tuned::PARAMS, 16 * CLASSES + CLASSES);
        assert_eq!(Step::BYTES.frozen, 0);
    }

    /// The head after the first step, computed in `f64` from the file: forward through the
    /// PyTorch layers by hand, the softmax cross-entropy's gradient averaged over the batch, and
    /// SGD with momentum's first update (`p -= lr g`).
    fn head_after_one_step_by_hand(x: &[f32], y: &[u32]) -> Vec<f64> {
        let layer = |key: &str, input: &[f64], relu: bool| -> Vec<f64> {
            let (weight, shape) = torch(&std::format!("{key}.weight"));
            let bias = torch(&std::format!("{key}.bias")).0;
            (0..shape[0])
                .map(|o| {
                    let sum: f64 = (0..shape[1])
                        .map(|i| f64::from(weight[o * shape[1] + i]) * input[i])
                        .sum::<f64>()
                        + f64::from(bias[o]);
                    if relu {
                        sum.max(0.0)
                    } else {
                        sum
                    }
                })
                .collect()
        };
        let head: Vec<f64> = shipped_head().iter().map(|&p| f64::from(p)).collect();
        let mut grad = std::vec![0.0f64; head.len()];
        for (pixels, &label) in x.chunks(PIXELS).zip(y) {
            let input: Vec<f64> = pixels.iter().map(|&p| f64::from(p)).collect();
            let features = layer("fc2", &layer("fc1", &input, true), true);
            let logits: Vec<f64> = (0..CLASSES)
                .map(|o| {
                    (0..16)
                        .map(|i| head[i * CLASSES + o] * features[i])
                        .sum::<f64>()
                        + head[16 * CLASSES + o]
                })
                .collect();
            let top = logits.iter().copied().fold(f64::MIN, f64::max);
            let total: f64 = logits.iter().map(|l| (l - top).exp()).sum();
            for o in 0..CLASSES {
                let dlogit = ((logits[o] - top).exp() / total
                    - f64::from(u8::from(o as u32 == label)))
                    / y.len() as f64;
                for i in 0..16 {
                    grad[i * CLASSES + o] += dlogit * features[i];
                }
                grad[16 * CLASSES + o] += dlogit;
            }
        }
        let lr = f64::from(LEARNING_RATE);
        head.iter().zip(&grad).map(|(p, g)| p - lr * g).collect()
    }

    #[test]
    fn a_step_updates_the_head_by_the_files_features_and_nothing_else() {
        let mut model = Tuned::zeroed();
        model.params_mut().copy_from_slice(&shipped_head());
        let (fc1, fc2) = (model.fc1().all().as_ptr(), model.fc2().all().as_ptr());
        let mut arena = std::vec![0.0f32; Step::FLOATS];
        let rule = SgdMomentum::default().with_lr(LEARNING_RATE);
        let mut step =
            EmbeddedStep::<Tuned, SgdMomentum, BATCH, Fused<Plain>>::new(&model, rule, &mut arena)
                .expect("the arena fits");
        let (mut x, mut y) = ([0.0f32; BATCH * PIXELS], [0u32; BATCH]);
        let samples = digits::training_batch(0, &mut x, &mut y);
        step.run(&mut model, &x[..samples * PIXELS], &y[..samples]);
        let expected = head_after_one_step_by_hand(&x[..samples * PIXELS], &y[..samples]);
        for (k, (&got, &want)) in model.params().iter().zip(&expected).enumerate() {
            assert!(
                (f64::from(got) - want).abs() <= 1e-5 * (1.0 + want.abs()),
                "head parameter {k}: {got} against {want}"
            );
        }
        assert!(
            model
                .params()
                .iter()
                .zip(&shipped_head())
                .any(|(a, b)| a != b),
            "the head moved"
        );
        // The backbone is still read from the flash statics, unchanged.
        assert_eq!(
            (model.fc1().all().as_ptr(), model.fc2().all().as_ptr()),
            (fc1, fc2)
        );
        assert_is_transposed("fc1", model.fc1().weight(), model.fc1().bias());
    }
}
