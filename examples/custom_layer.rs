//! A custom activation and a custom loss, each written once as a formula: the macros derive
//! their derivatives at compile time and emit forward and backward as fused `f32x8` passes.
//!
//! ```text
//! cargo run --release --example custom_layer
//! ```
//!
//! The data: `y = sin(3x) + x/2` on `[-2, 2]` with 10% of the targets replaced by outliers.
//! A 1-32(Mish)-32(Mish)-1 MLP is fitted twice, with the squared error and with log-cosh,
//! which grows like `|d|` for large errors and so follows the outliers less. The example
//! prints each model's mean absolute error on clean test points.

use fusegraph::optim::keras::Adam;
use fusegraph::prelude::*;

fusegraph::activation! {
    /// Mish, `x * tanh(softplus(x))` (Misra, 2019): smooth, non-monotonic near 0.
    pub Mish(x) = x * tanh(softplus(x));
}

fusegraph::loss! {
    /// log(cosh(d)) for d = pred - target, written so that it does not overflow for large d:
    /// |d| + softplus(-2|d|) - ln 2.
    pub LogCosh(pred, target) = {
        let d = abs(pred - target);
        d + softplus(-2.0 * d) - 0.6931472
    };
}

/// The same network with the squared error.
#[fusegraph::model(loss = Mse)]
struct SquaredNet {
    fc1: Dense<1, 32, Mish>,
    fc2: Dense<32, 32, Mish>,
    out: Dense<32, 1>,
}

/// The same network with log-cosh.
#[fusegraph::model(loss = LogCosh)]
struct RobustNet {
    fc1: Dense<1, 32, Mish>,
    fc2: Dense<32, 32, Mish>,
    out: Dense<32, 1>,
}

const BATCH: usize = 32;
const EPOCHS: usize = 150;

fn target(x: f32) -> f32 {
    (3.0 * x).sin() + 0.5 * x
}

/// `n` points on `[-2, 2]`; with `outliers`, every tenth target is moved by +8.
fn data(n: usize, seed: u64, outliers: bool) -> Dataset<f32> {
    let mut rng = Rng::new(Seed(seed));
    let mut x = Vec::with_capacity(n);
    let mut y = Vec::with_capacity(n);
    for i in 0..n {
        let v = rng.uniform(-2.0, 2.0);
        x.push(v);
        let shift = if outliers && i % 10 == 0 { 8.0 } else { 0.0 };
        y.push(target(v) + shift);
    }
    Dataset::new(x, y, 1).expect("one feature and one target per sample")
}

/// Fits `model` on `train` and returns its mean absolute error on `test`.
fn fit<M>(
    model: M,
    train: &Dataset<f32>,
    test: &Dataset<f32>,
) -> Result<f32, Box<dyn std::error::Error>>
where
    M: Model<Input = f32> + Send,
    M::Loss: fusegraph::loss::Loss<Target = f32>,
{
    let step = TrainStep::<M, Adam, BATCH>::new(&model, Adam::default().with_lr(3e-3));
    let mut trainer = Trainer::new(model, step)
        .metrics(&[Metric::Mae])
        .verbose(Verbose::Silent);
    let history = trainer.fit(train, &FitOptions::new(EPOCHS).seed(Seed(1)), &mut [])?;
    let first = history.epochs[0].train.loss;
    let last = history.last().map_or(f32::NAN, |e| e.train.loss);
    println!(
        "  {}: training loss {first:.4} -> {last:.4} in {} epochs",
        std::any::type_name::<M::Loss>()
            .rsplit("::")
            .next()
            .unwrap_or("loss"),
        history.epochs.len()
    );
    Ok(trainer.evaluate(test)?.mae.unwrap_or(f32::NAN))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!(
        "activation `{}`: backward reads z: {}; loss `LogCosh`: value and gradient in one pass",
        <Mish as Activation>::NAME,
        <Mish as Activation>::NEEDS_Z
    );
    let train = data(1000, 7, true);
    let test = data(400, 8, false);
    println!("fitting y = sin(3x) + x/2 with 10% outliers (+8), 1-32-32-1 Mish MLP, Adam:");
    let squared = fit(SquaredNet::init(Seed(3)), &train, &test)?;
    let robust = fit(RobustNet::init(Seed(3)), &train, &test)?;
    println!("mean absolute error on clean test points: squared error {squared:.4}, log-cosh {robust:.4}");
    if robust >= squared {
        return Err(format!(
            "log-cosh ({robust}) did not beat the squared error ({squared}) under outliers"
        )
        .into());
    }
    Ok(())
}
