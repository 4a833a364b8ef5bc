use fusegraph::prelude::*;

#[fusegraph::model(loss = SoftmaxCrossEntropy)]
pub struct Mlp {
    fc1: Dense<784, 128, Relu>,
    fc2: Dense<100, 10>,
}

fn main() {
    let _ = Mlp::init(Seed(1));
}
