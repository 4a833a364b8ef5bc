use fusegraph::prelude::*;

const STEPS: usize = 12;

// Sizes that are not literals are checked when the constants are evaluated, at the field.
#[fusegraph::model(loss = SoftmaxCrossEntropy, input = u32)]
struct Net {
    tok: Embedding<100, 16, 16>,
    gru: Gru<STEPS, 16, 32>,
    fc: Dense<32, 4>,
}

fn main() {
    let _ = Net::init(Seed(0));
}
