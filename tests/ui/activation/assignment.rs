fusegraph::activation! {
    /// An assignment instead of an expression.
    pub Shift(x) = x += 1.0;
}

fn main() {}
