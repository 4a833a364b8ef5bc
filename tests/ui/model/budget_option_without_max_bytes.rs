use fusegraph::prelude::*;

#[fusegraph::model(loss = Mse, batch = 8, optimizer = fusegraph::optim::keras::Sgd, fused)]
pub struct Tiny {
    fc1: Dense<4, 2>,
}

fn main() {
    let _ = Tiny::init(Seed(1));
}
