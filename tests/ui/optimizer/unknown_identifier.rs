fusegraph::optimizer! {
    pub struct Sgd {
        hyper { lr: f32 = 0.1 }
        update { p -= learning_rate * g; }
    }
}

fn main() {
    let _ = fusegraph::optim::Optimizer::new(Sgd::default(), &[4]);
}
