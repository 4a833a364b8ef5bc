fusegraph::loss! {
    /// Constants that would both be `Self::K`.
    pub L { k: f32 = 1.0, K: f32 = 2.0 } (pred, target) = k * K * (pred - target) * (pred - target);
}

fn main() {
    let _ = L::K;
}
