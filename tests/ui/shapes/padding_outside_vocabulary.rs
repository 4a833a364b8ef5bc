use fusegraph::prelude::*;

#[fusegraph::model(loss = SoftmaxCrossEntropy, input = u32)]
struct Net {
    tok: Embedding<10, 4, 8, 12>,
    fc: Dense<32, 4>,
}

fn main() {
    let _ = Net::init(Seed(0));
}
