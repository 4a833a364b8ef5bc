use fusegraph::optim::keras::Sgd;
use fusegraph::prelude::*;
use fusegraph::train::EmbeddedStep;

#[fusegraph::model(loss = Mse, inline)]
struct Tiny {
    fc: Dense<2, 1>,
}

type Step<'a> = EmbeddedStep<'a, Tiny, Sgd, 0>;

fn main() {
    let model = Tiny::zeroed();
    let mut arena = [0.0; Step::FLOATS];
    let _ = Step::new(&model, Sgd::default(), &mut arena);
}
