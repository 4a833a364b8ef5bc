fusegraph::optimizer! {
    pub struct Restart {
        hyper { lr: f32 = 0.1 }
        update {
            t = 1.0;
            p -= lr * g;
        }
    }
}

fn main() {}
