fusegraph::optimizer! {
    pub struct HalfSelect {
        hyper { lr: f32 = 0.1 }
        update { p -= if g > 0.0 { lr * g }; }
    }
}

fn main() {}
