fusegraph::activation! {
    /// A sine wave.
    pub Wave(x) = x.sin();
}

fn main() {}
