fusegraph::loss! {
    /// Its gradient would be 0.
    pub L(pred, target) = target * target;
}

fn main() {
    let _ = <L as fusegraph::loss::Loss>::loss(&[1.0], &[0.0], 1);
}
