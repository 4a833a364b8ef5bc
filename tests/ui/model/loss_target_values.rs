use fusegraph::optim::keras::Adam;
use fusegraph::prelude::*;

#[fusegraph::model(loss = Mse)]
pub struct Regressor {
    fc1: Dense<4, 2>,
}

fn main() {
    let model = Regressor::init(Seed(1));
    let mut step = TrainStep::<Regressor, Adam, 2>::new(&model, Adam::default());
    let x = [0.0f32; 8];
    let labels: Vec<u32> = vec![0, 1, 1, 0];
    step.evaluate(&model, &x, &labels);
}
