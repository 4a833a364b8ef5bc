// `orthogonalize` needs a matrix: a rule whose one `update` also runs on vectors cannot call it.
fusegraph::optimizer! {
    pub struct Orthogonal {
        hyper { lr: f32 = 0.02 }
        update {
            let o = orthogonalize(g / norm(g), 5.0, 3.4445, -4.775, 2.0315);
            p -= lr * o;
        }
    }
}

fn main() {}
