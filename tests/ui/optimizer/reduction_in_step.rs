// A reduction reads a tensor: `step` runs once for every tensor, before any of them.
fusegraph::optimizer! {
    pub struct Normed {
        hyper { lr: f32 = 0.1 }
        step { let scale = lr / norm(lr); }
        update { p -= scale * g; }
    }
}

fn main() {}
