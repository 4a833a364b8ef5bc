fusegraph::activation! {
    /// A slope without a value.
    pub Leaky { alpha: f32 } (x) = if x > 0.0 { x } else { alpha * x };
}

fn main() {}
