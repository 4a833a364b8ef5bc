use fusegraph::prelude::*;

#[fusegraph::model(loss = Mse)]
pub struct Net {
    fc1: Dense<8, 4>,
    sizes: [usize; 2],
}

fn main() {}
