fusegraph::optimizer! {
    pub struct Shadow {
        hyper { lr: f32 = 0.1 }
        slots { g = 0.0 }
        update { p -= lr * g; }
    }
}

fn main() {}
