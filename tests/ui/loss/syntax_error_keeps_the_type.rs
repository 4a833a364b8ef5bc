fusegraph::loss! {
    /// A syntax error: the type is still defined, and the next loss still checked.
    pub Broken(pred, target) = (pred - target) *;
    /// A constant without its value.
    pub Scaled { k: f32 } (pred, target) = k * (pred - target) * (pred - target);
    /// `reduce` twice.
    pub Twice(pred, target) = abs(pred - target), reduce = sum, reduce = mean;
}

fn main() {
    let _ = <Broken as fusegraph::loss::Loss>::loss(&[1.0], &[0.0], 1);
    let _ = <Scaled as fusegraph::loss::Loss>::loss(&[1.0], &[0.0], 1);
    let _ = <Twice as fusegraph::loss::Loss>::loss(&[1.0], &[0.0], 1);
}
