//! Input gradients that always see the current weights.
//!
//! ```text
//! cargo run --release --example input_gradient
//! ```
//!
//! In TF1, an input gradient taken through a second session kept showing the weights that
//! session started with. Here the model is the one owner of its weights and every method of
//! `TrainStep` takes it by reference, so `loss_input_gradient` after training is the
//! gradient of the trained model: the example checks it against finite differences of the
//! loss, and prints which pixels of a digit the trained classifier is most sensitive to.

use fusegraph::data::{Csv, MinMax};
use fusegraph::optim::keras::Adam;
use fusegraph::prelude::*;

/// 8x8 images in, ten class logits out.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
struct Digits {
    hidden: Dense<64, 64, Tanh>,
    out: Dense<64, 10>,
}

/// The loss of one image, from the model's current weights.
fn loss(step: &mut TrainStep<Digits, Adam, 32>, model: &Digits, x: &[f32], y: u32) -> f32 {
    step.evaluate(model, x, &[y]).loss
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut data = Csv::new()
        .label_column("label")
        .classes(10)
        .read_classes(concat!(env!("CARGO_MANIFEST_DIR"), "/data/digits.csv"))?;
    MinMax::fit(&data).apply(&mut data);
    let (image, label) = (data.sample(0).0.to_vec(), data.sample(0).1[0]);

    let mut model = Digits::init(Seed(1));
    let mut step = TrainStep::<Digits, Adam, 32>::new(&model, Adam::default().with_lr(3e-3));
    let before = step.loss_input_gradient(&model, &image, &[label]).to_vec();

    let mut order: Vec<usize> = (0..data.len()).collect();
    let (mut bx, mut by) = (Vec::new(), Vec::new());
    for epoch in 0..10u64 {
        Rng::with_stream(Seed(2), epoch).shuffle(&mut order);
        for idx in order.chunks(32) {
            data.gather_into(idx, &mut bx, &mut by);
            step.run(&mut model, &bx, &by);
        }
    }
    let after = step.loss_input_gradient(&model, &image, &[label]).to_vec();

    // Central differences of the loss of the trained model, pixel by pixel.
    let h = 1e-2;
    let mut worst = 0.0f32;
    for i in 0..64 {
        let mut up = image.clone();
        let mut down = image.clone();
        up[i] += h;
        down[i] -= h;
        let numeric = (loss(&mut step, &model, &up, label) - loss(&mut step, &model, &down, label))
            / (2.0 * h);
        worst = worst.max((numeric - after[i]).abs() / after[i].abs().max(1e-2));
    }
    let changed = before.iter().zip(&after).filter(|(a, b)| a != b).count();
    println!(
        "digit {label}: the input gradient changed in {changed}/64 pixels with training; \
         worst relative difference to finite differences of the trained model: {worst:.1e}"
    );
    println!("pixels the trained loss is most sensitive to (# strong, + weaker, . little):");
    let peak = after.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    for row in after.chunks(8) {
        let line: String = row
            .iter()
            .map(|v| match v.abs() / peak {
                s if s > 0.5 => '#',
                s if s > 0.15 => '+',
                _ => '.',
            })
            .collect();
        println!("  {line}");
    }
    if changed == 0 || worst > 0.05 {
        return Err("the input gradient does not follow the trained weights".into());
    }
    Ok(())
}
