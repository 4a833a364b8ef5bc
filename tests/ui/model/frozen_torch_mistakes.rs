use fusegraph::prelude::*;

// A file that is not there, and a layer whose shape is not the file's: each one error, naming
// the file or the key and both shapes. (trybuild builds this file in
// target/tests/trybuild/fusegraph, four folders below the repository.)
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
pub struct Missing {
    #[frozen(torch = "weights/missing.safetensors")]
    fc1: Dense<4, 3>,
    head: Dense<3, 2>,
}

#[fusegraph::model(loss = SoftmaxCrossEntropy)]
pub struct Reshaped {
    #[frozen(torch = "../../../../tests/data/torch/backbone.safetensors")]
    fc1: Dense<4, 5>,
    head: Dense<5, 2>,
}

fn main() {}
