fusegraph::loss! {
    /// A loss needs the target too.
    pub L(pred) = pred * pred;
}

fn main() {
    let _ = <L as fusegraph::loss::Loss>::loss(&[1.0], &[0.0], 1);
}
