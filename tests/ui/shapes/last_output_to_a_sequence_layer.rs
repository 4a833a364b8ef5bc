use fusegraph::prelude::*;

#[fusegraph::model(loss = SoftmaxCrossEntropy)]
struct Net {
    gru: Gru<16, 16, 32>,
    pool: MeanOverTime<16, 32>,
    fc: Dense<32, 4>,
}

fn main() {
    let _ = Net::init(Seed(0));
}
