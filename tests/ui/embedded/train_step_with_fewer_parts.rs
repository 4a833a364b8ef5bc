use fusegraph::optim::{keras::Sgd, Fused, Plain};
use fusegraph::prelude::*;

#[fusegraph::model(loss = Mse)]
pub struct Net {
    fc: Dense<4, 2>,
}

fn main() {
    let model = Net::init(Seed(1));
    let _ = TrainStep::<Net, Sgd, 8, Fused<Plain>>::new(&model, Sgd::default());
}
