fusegraph::optimizer! {
    pub struct Typo {
        hyper { lr: f32 = 0.1 }
        updates { p -= lr * g; }
    }
}

fn main() {}
