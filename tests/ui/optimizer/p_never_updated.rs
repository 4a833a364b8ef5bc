fusegraph::optimizer! {
    pub struct Forgetful {
        hyper { lr: f32 = 0.1 }
        slots { m = 0.0 }
        update { m = m * 0.9 + lr * g; }
    }
}

fn main() {}
