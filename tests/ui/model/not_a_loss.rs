use fusegraph::prelude::*;

pub struct Accuracy;

#[fusegraph::model(loss = Accuracy)]
pub struct Mlp {
    fc1: Dense<4, 2>,
}

fn main() {
    let _ = Mlp::init(Seed(3));
}
