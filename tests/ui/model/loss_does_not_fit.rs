use fusegraph::prelude::*;

#[fusegraph::model(loss = SoftmaxCrossEntropy)]
pub struct Regressor {
    fc1: Dense<8, 16, Tanh>,
    fc2: Dense<16, 1>,
}

fn main() {}
