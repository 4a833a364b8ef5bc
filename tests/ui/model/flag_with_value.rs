use fusegraph::prelude::*;

#[fusegraph::model(loss = Mse, inline = true)]
pub struct Tiny {
    fc1: Dense<4, 2>,
}

fn main() {
    let _ = Tiny::init(Seed(1));
}
