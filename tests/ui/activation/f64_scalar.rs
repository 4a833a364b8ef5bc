fusegraph::activation! {
    /// `f64(..)` belongs to optimizers.
    pub Scaled { a: f32 = 0.5 } (x) = f64(1.0 - a) * x;
}

fn main() {}
