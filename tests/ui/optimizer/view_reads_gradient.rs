// A view is taken between steps, from the parameters and their slots: there is no gradient.
fusegraph::optimizer! {
    pub struct Averaged {
        hyper { lr: f32 = 0.1, b: f32 = 0.9 }
        slots { z = p }
        views { average = b * p + (1.0 - b) * z - lr * g }
        update {
            z -= lr * g;
            p = b * p + (1.0 - b) * z;
        }
    }
}

fn main() {}
