fusegraph::loss! {
    /// Indexing is not element-wise.
    pub L(pred, target) = pred - target[0];
}

fn main() {
    let _ = <L as fusegraph::loss::Loss>::loss(&[1.0], &[0.0], 1);
}
