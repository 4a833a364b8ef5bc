fusegraph::activation! {
    /// `max` needs two arguments.
    pub Positive(x) = max(x);
}

fn main() {}
