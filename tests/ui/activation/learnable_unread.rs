fusegraph::activation! {
    /// `beta` is never read: its gradient would always be 0.
    pub Scaled[alpha = 1.0, beta = 0.0](x) = alpha * x;
    /// `t` is only compared: its gradient is 0 everywhere.
    pub Step[t = 0.0](x) = if x > t { x } else { 0.0 };
}

fn main() {}
