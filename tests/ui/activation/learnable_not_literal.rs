fusegraph::activation! {
    /// An initial value computed from another.
    pub PRelu[alpha = 1.0 / 4.0](x) = if x > 0.0 { x } else { alpha * x };
}

fn main() {}
