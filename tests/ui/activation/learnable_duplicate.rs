fusegraph::activation! {
    /// A learnable parameter named as a constant.
    pub Scaled { a: f32 = 1.0 } [a = 0.5](x) = a * x;
    /// The same learnable parameter twice.
    pub Twice[b = 0.5, b = 1.0](x) = b * x;
}

fn main() {}
