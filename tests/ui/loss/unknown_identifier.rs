fusegraph::loss! {
    /// Reads a name it does not have.
    pub L(pred, target) = (pred - target) * weight;
}

fn main() {
    let _ = <L as fusegraph::loss::Loss>::loss(&[1.0], &[0.0], 1);
}
