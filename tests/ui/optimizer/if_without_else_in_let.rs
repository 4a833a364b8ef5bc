fusegraph::optimizer! {
    pub struct HalfSelect {
        hyper { lr: f32 = 0.1 }
        update {
            let step = if g > 0.0 { lr * g };
            p -= step;
        }
    }
}

fn main() {}
