use fusegraph::optim::keras::Sgd;
use fusegraph::prelude::*;

#[fusegraph::model(loss = Mse)]
struct Net {
    fc: Dense<2, 1>,
}

fn main() {
    let mut model = Net::init(Seed(0));
    let mut step = TrainStep::<Net, Sgd, 1>::new(&model, Sgd::default());
    let loss = step.run(&mut model, &[1.0, 2.0], &[0.5]);
    assert!(loss.is_finite());
}
