use fusegraph::optim::keras::Adam;
use fusegraph::prelude::*;

#[fusegraph::model(loss = SoftmaxCrossEntropy)]
pub struct Classifier {
    fc1: Dense<4, 3>,
}

fn main() {
    let mut model = Classifier::init(Seed(1));
    let mut step = TrainStep::<Classifier, Adam, 2>::new(&model, Adam::default());
    let x = [0.0f32; 8];
    let y = [0.0f32; 2];
    step.run(&mut model, &x, &y);
}
