// `p -= ..` waits for `norm(g)` and runs in the second pass, after `m` is assigned in the first:
// it would read the new `m`, where the program reads the old one.
fusegraph::optimizer! {
    pub struct Hazard {
        hyper { lr: f32 = 0.1 }
        slots { m = 0.0 }
        update {
            p -= lr * m / norm(g);
            m = 0.9 * m + g;
        }
    }
}

fn main() {}
