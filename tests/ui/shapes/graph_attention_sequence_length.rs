use fusegraph::prelude::*;

#[fusegraph::model(loss = SequenceCrossEntropy<100>, input = u32, graph(
    e = pos(tok(x)),
    a = attn(e) + e,
    logits = head(a)
))]
struct Lm {
    tok: Embedding<100, 8, 16>,
    pos: PositionalEmbedding<16, 8, 16>,
    attn: CausalSelfAttention<12, 8, 2>,
    head: PerPosition<Dense<8, 100>, 16>,
}

fn main() {
    let _ = Lm::init(Seed(0));
}
