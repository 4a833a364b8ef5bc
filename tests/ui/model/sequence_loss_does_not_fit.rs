use fusegraph::prelude::*;

#[fusegraph::model(loss = SequenceCrossEntropy<4>)]
pub struct Tagger {
    gru: Gru<6, 3, 5, 1, Sequence>,
}

fn main() {}
