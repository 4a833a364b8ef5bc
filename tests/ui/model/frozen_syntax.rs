use fusegraph::prelude::*;

// Each malformed `#[frozen]` is one error saying what to write.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
pub struct Net {
    #[frozen = true]
    fc1: Dense<4, 16, Relu>,
    #[frozen(weight, weight)]
    fc2: Dense<16, 8, Relu>,
    #[frozen]
    #[frozen(bias)]
    fc3: Dense<8, 3>,
}

fn main() {
    let _ = Net::init(Seed(1));
}
