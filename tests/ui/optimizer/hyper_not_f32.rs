fusegraph::optimizer! {
    pub struct Precise {
        hyper { lr: f64 = 0.1, warmup: u32 = 10 }
        update { p -= lr * g; }
    }
}

fn main() {
    let _ = Precise::default();
}
