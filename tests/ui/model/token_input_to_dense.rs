use fusegraph::prelude::*;

#[fusegraph::model(loss = SoftmaxCrossEntropy, input = u32)]
struct Net {
    fc1: Dense<8, 16, Relu>,
    fc2: Dense<16, 4>,
}

fn main() {}
