//! A GRU forecaster of the yearly sunspot numbers, against the naive last-value forecast.
//!
//! ```text
//! cargo run --release --example forecast
//! ```
//!
//! The series is `data/sunspots.csv` (1700-2008, NOAA, see `data/README.md`), cut in time
//! before its last 84 years: the earlier years train, the last 84 give the test windows, so
//! that no test window reads or predicts a year a training window reads or predicts (the
//! windows across the cut are left out). The series is divided by the largest value of the
//! training years. A sample is a window of 24 years, `[24, 1]`, and its target the next year's
//! number ([`Windows`](fusegraph::data::Windows)): the 60 windows of the test years predict the
//! last 60 years. The model is a GRU of 24 hidden units over the window (its last hidden state)
//! and a dense layer to one value, trained with Adam on the mean squared error.
//!
//! It prints the test error of the GRU and of the naive forecast (next year = this year) in
//! sunspots, and fails unless the GRU beats it.

use fusegraph::data::{Csv, Series, Windows};
use fusegraph::layers::Gru;
use fusegraph::optim::keras::Adam;
use fusegraph::prelude::*;
use std::error::Error;

/// Years the model reads.
const WINDOW: usize = 24;
/// Years predicted by the test windows, at the end of the series.
const TEST_YEARS: usize = 60;

/// Window of yearly numbers -> GRU -> next year's number.
#[fusegraph::model(loss = Mse)]
struct Forecaster {
    gru: Gru<WINDOW, 1, 24>,
    out: Dense<24, 1>,
}

/// The yearly numbers of the shipped CSV (`YEAR,SUNACTIVITY`), in year order.
fn sunspots() -> Result<Series, Box<dyn Error>> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/sunspots.csv");
    let years = Csv::new().label_column("YEAR").read_values(path)?;
    Ok(Series::new(years.x().to_vec(), 1)?)
}

/// The mean squared error of the naive forecast of `data`: each window's last value.
fn naive_mse(data: &Dataset<f32>) -> f32 {
    let errors = (0..data.len()).map(|i| {
        let (x, y) = data.sample(i);
        (y[0] - x[x.len() - 1]).powi(2)
    });
    errors.sum::<f32>() / data.len() as f32
}

fn main() -> Result<(), Box<dyn Error>> {
    let raw = sunspots()?;
    let windows = Windows::new(WINDOW, 1);
    let (mut train, mut test) = raw.split_at(raw.steps() - (TEST_YEARS + WINDOW));
    let scale = train.values().iter().cloned().fold(0.0f32, f32::max);
    for v in train.values_mut().iter_mut().chain(test.values_mut()) {
        *v /= scale;
    }
    let (train, test) = (windows.dataset(&train)?, windows.dataset(&test)?);
    assert_eq!(test.len(), TEST_YEARS);

    let model = Forecaster::init(Seed(2));
    let step = TrainStep::<Forecaster, Adam, 16>::new(&model, Adam::default().with_lr(5e-3));
    let mut trainer = Trainer::new(model, step).verbose(Verbose::Silent);
    let history = trainer.fit(&train, &FitOptions::new(150).seed(Seed(1)), &mut [])?;
    let gru = trainer.evaluate(&test)?.loss;
    let naive = naive_mse(&test);
    let rmse = |mse: f32| mse.sqrt() * scale;
    println!(
        "sunspots {}-{}: GRU trained {} epochs (training loss {:.4} -> {:.4}); test RMSE over the \
         last {TEST_YEARS} years: GRU {:.1}, naive last-value {:.1} sunspots",
        1700,
        1700 + raw.steps() - 1,
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
