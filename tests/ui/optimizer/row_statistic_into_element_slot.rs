// A slot declared `[rows]` keeps one value per row: a value per element does not fit it.
fusegraph::optimizer! {
    pub struct Rows {
        hyper { lr: f32 = 0.1 }
        slots { r: [rows] = 0.0 }
        update {
            r = g * g;
            p -= lr * g / (r + 1.0).sqrt();
        }
    }
}

fn main() {}
