use fusegraph::prelude::*;

#[fusegraph::model(loss = SoftmaxCrossEntropy)]
struct Net {
    conv: Conv1d<16, 4, 8, 0>,
    pool: MeanOverTime<16, 8>,
    fc: Dense<8, 4>,
}

fn main() {
    let _ = Net::init(Seed(0));
}
