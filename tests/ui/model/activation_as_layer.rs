use fusegraph::prelude::*;

#[fusegraph::model(loss = Mse)]
pub struct Net {
    fc1: Dense<4, 16>,
    act: Tanh,
    fc2: Dense<16, 1>,
}

fn main() {
    let _ = Net::init(Seed(1));
}
