use fusegraph::prelude::*;

#[fusegraph::model(loss = SoftmaxCrossEntropy, input = u32)]
struct Net {
    tok: Embedding<100, 30, 16>,
    attn: CausalSelfAttention<16, 30, 4>,
    fc: Dense<480, 4>,
}

fn main() {
    let _ = Net::init(Seed(0));
}
