use fusegraph::prelude::*;

fusegraph::activation! {
    /// One mistake in the body: the layer is still defined, generic over its features.
    pub PRelu[alpha = 0.25](x) = if x > 0.0 { x } else { alpha * gelu(x) };
    /// A syntax error (`:` where `=` belongs): still a layer, since the brackets are there.
    pub Broken[a: 0.5](x) = a * x;
}

/// A model using both.
#[fusegraph::model(loss = Mse)]
pub struct Net {
    fc1: Dense<4, 8>,
    act: PRelu<8>,
    act2: Broken<8>,
    fc2: Dense<8, 2>,
}

fn main() {
    let _ = Net::init(Seed(1));
}
