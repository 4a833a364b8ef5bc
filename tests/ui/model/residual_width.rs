use fusegraph::prelude::*;

#[fusegraph::model(loss = Mse, graph(h = fc1(x).relu(), y = fc2(h) + h))]
pub struct Res {
    fc1: Dense<8, 16>,
    fc2: Dense<16, 4>,
}

fn main() {}
