fusegraph::optimizer! {
    pub struct TwoSlots {
        hyper { lr: f32 = 0.1 }
        slots { m = 0.0, v = m }
        update {
            m = g;
            v = g * g;
            p -= lr * m / v.sqrt();
        }
    }
}

fn main() {}
