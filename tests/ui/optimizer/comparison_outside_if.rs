fusegraph::optimizer! {
    pub struct Masked {
        hyper { lr: f32 = 0.1 }
        update { p -= lr * (g > 0.0); }
    }
}

fn main() {}
