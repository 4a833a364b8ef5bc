use fusegraph::prelude::*;

/// 784-128-10 with Adam needs far more than 64 KiB.
#[fusegraph::model(loss = SoftmaxCrossEntropy, max_bytes = 65536, batch = 8, optimizer = fusegraph::optim::keras::Adam)]
pub struct Digits {
    fc1: Dense<784, 128, Relu>,
    fc2: Dense<128, 10>,
}

fn main() {
    let _ = Digits::init(Seed(3));
}
