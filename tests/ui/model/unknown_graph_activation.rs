use fusegraph::prelude::*;

#[fusegraph::model(loss = SoftmaxCrossEntropy, graph(h = fc1(x).mish(), y = head(h)))]
pub struct Mlp {
    fc1: Dense<64, 32>,
    head: Dense<32, 10>,
}

fn main() {}
