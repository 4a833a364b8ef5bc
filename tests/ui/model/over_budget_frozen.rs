use fusegraph::optim::torch::SgdMomentum;
use fusegraph::prelude::*;

// Over the budget, the message names the frozen part, which has no gradients and no slots.
#[fusegraph::model(loss = SoftmaxCrossEntropy, inline, max_bytes = 2048, batch = 4,
                   optimizer = SgdMomentum)]
pub struct Head {
    #[frozen]
    backbone: Dense<16, 32, Relu>,
    head: Dense<32, 4>,
}

fn main() {
    let _ = Head::zeroed();
}
