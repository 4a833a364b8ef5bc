use fusegraph::prelude::*;

#[fusegraph::model(loss = SequenceCrossEntropy<4>)]
struct Tagger {
    gru: Gru<3, 2, 5, 1, Sequence>,
    proj: PerPosition<Dense<4, 4>, 3>,
}

fn main() {
    let _ = Tagger::init(Seed(0));
}
