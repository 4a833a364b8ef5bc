//! A residual MLP written in the graph form of `#[fusegraph::model]`, trained on the shipped
//! digits data.
//!
//! ```text
//! cargo run --release --example residual
//! ```
//!
//! The graph names every node: `h` is the first layer's output, `r1` and `r2` add a block's
//! output to its input (the residual connections), `y` the logits. Shapes are checked when the
//! crate compiles: a block whose width differs from its input's is a compile error on the `+`.

use fusegraph::data::{Csv, MinMax};
use fusegraph::optim::keras::Adam;
use fusegraph::prelude::*;

/// 64 pixels -> 64 -> two residual blocks -> 10 logits.
#[fusegraph::model(loss = SoftmaxCrossEntropy, graph(
    h = stem(x).relu(),
    r1 = block1(h).relu() + h,
    r2 = block2(r1).tanh() + r1,
    y = head(r2)
))]
struct ResMlp {
    stem: Dense<64, 64>,
    block1: Dense<64, 64>,
    block2: Dense<64, 64>,
    head: Dense<64, 10>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let data = Csv::new()
        .label_column("label")
        .classes(10)
        .read_classes(concat!(env!("CARGO_MANIFEST_DIR"), "/data/digits.csv"))?;
    let (mut train, mut test) = data.split(0.2, Seed(5));
    let scaler = MinMax::fit(&train);
    scaler.apply(&mut train);
    scaler.apply(&mut test);

    let model = ResMlp::init(Seed(3));
    let step = TrainStep::<ResMlp, Adam, 32>::new(&model, Adam::default().with_lr(1e-3));
    let mut trainer = Trainer::new(model, step)
        .metrics(&[Metric::Accuracy])
        .verbose(Verbose::Silent);
    let history = trainer.fit(&train, &FitOptions::new(25).seed(Seed(1)), &mut [])?;
    let test_metrics = trainer.evaluate(&test)?;
    println!(
        "residual MLP, {} parameters: training loss {:.4} -> {:.4} in {} epochs; test accuracy {:.2}%",
        trainer.model().params().len(),
        history.epochs[0].train.loss,
        history.last().map_or(f32::NAN, |e| e.train.loss),
        history.epochs.len(),
        100.0 * test_metrics.accuracy.unwrap_or(0.0)
    );
    if test_metrics.accuracy.unwrap_or(0.0) < 0.95 {
        return Err("the residual MLP did not reach 95% test accuracy".into());
    }
    Ok(())
}
