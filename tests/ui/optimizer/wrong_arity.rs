fusegraph::optimizer! {
    pub struct Capped {
        hyper { lr: f32 = 0.1 }
        update { p -= lr * g.max(); }
    }
}

fn main() {}
