use fusegraph::prelude::*;

pub struct Attention;

#[fusegraph::model(loss = Mse)]
pub struct Net {
    fc1: Dense<8, 8>,
    attn: Attention,
}

fn main() {
    let _ = Net::init(Seed(1));
}
