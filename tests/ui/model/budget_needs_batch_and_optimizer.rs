use fusegraph::prelude::*;

#[fusegraph::model(loss = Mse, inline, max_bytes = 4096)]
pub struct Tiny {
    fc1: Dense<4, 2>,
}

fn main() {
    let _ = Tiny::zeroed();
}
