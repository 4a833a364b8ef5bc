use fusegraph::prelude::*;

#[fusegraph::model(loss = SequenceCrossEntropy<100>, input = u32, graph(
    e = tok(x),
    a = ff(e) + e,
    logits = head(a)
))]
struct Lm {
    tok: Embedding<100, 8, 16>,
    ff: PerPosition<Dense<8, 4>, 16>,
    head: PerPosition<Dense<8, 100>, 16>,
}

fn main() {
    let _ = Lm::init(Seed(0));
}
