fusegraph::optimizer! {
    pub struct Wavy {
        hyper { lr: f32 = 0.1 }
        update { p -= lr * g.sin(); }
    }
}

fn main() {}
