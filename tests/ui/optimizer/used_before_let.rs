fusegraph::optimizer! {
    pub struct Early {
        hyper { lr: f32 = 0.1 }
        update {
            p -= lr * direction;
            let direction = g.signum();
        }
    }
}

fn main() {}
