use fusegraph::prelude::*;

// A tensor the layer does not have: one error at the name, listing the layer's tensors.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
pub struct Net {
    #[frozen(weigth)]
    fc1: Dense<4, 16, Relu>,
    fc2: Dense<16, 3>,
}

fn main() {
    let _ = Net::init(Seed(1));
}
