// Several `update`s each need a name, so that a route can pick one.
fusegraph::optimizer! {
    pub struct Masked {
        hyper { lr: f32 = 0.1, wd: f32 = 0.01 }
        update { p -= lr * g; }
        update decayed { p -= lr * (g + wd * p); }
    }
}

fn main() {}
