use fusegraph::prelude::*;

#[fusegraph::model(loss = SoftmaxCrossEntropy, input = u32)]
struct Net {
    tok: Embedding<10, 4, 8>,
    pos: PositionalEmbedding<6, 4, 8>,
    fc: Dense<32, 4>,
}

fn main() {
    let _ = Net::init(Seed(0));
}
