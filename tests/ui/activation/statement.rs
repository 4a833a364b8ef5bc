fusegraph::activation! {
    /// A temporary bound with `let`.
    pub Twice(x) = {
        let s = sigmoid(x);
        x * s
    };
}

fn main() {}
