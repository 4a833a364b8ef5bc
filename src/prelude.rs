//! Everything a training program usually names: `use fusegraph::prelude::*;`.

#[cfg(feature = "std")]
pub use crate::data::Dataset;
#[cfg(feature = "std")]
pub use crate::fit::{
    EarlyStopping, FitOptions, History, Metric, Metrics, Monitor, Trainer, Verbose,
};
pub use crate::layers::{
    Act, Activation, AvgPool2d, BatchNorm, Conv2d, Dense, Dropout, Elu, Flatten, Gelu, Identity,
    Layer, LayerNorm, LeakyRelu, MaxPool2d, Relu, Same, Sigmoid, Softmax, Swish, Tanh, Valid,
};
pub use crate::loss::{BinaryCrossEntropyWithLogits, Huber, Loss, Mae, Mse, SoftmaxCrossEntropy};
#[cfg(feature = "alloc")]
pub use crate::optim::Optimizer;
pub use crate::optim::{Config, Rule};
pub use crate::{model, optimizer, Model, Rng, Seed};
#[cfg(feature = "alloc")]
pub use crate::{Evaluation, TrainStep};
