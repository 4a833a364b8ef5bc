fusegraph::loss! {
    /// A hinge whose `else` is missing.
    pub Hinge(pred, target) = {
        let margin = 1.0 - pred * target;
        let h = if margin > 0.0 { margin };
        h * h
    };
}

fn main() {}
