fusegraph::optimizer! {
    pub struct Confused {
        hyper { lr: f32 = 0.1 }
        step { let scaled = lr * g; }
        update { p -= scaled; }
    }
}

fn main() {}
