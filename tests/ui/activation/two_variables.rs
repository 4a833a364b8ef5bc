fusegraph::activation! {
    /// An activation has one variable.
    pub Prod(x, y) = x * y;
}

fn main() {}
