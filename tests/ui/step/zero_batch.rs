use fusegraph::optim::keras::Sgd;
use fusegraph::prelude::*;

#[fusegraph::model(loss = Mse)]
struct Net {
    fc: Dense<2, 1>,
}

fn main() {
    let model = Net::init(Seed(0));
    let _ = TrainStep::<Net, Sgd, 0>::new(&model, Sgd::default());
}
