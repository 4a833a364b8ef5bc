fusegraph::loss! {
    /// A function outside the language.
    pub L(pred, target) = sin(pred - target);
}

fn main() {
    let _ = <L as fusegraph::loss::Loss>::loss(&[1.0], &[0.0], 1);
}
