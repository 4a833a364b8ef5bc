fusegraph::activation! {
    /// A slope of the wrong type.
    pub Leaky { alpha: f64 = 0.01 } (x) = if x > 0.0 { x } else { alpha * x };
}

fn main() {}
