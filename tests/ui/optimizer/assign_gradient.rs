fusegraph::optimizer! {
    pub struct Clipped {
        hyper { lr: f32 = 0.1 }
        update {
            g = g.clamp(-1.0, 1.0);
            p -= lr * g;
        }
    }
}

fn main() {
    let _ = Clipped::default().with_lr(0.2);
}
