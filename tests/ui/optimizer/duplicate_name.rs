fusegraph::optimizer! {
    pub struct Twice {
        hyper { lr: f32 = 0.1, beta: f32 = 0.9 }
        slots { beta = 0.0 }
        update {
            beta = g;
            p -= lr * beta;
        }
    }
}

fn main() {}
