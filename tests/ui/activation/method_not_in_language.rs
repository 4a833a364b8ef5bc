fusegraph::activation! {
    /// `exp_m1` is not in the language; `exp(x) - 1.0` is.
    pub Elu2(x) = if x > 0.0 { x } else { x.exp_m1() };
}

fn main() {}
