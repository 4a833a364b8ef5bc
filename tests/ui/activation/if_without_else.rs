fusegraph::activation! {
    /// A ReLU whose `else` is missing.
    pub HalfRelu(x) = if x > 0.0 { x };
}

fn main() {}
