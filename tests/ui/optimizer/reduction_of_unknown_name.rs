// A reduction reads names like any expression: `w` is neither a slot nor a `let`.
fusegraph::optimizer! {
    pub struct Trusted {
        hyper { lr: f32 = 0.1 }
        update {
            let ratio = norm(p) / norm(w);
            p -= lr * ratio * g;
        }
    }
}

fn main() {}
