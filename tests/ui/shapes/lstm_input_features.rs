use fusegraph::prelude::*;

#[fusegraph::model(loss = SoftmaxCrossEntropy, input = u32)]
struct Net {
    tok: Embedding<100, 16, 16>,
    lstm: Lstm<16, 8, 32, 2>,
    fc: Dense<32, 4>,
}

fn main() {
    let _ = Net::init(Seed(0));
}
