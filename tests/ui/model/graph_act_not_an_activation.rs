use fusegraph::prelude::*;

#[fusegraph::model(loss = Mse, graph(h = fc1(x).act::<Mae>(), y = head(h)))]
pub struct Net {
    fc1: Dense<4, 16>,
    head: Dense<16, 1>,
}

fn main() {
    let _ = Net::init(Seed(1));
}
