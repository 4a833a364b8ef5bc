fusegraph::activation! {
    /// Brackets without parameters.
    pub Empty[](x) = x * sigmoid(x);
}

fn main() {}
