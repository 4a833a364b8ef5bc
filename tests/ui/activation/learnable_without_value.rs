fusegraph::activation! {
    /// A slope without its initial value.
    pub PRelu[alpha](x) = if x > 0.0 { x } else { alpha * x };
}

fn main() {}
