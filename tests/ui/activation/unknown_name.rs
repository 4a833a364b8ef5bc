fusegraph::activation! {
    /// Scaled by a name that is neither the variable nor a constant.
    pub Scaled(x) = beta * x;
}

fn main() {}
