use fusegraph::prelude::*;

#[fusegraph::model(loss = SoftmaxCrossEntropy, input = i64)]
struct Net {
    tok: Embedding<10, 4, 3>,
    fc: Dense<12, 4>,
}

fn main() {}
