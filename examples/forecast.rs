//! A GRU forecaster of the yearly sunspot numbers, against the naive last-value forecast.
//!
//! ```text
//! cargo run --release --example forecast
//! ```
//!
//! The series is `data/sunspots.csv` (1700-2008, NOAA, see `data/README.md`), divided by the
//! largest value of the training years. A sample is the 24 years before a year, `[24, 1]`, and
//! its target that year's number. The years up to 1948 train, the 60 after are the test set,
//! in time order (no sample of the test years is seen in training). The model is a GRU of 24
//! hidden units over the window (its last hidden state) and a dense layer to one value, trained
//! with Adam on the mean squared error.
//!
//! It prints the test error of the GRU and of the naive forecast (next year = this year) in
//! sunspots, and fails unless the GRU beats it.

use fusegraph::layers::Gru;
use fusegraph::optim::keras::Adam;
use fusegraph::prelude::*;
use std::error::Error;

/// Years the model reads.
const WINDOW: usize = 24;
/// Years at the end of the series held out for the test.
const TEST_YEARS: usize = 60;

/// Window of yearly numbers -> GRU -> next year's number.
#[fusegraph::model(loss = Mse)]
struct Forecaster {
    gru: Gru<WINDOW, 1, 24>,
    out: Dense<24, 1>,
}

/// The yearly numbers of the shipped CSV (`YEAR,SUNACTIVITY`), in year order.
fn sunspots() -> Result<Vec<f32>, Box<dyn Error>> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/sunspots.csv");
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let mut values = Vec::new();
    for (n, line) in text.lines().enumerate().skip(1) {
        let value = line.split(',').nth(1).and_then(|v| v.trim().parse().ok());
        values.push(value.ok_or_else(|| format!("{path}:{}: not `year,number`", n + 1))?);
    }
    Ok(values)
}

/// Every window of `series` whose target lies in `targets`, as a data set.
fn windows(
    series: &[f32],
    targets: std::ops::Range<usize>,
) -> Result<Dataset<f32>, Box<dyn Error>> {
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for t in targets {
        x.extend_from_slice(&series[t - WINDOW..t]);
        y.push(series[t]);
    }
    Ok(Dataset::new(x, y, WINDOW)?)
}

fn main() -> Result<(), Box<dyn Error>> {
    let raw = sunspots()?;
    let split = raw.len() - TEST_YEARS;
    let scale = raw[..split].iter().cloned().fold(0.0f32, f32::max);
    let series: Vec<f32> = raw.iter().map(|v| v / scale).collect();
    let train = windows(&series, WINDOW..split)?;
    let test = windows(&series, split..series.len())?;

    let model = Forecaster::init(Seed(2));
    let step = TrainStep::<Forecaster, Adam, 16>::new(&model, Adam::default().with_lr(5e-3));
    let mut trainer = Trainer::new(model, step).verbose(Verbose::Silent);
    let history = trainer.fit(&train, &FitOptions::new(150).seed(Seed(1)), &mut [])?;
    let gru = trainer.evaluate(&test)?.loss;
    let naive = (split..series.len())
        .map(|t| (series[t] - series[t - 1]).powi(2))
        .sum::<f32>()
        / TEST_YEARS as f32;
    let rmse = |mse: f32| mse.sqrt() * scale;
    println!(
        "sunspots {}-{}: GRU trained {} epochs (training loss {:.4} -> {:.4}); test RMSE over the \
         last {TEST_YEARS} years: GRU {:.1}, naive last-value {:.1} sunspots",
        1700,
        1700 + raw.len() - 1,
        history.epochs.len(),
        history.epochs[0].train.loss,
        history.last().map_or(f32::NAN, |e| e.train.loss),
        rmse(gru),
        rmse(naive)
    );
    if gru >= naive {
        return Err("the GRU did not beat the naive last-value forecast".into());
    }
    Ok(())
}
