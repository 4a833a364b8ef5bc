use fusegraph::prelude::*;

#[fusegraph::model(loss = SoftmaxCrossEntropy)]
pub struct Net {
    conv: Conv1d<4, 2, 3, 5>,
    pool: MeanOverTime<1, 3>,
}

fn main() {
    let _ = Net::init(Seed(0));
}
