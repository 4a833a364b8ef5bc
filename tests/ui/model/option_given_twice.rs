use fusegraph::prelude::*;

#[fusegraph::model(loss = Mse, inline, max_bytes = 4096, batch = 8, batch = 16, optimizer = fusegraph::optim::keras::Sgd, inline)]
pub struct Tiny {
    fc1: Dense<4, 2>,
}

fn main() {
    let _ = Tiny::init(Seed(1));
}
