//! Everything a training program usually names: `use fusegraph::prelude::*;`.

#[cfg(feature = "std")]
pub use crate::data::Dataset;
#[cfg(feature = "std")]
pub use crate::fit::{
    EarlyStopping, FitOptions, History, Metric, Metrics, Monitor, Trainer, Verbose,
};
pub use crate::layers::{
    Act, Activation, AvgPool2d, Backward, BatchNorm, BiGru, BiLstm, CausalSelfAttention, Conv1d,
    Conv2d, Ctx, Dense, Dropout, Elu, Embedding, Flatten, Forward, Gelu, Grad, Gru, Identity, Init,
    Last, Layer, LayerNorm, LeakyRelu, Lstm, MaxPool2d, MeanOverTime, Mode, PerPosition,
    PositionalEmbedding, Relu, Same, Sequence, Sigmoid, Softmax, Swish, Tanh, Tensor, Valid,
};
pub use crate::loss::{
    BinaryCrossEntropyWithLogits, Huber, Loss, Mae, Mse, Reduce, SequenceCrossEntropy,
    SoftmaxCrossEntropy,
};
#[cfg(feature = "alloc")]
pub use crate::optim::Optimizer;
pub use crate::optim::{Config, Rule};
pub use crate::{model, optimizer, Model, Rng, Seed};
#[cfg(feature = "alloc")]
pub use crate::{Evaluation, TrainStep};
