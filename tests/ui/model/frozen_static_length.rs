use fusegraph::prelude::*;

static FC1: [f32; 12] = [0.0; 12];

// A static that does not hold the layer's parameters (4 * 3 weights and 3 biases).
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
pub struct Net {
    #[frozen(static = FC1)]
    fc1: Dense<4, 3>,
    head: Dense<3, 2>,
}

fn main() {
    let _ = Net::init(Seed(1));
}
