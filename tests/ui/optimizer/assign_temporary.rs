fusegraph::optimizer! {
    pub struct Mutating {
        hyper { lr: f32 = 0.1 }
        update {
            let step = lr * g;
            step = step * 0.5;
            p -= step;
        }
    }
}

fn main() {}
