fusegraph::loss! {
    /// A body binds with let and ends with its value.
    pub L(pred, target) = {
        let d = pred - target;
        d = d * d;
        d
    };
}

fn main() {
    let _ = <L as fusegraph::loss::Loss>::loss(&[1.0], &[0.0], 1);
}
