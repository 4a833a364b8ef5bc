fusegraph::loss! {
    /// Constants are f32 literals.
    pub L { delta: f64 = 1.0 } (pred, target) = delta * abs(pred - target);
}

fn main() {
    let _ = <L as fusegraph::loss::Loss>::loss(&[1.0], &[0.0], 1);
}
