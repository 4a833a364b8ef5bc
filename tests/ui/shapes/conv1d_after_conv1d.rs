use fusegraph::prelude::*;

// The second convolution reads what the first gives with its written length; the pooling
// after it is written for the fixed one: one error.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
struct Net {
    conv1: Conv1d<16, 4, 8, 5>,
    conv2: Conv1d<16, 8, 8, 3>,
    pool: MeanOverTime<10, 8>,
    fc: Dense<8, 4>,
}

fn main() {
    let _ = Net::init(Seed(0));
}
