fusegraph::loss! {
    /// `f64(..)` in a `let`: one error, not also "never reads the prediction".
    pub A(pred, target) = { let d = f64(pred - target); d * d };
    /// A `let` with a pattern: one error, not also "unknown identifier" at its uses.
    pub B(pred, target) = { let (d, e) = (pred, target); d - e };
    /// The target named like the prediction: one error, not also "never reads".
    pub C(pred, pred) = pred * pred;
}

fn main() {
    let _ = <A as fusegraph::loss::Loss>::loss(&[1.0], &[0.0], 1);
    let _ = <B as fusegraph::loss::Loss>::loss(&[1.0], &[0.0], 1);
    let _ = <C as fusegraph::loss::Loss>::loss(&[1.0], &[0.0], 1);
}
