use fusegraph::prelude::*;

// The attention's width disagrees with the embedding's; the dense layer after it reads what
// the attention gives as written: one error.
#[fusegraph::model(loss = SoftmaxCrossEntropy, input = u32)]
struct Net {
    tok: Embedding<100, 16, 16>,
    attn: CausalSelfAttention<16, 30, 2>,
    fc: Dense<480, 4>,
}

fn main() {
    let _ = Net::init(Seed(0));
}
