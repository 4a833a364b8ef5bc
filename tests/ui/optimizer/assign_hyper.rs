fusegraph::optimizer! {
    pub struct Decaying {
        hyper { lr: f32 = 0.1, decay: f32 = 0.99 }
        step { lr *= decay; }
        update { p -= lr * g; }
    }
}

fn main() {}
