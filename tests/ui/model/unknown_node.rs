use fusegraph::prelude::*;

#[fusegraph::model(loss = SoftmaxCrossEntropy, graph(h = fc1(x).relu(), r = fc2(z) + h, y = head(r)))]
pub struct ResMlp {
    fc1: Dense<64, 64>,
    fc2: Dense<64, 64>,
    head: Dense<64, 10>,
}

fn main() {}
