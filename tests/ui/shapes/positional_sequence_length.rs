use fusegraph::prelude::*;

// The table grows with the sequence in the type to write.
#[fusegraph::model(loss = SoftmaxCrossEntropy, input = u32)]
struct Net {
    tok: Embedding<100, 4, 8>,
    pos: PositionalEmbedding<6, 4, 6>,
    fc: Dense<24, 4>,
}

fn main() {
    let _ = Net::init(Seed(0));
}
