use fusegraph::prelude::*;

#[fusegraph::model(loss = SoftmaxCrossEntropy, graph(h = fc1(x).relu(), side = fc2(h), y = head(h)))]
pub struct Branchy {
    fc1: Dense<64, 64>,
    fc2: Dense<64, 64>,
    head: Dense<64, 10>,
}

fn main() {}
