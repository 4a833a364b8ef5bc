use fusegraph::prelude::*;

#[fusegraph::model(loss = SoftmaxCrossEntropy, graph(h = fc1(x).relu(), y = head(r), r = fc2(h) + h))]
pub struct ResMlp {
    fc1: Dense<64, 64>,
    fc2: Dense<64, 64>,
    head: Dense<64, 10>,
}

fn main() {}
