use fusegraph::prelude::*;

#[fusegraph::model(loss = Mse, max_bytes = 4096, batch = 0, optimizer = fusegraph::optim::keras::Sgd)]
pub struct Tiny {
    fc1: Dense<4, 2>,
}

fn main() {
    let _ = Tiny::init(Seed(1));
}
