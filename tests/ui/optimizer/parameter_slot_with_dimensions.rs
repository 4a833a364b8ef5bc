// A slot that starts as the parameter is shaped like it.
fusegraph::optimizer! {
    pub struct Averaged {
        hyper { lr: f32 = 0.1 }
        slots { z: [rows] = p }
        update {
            z -= lr * g;
            p = z;
        }
    }
}

fn main() {}
