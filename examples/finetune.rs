//! Fine-tuning on the host: the model PyTorch trained on the digits 0 to 4
//! (`embedded/pretrain/digits_0_4.safetensors`, written by `embedded/pretrain/pretrain.py`)
//! learns all ten digits, its backbone frozen, through `Trainer`.
//!
//! ```text
//! cargo run --release --example finetune
//! ```
//!
//! 1. Load `data/digits.csv`, scale every pixel to `pixel / 8 - 1` and split it as the
//!    pretraining did: every fifth image held out, the others for training.
//! 2. Import the PyTorch file, strictly (every key, every tensor), into `Shipped`, the
//!    64-32-16-5 MLP as PyTorch defined it, and check its held-out accuracy on the digits 0 to 4
//!    (what `pretrain.py` printed).
//! 3. Import `fc1` and `fc2` of the same file into `Tuned`, whose `fc1` and `fc2` are
//!    `#[frozen]` and whose head has ten outputs (the file's `head.*` are left unused and the
//!    ten-class head unset), and start the head as shipped: the file's five-class head in its
//!    first five outputs, zero in the other five.
//! 4. Train the head with `Trainer::fit` (SGD with momentum, batch 16, shuffled), and print
//!    the held-out accuracy over the ten digits before and after.
//!
//! The run fails if the import does not give the shipped accuracy, if the frozen layers moved,
//! or if the accuracy after is below 65%.

use fusegraph::checkpoint::TorchImport;
use fusegraph::data::{Csv, Dataset};
use fusegraph::optim::torch::SgdMomentum;
use fusegraph::prelude::*;
use std::error::Error;

/// The model PyTorch trained: 64 pixels in, the digits 0 to 4 out.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
struct Shipped {
    fc1: Dense<64, 32, Relu>,
    fc2: Dense<32, 16, Relu>,
    head: Dense<16, 5>,
}

/// The same backbone, frozen, under a head for the ten digits.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
struct Tuned {
    #[frozen]
    fc1: Dense<64, 32, Relu>,
    #[frozen]
    fc2: Dense<32, 16, Relu>,
    head: Dense<16, 10>,
}

const WEIGHTS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/embedded/pretrain/digits_0_4.safetensors"
);
const BATCH: usize = 16;
const EPOCHS: usize = 20;
/// Classes the shipped model knows.
const SHIPPED_CLASSES: usize = 5;
/// Classes after the fine-tuning.
const CLASSES: usize = 10;
/// The held-out accuracy over the ten digits the fine-tuning must reach.
const TARGET_ACCURACY: f32 = 0.65;

/// The digits scaled to `pixel / 8 - 1`, split into (training, held out): every fifth image
/// held out.
fn digits() -> Result<(Dataset<u32>, Dataset<u32>), Box<dyn Error>> {
    let csv = concat!(env!("CARGO_MANIFEST_DIR"), "/data/digits.csv");
    let mut data = Csv::new()
        .label_column("label")
        .classes(CLASSES as u32)
        .read_classes(csv)?;
    for pixel in data.x_mut() {
        *pixel = *pixel / 8.0 - 1.0;
    }
    let (held_out, training): (Vec<usize>, Vec<usize>) = (0..data.len()).partition(|i| i % 5 == 0);
    Ok((data.subset(&training), data.subset(&held_out)))
}

/// The samples of `data` whose label is below `classes`.
fn below(data: &Dataset<u32>, classes: u32) -> Dataset<u32> {
    let kept: Vec<usize> = (0..data.len()).filter(|&i| data.y()[i] < classes).collect();
    data.subset(&kept)
}

/// The ten-class head as shipped, in fusegraph's layout (weight `[in, out]`, then bias): the
/// five-class `head` in the first five outputs, zero in the others.
fn widened(head: &[f32]) -> Vec<f32> {
    let (weight, bias) = head.split_at(16 * SHIPPED_CLASSES);
    let mut widened = vec![0.0; 16 * CLASSES + CLASSES];
    let (wide_weight, wide_bias) = widened.split_at_mut(16 * CLASSES);
    for (row, shipped) in wide_weight
        .chunks_mut(CLASSES)
        .zip(weight.chunks(SHIPPED_CLASSES))
    {
        row[..SHIPPED_CLASSES].copy_from_slice(shipped);
    }
    wide_bias[..SHIPPED_CLASSES].copy_from_slice(bias);
    widened
}

fn main() -> Result<(), Box<dyn Error>> {
    let (training, held_out) = digits()?;

    let mut shipped = Shipped::init(Seed(0));
    let report = TorchImport::new().load_model(WEIGHTS, &mut shipped)?;
    println!("{report}");
    let old_digits = below(&held_out, SHIPPED_CLASSES as u32);
    let mut shipped_step =
        TrainStep::<Shipped, SgdMomentum, BATCH>::new(&shipped, SgdMomentum::default());
    let shipped_accuracy = shipped_step
        .evaluate(&shipped, old_digits.x(), old_digits.y())
        .accuracy
        .unwrap_or(0.0);
    println!(
        "shipped: held-out accuracy {:.2}% on the {} images of the digits 0-4",
        100.0 * shipped_accuracy,
        old_digits.len()
    );

    let mut model = Tuned::init(Seed(7));
    let report = TorchImport::new()
        .rename_prefix("head.", "shipped_head.")
        .allow_unused()
        .allow_missing()
        .load_model(WEIGHTS, &mut model)?;
    println!("{report}");
    // The head is the last layer: the end of the parameter buffer.
    let head = widened(shipped.head().all());
    let params = model.params_mut();
    let head_at = params.len() - head.len();
    params[head_at..].copy_from_slice(&head);
    let backbone = [model.fc1().all(), model.fc2().all()].concat();

    let rule = SgdMomentum::default().with_lr(0.01);
    let step = TrainStep::<Tuned, SgdMomentum, BATCH>::new(&model, rule);
    let bytes = TrainStep::<Tuned, SgdMomentum, BATCH>::BYTES;
    println!(
        "fine-tuning the head: {} trainable parameters, {} frozen; {} bytes (frozen {}, gradients \
         {}, slots {})",
        Tuned::TRAINABLE,
        backbone.len(),
        bytes.total(),
        bytes.frozen,
        bytes.grads,
        bytes.slots
    );
    let mut trainer = Trainer::new(model, step).metrics(&[Metric::Accuracy]);
    let before = trainer.evaluate(&held_out)?.accuracy.unwrap_or(0.0);
    trainer.fit(&training, &FitOptions::new(EPOCHS).seed(Seed(1)), &mut [])?;
    let after = trainer.evaluate(&held_out)?.accuracy.unwrap_or(0.0);
    println!(
        "held-out accuracy over the ten digits ({} images): {:.2}% as shipped, {:.2}% after {} \
         epochs of the head",
        held_out.len(),
        100.0 * before,
        100.0 * after,
        EPOCHS
    );

    let tuned = trainer.model();
    let unmoved = [tuned.fc1().all(), tuned.fc2().all()].concat();
    if unmoved
        .iter()
        .map(|v| v.to_bits())
        .ne(backbone.iter().map(|v| v.to_bits()))
    {
        return Err("the frozen layers changed".into());
    }
    if shipped_accuracy < 0.99 {
        return Err("the imported model does not classify as PyTorch's did".into());
    }
    if after < TARGET_ACCURACY {
        return Err(format!("accuracy {:.2}% is below {TARGET_ACCURACY}", 100.0 * after).into());
    }
    Ok(())
}
