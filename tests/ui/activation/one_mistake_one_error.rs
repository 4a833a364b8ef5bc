use fusegraph::prelude::*;

fusegraph::activation! {
    /// Fine.
    pub Good(x) = x * sigmoid(x);
    /// One mistake: the type is still defined, so the model below gives no further error.
    pub Bad(x) = x * gelu(x);
}

/// A model using both.
#[fusegraph::model(loss = Mse)]
pub struct Net {
    fc1: Dense<4, 8, Good>,
    fc2: Dense<8, 2, Bad>,
}

fn main() {
    let _ = Net::init(Seed(1));
}
