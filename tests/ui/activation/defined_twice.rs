use fusegraph::prelude::*;

fusegraph::activation! {
    /// First.
    pub Act(x) = x * sigmoid(x);
    /// The same name again.
    pub Act(x) = tanh(x);
    /// Constants that would both be `Self::A`.
    pub Two { a: f32 = 1.0, A: f32 = 2.0 } (x) = a * A * x;
}

fn main() {
    let _ = <Act as Activation>::NAME;
    let _ = Two::A;
}
