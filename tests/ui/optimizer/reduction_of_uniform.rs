// `norm` reduces a value with one per element; `lr` is the same for all of them.
fusegraph::optimizer! {
    pub struct Normed {
        hyper { lr: f32 = 0.1 }
        update { p -= g / norm(lr); }
    }
}

fn main() {}
