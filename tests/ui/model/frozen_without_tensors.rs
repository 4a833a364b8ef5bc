use fusegraph::prelude::*;

// A layer without tensors has nothing to freeze.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
pub struct Net {
    fc1: Dense<4, 16, Relu>,
    #[frozen]
    drop: Dropout<16, 100>,
    fc2: Dense<16, 3>,
}

fn main() {
    let _ = Net::init(Seed(1));
}
