//! Checkpoints in the safetensors format, written atomically.
//!
//! [`save`] writes a model and its [`TrainStep`] (parameters, normalization statistics,
//! optimizer slots, carried scalars, the EMA, the step counter, the dropout seed and the
//! hyper-parameters); [`load`] restores all of it into a freshly constructed model and train
//! step, so that training resumes bit for bit as if it had never stopped. [`save_model`] and
//! [`load_model`] keep the model only, for inference. [`to_bytes`], [`from_bytes`],
//! [`model_to_bytes`] and [`model_from_bytes`] do the same in memory. [`TorchImport`] loads
//! the weights of a model trained in PyTorch.
//!
//! ```ignore
//! // (Compiled and run as `docs_example` in tests/checkpoint.rs: the macros live in the
//! // `fusegraph` crate.)
//! use fusegraph::optim::keras::Adam;
//! use fusegraph::prelude::*;
//!
//! #[fusegraph::model(loss = SoftmaxCrossEntropy)]
//! pub struct Mlp {
//!     fc1: Dense<8, 16, Relu>,
//!     fc2: Dense<16, 4>,
//! }
//!
//! let mut model = Mlp::init(Seed(7));
//! let mut step = TrainStep::<_, _, 32>::new(&model, Adam::default());
//! step.run(&mut model, &x, &y);
//! fusegraph::checkpoint::save_with("run.safetensors", &model, &step, &[("epoch", "3")])?;
//!
//! let mut model = Mlp::init(Seed(8));
//! let mut step = TrainStep::<_, _, 32>::new(&model, Adam::default());
//! let meta = fusegraph::checkpoint::load("run.safetensors", &mut model, &mut step)?;
//! assert_eq!(meta.get("epoch"), Some("3"));
//! ```
//!
//! # What the file holds
//!
//! Parameters and state are named and laid out as PyTorch's `state_dict` of the equivalent
//! module, whose attributes are named as the model's fields (`fc1`, `conv`, `bn`), so that
//! `load_state_dict(strict=True)` takes them:
//!
//! | fusegraph layer | tensors (F32 unless said) | PyTorch module |
//! |---|---|---|
//! | `Dense<IN, OUT>` | `fc1.weight` `[OUT, IN]` (the transpose of the stored `[IN, OUT]`), `fc1.bias` `[OUT]` | `nn.Linear(IN, OUT)` |
//! | `Conv2d<..>` | `conv.weight` `[F, C, KH, KW]` (OIHW, from the stored HWIO), `conv.bias` `[F]` | `nn.Conv2d(C, F, (KH, KW))` |
//! | `LayerNorm<N>` | `ln.weight` (`gamma`), `ln.bias` (`beta`) `[N]` | `nn.LayerNorm(N)` |
//! | `BatchNorm<C, S>` | `bn.weight`, `bn.bias`, `bn.running_mean`, `bn.running_var` `[C]`, `bn.num_batches_tracked` I64 `[]` | `nn.BatchNorm1d(C)` / `nn.BatchNorm2d(C)` |
//! | `Conv1d<T, C_IN, C_OUT, K, ..>` | `conv.weight` `[C_OUT, C_IN, K]` (from the stored `[K, C_IN, C_OUT]`), `conv.bias` `[C_OUT]` | `nn.Conv1d(C_IN, C_OUT, K, stride=S)` (channels first) |
//! | `Gru<T, IN, H, L>` | for each layer `l < L`: `gru.weight_ih_l{l}` `[3H, in_l]`, `gru.weight_hh_l{l}` `[3H, H]`, `gru.bias_ih_l{l}`, `gru.bias_hh_l{l}` `[3H]`, gates r, z, n | `nn.GRU(IN, H, L, batch_first=True)` |
//! | `Lstm<T, IN, H, L>` | as `Gru` with `[4H, ..]`, gates i, f, g, o | `nn.LSTM(IN, H, L, batch_first=True)` |
//! | `Embedding<VOCAB, DIM, SEQ, PAD>` | `tok.weight` `[VOCAB, DIM]` | `nn.Embedding(VOCAB, DIM, padding_idx=PAD)` |
//! | `PositionalEmbedding<MAX_LEN, DIM, SEQ>` | `pos.weight` `[MAX_LEN, DIM]` | `nn.Embedding(MAX_LEN, DIM)` over `arange(SEQ)` |
//! | `CausalSelfAttention<SEQ, DIM, HEADS>` | `attn.q.weight` `[DIM, DIM]`, `attn.q.bias` `[DIM]`, the same for `k`, `v` and `o` | four `nn.Linear(DIM, DIM)` named `q`, `k`, `v`, `o` |
//! | `PerPosition<L, T>` | `L`'s tensors, under the field's name | `L`'s module, applied to the last axis |
//!
//! `num_batches_tracked` is not tracked by the layer: [`save`] stores the optimizer's step
//! count there (the number of training batches when every batch went through
//! [`TrainStep::run`]), [`save_model`] stores 0, and loading ignores it. PyTorch reads it only
//! with `momentum=None`; fusegraph's BatchNorm has PyTorch's default momentum, 0.1.
//!
//! A training checkpoint adds the other parts of the train step's state
//! ([`Step::state_parts`]), with names that PyTorch's `load_state_dict` never sees once
//! filtered out:
//!
//! - `optimizer.<slot>.<tensor>`: each slot of each parameter, in the parameter's PyTorch
//!   layout (with Keras' Adam, `optimizer.momentum.fc1.weight` is `[16, 8]`);
//! - `optimizer.ema.<tensor>`: the EMA of the weights, when [`Config::ema`] is set;
//! - `optimizer.<name>`: each carried scalar (Nadam's `u_product`), F32 `[]`;
//! - `train.step`: the number of completed steps (the optimizer's `iterations`, from which the
//!   schedule's position and the dropout streams follow), I64 `[]`;
//! - `train.seed`: the dropout seed, its 64 bits as I64 `[]`.
//!
//! The metadata (the header's string map) holds `format` = `fusegraph`, `format_version` =
//! `2`, `contents` = `model` or `training`, `model_signature` (see [`signature`]),
//! `model_layers` (see [`layers`]: a `name: kind` line per layer, then the graph's wiring and
//! the loss), `checksum.<tensor>` for every tensor (the CRC-32 of its bytes in the file, zlib's,
//! as 8 hex digits), `metadata_checksum` (the CRC-32 of every other entry in key order, each
//! key and value as its length, a little-endian `u64`, and its UTF-8 bytes), and for a
//! training checkpoint `optimizer` (the rule's name), `optimizer.slots`, `optimizer.carried`,
//! `optimizer.hyper.<name>` for every hyper-parameter (printed so that it parses back to the
//! same `f32`), `optimizer.config` and `optimizer.schedule` (Rust's `Debug` of the
//! [`Config`] and its schedule), and the caller's entries of [`save_with`] as `user.<key>`.
//!
//! # Loading
//!
//! Loading checks the whole file before it changes anything: the format and its version, the
//! metadata's checksum, the model's layers (the first that differs is named with both sides:
//! `fc1: Dense<4, 16, tanh, bias: true> in the file, Dense<4, 24, tanh, bias: true> in this
//! model`) and signature, the optimizer's name, slots and carried scalars, the presence, type
//! and shape of every tensor and that there are no others, each tensor's checksum, and that
//! its values are finite; each failure is a [`CheckpointError`] that names the tensor, layer
//! or key and what was expected. Any single flipped bit in a file is an error or changes
//! nothing. NaNs and infinities are refused unless [`Loader::allow_non_finite`] accepts them,
//! with a [`Warning`] in [`Metadata::warnings`].
//!
//! A file of format version 1 (before checksums and layer kinds) loads with two warnings:
//! its damage cannot be detected, and only its tensors' names and shapes are checked, not
//! the layers' kinds and options. Then it copies the
//! values, sets the step counter and the dropout seed, and restores the hyper-parameters with
//! [`Rule::set_hyper`]. The [`Config`] (clipping, weight
//! decay, schedule) is the train step's: it is recorded in the file but not checked, so that
//! a resumed run may change it. [`load_model`] also takes a training checkpoint and ignores
//! its `optimizer.` and `train.` tensors.
//!
//! # From PyTorch
//!
//! A file that PyTorch wrote, `safetensors.torch.save_file(model.state_dict(), path)`, has
//! none of this metadata: [`load_model`] refuses it for want of a `format` entry, and
//! [`TorchImport`] loads it. It maps each key of the file to a tensor of the model, by
//! default the key of the table above (renamed with a prefix or key by key as asked),
//! converts the tensor from PyTorch's layout to fusegraph's, checks its shape (naming the key
//! and both shapes) and type (`F32`, or `F16`, `BF16`, `F64` converted), and by default, as
//! `load_state_dict(strict=True)`, refuses keys that map to no tensor and tensors that no key
//! sets; its [`ImportReport`] lists what it loaded and what it left.
//!
//! ```ignore
//! let report = TorchImport::new()
//!     .prefix("backbone.") // the model was the `backbone` attribute of a wrapper
//!     .rename("classifier.weight", "fc2.weight")
//!     .rename("classifier.bias", "fc2.bias")
//!     .load_model("pretrained.safetensors", &mut model)?;
//! println!("{report}"); // 4 tensors loaded: `backbone.fc1.bias` as `fc1.bias`, ...
//! ```
//!
//! # Writing
//!
//! Files are replaced atomically ([`write_atomic`]): after a crash, a kill or a failed write,
//! the path holds the old checkpoint or the new one, never a mix. A failed write names the
//! path it was given; the next save of that path removes the temporary files that killed
//! saves of it left.
//!
//! # From Python
//!
//! ```python
//! import torch.nn as nn
//! from safetensors.torch import load_file
//!
//! class Mlp(nn.Module):  # the attributes are named as the Rust fields
//!     def __init__(self):
//!         super().__init__()
//!         self.fc1 = nn.Linear(8, 16)
//!         self.fc2 = nn.Linear(16, 4)
//!
//!     def forward(self, x):
//!         return self.fc2(self.fc1(x).relu())
//!
//! model = Mlp()
//! sd = load_file("run.safetensors")
//! params = {k: v for k, v in sd.items()
//!           if not k.startswith("optimizer.") and not k.startswith("train.")}
//! model.load_state_dict(params)  # strict=True
//!
//! # A slot of each parameter, in the layout of its parameter: the names are the rule's slots
//! # (`Rule::SLOTS`; the metadata lists them under "optimizer.slots"), here
//! # Keras Adam's `momentum` and `velocity`.
//! def slot(name):
//!     prefix = f"optimizer.{name}."
//!     return {k[len(prefix):]: t for k, t in sd.items() if k.startswith(prefix)}
//! momentum, velocity = slot("momentum"), slot("velocity")
//! assert momentum.keys() == params.keys()
//! step = int(sd["train.step"])
//!
//! from safetensors import safe_open
//! import zlib
//! with safe_open("run.safetensors", "np") as f:
//!     meta = f.metadata()  # {"optimizer": "Adam", "optimizer.hyper.lr": "0.001", ...}
//!     w = f.get_tensor("fc1.weight")
//! assert f"{zlib.crc32(w.tobytes()):08x}" == meta["checksum.fc1.weight"]
//! ```
//!
//! Without torch, `safetensors.numpy.load_file` reads the same dictionary as numpy arrays.
//! Keep in mind that fusegraph's images are NHWC: a `Dense` after `Flatten` after a
//! convolution sees its inputs in (H, W, C) order, where `nn.Flatten` gives (C, H, W), so such
//! a model needs its first `Dense` weight's columns permuted (or an NHWC flatten) in PyTorch.
//!
//! [`TrainStep`]: crate::train::TrainStep
//! [`TrainStep::run`]: crate::train::TrainStep::run
//! [`Config`]: crate::optim::Config
//! [`Config::ema`]: crate::optim::Config::ema

mod checksum;
mod error;
mod float;
mod format;
mod header;
mod import;
mod layout;
mod metadata;
mod warning;

pub use error::CheckpointError;
pub use format::{from_bytes, model_from_bytes, model_to_bytes, to_bytes, to_bytes_with};
pub use import::{ImportReport, Loaded, TorchImport};
pub use layout::{layers, signature};
pub use metadata::Metadata;
pub use warning::Warning;

use crate::fs::write_atomic;
use crate::optim::Rule;
use crate::optim::{Storage, UpdateMode};
use crate::train::{Model, Step};
use std::fs;
use std::path::Path;
use std::vec::Vec;

fn read(path: &Path) -> Result<Vec<u8>, CheckpointError> {
    fs::read(path).map_err(|e| CheckpointError::io(path, "read", e))
}

/// Saves the model and the train step to `path` (see the [module docs](self)), atomically.
pub fn save<M: Model, R: Rule, const B: usize, U: UpdateMode, S: Storage>(
    path: impl AsRef<Path>,
    model: &M,
    step: &Step<M, R, B, U, S>,
) -> Result<(), CheckpointError> {
    save_with(path, model, step, &[])
}

/// [`save`] with the caller's metadata entries (the epoch, the data position), stored as
/// `user.<key>` and read back by [`Metadata::get`]`(key)`.
pub fn save_with<M: Model, R: Rule, const B: usize, U: UpdateMode, S: Storage>(
    path: impl AsRef<Path>,
    model: &M,
    step: &Step<M, R, B, U, S>,
    extra: &[(&str, &str)],
) -> Result<(), CheckpointError> {
    Ok(write_atomic(path, &to_bytes_with(model, step, extra)?)?)
}

/// Loads a checkpoint of [`save`] into `model` and `step`, which must have the same layers,
/// optimizer and EMA setting; returns its metadata (with the [warnings](Metadata::warnings)
/// of the load). Nothing changes unless the whole file is valid; non-finite values are
/// refused (see [`Loader`]).
pub fn load<M: Model, R: Rule, const B: usize, U: UpdateMode, S: Storage>(
    path: impl AsRef<Path>,
    model: &mut M,
    step: &mut Step<M, R, B, U, S>,
) -> Result<Metadata, CheckpointError> {
    Loader::new().load(path, model, step)
}

/// Saves the model's parameters and state only (for inference), atomically.
pub fn save_model<M: Model>(path: impl AsRef<Path>, model: &M) -> Result<(), CheckpointError> {
    Ok(write_atomic(path, &model_to_bytes(model)?)?)
}

/// Loads parameters and state from a file of [`save_model`] or [`save`]; returns its
/// metadata. Nothing changes unless the whole file fits the model; non-finite values are
/// refused (see [`Loader`]).
pub fn load_model<M: Model>(
    path: impl AsRef<Path>,
    model: &mut M,
) -> Result<Metadata, CheckpointError> {
    Loader::new().load_model(path, model)
}

/// How to load a checkpoint: [`load`], [`load_model`], [`from_bytes`] and
/// [`model_from_bytes`] with choices. By default a NaN or an infinity in any floating-point
/// tensor is an error ([`CheckpointError::NonFinite`], naming the tensor and the index of its
/// first such value), since resuming from it would train on garbage.
///
/// ```ignore
/// // Inspect the weights of a run that diverged.
/// let meta = Loader::new().allow_non_finite().load_model("diverged.safetensors", &mut model)?;
/// for w in meta.warnings() {
///     eprintln!("{w}"); // checkpoint tensor `fc1.weight` holds a NaN or an infinity at index 3
/// }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Loader {
    allow_non_finite: bool,
}

impl Loader {
    /// The default choices: non-finite values are refused.
    pub fn new() -> Self {
        Self::default()
    }

    /// Accepts NaNs and infinities, noting the first of each tensor in
    /// [`Metadata::warnings`] ([`Warning::NonFinite`]).
    pub fn allow_non_finite(mut self) -> Self {
        self.allow_non_finite = true;
        self
    }

    /// Whether non-finite values load (with a warning).
    pub(crate) fn accepts_non_finite(&self) -> bool {
        self.allow_non_finite
    }

    /// [`load`] with these choices.
    pub fn load<M: Model, R: Rule, const B: usize, U: UpdateMode, S: Storage>(
        &self,
        path: impl AsRef<Path>,
        model: &mut M,
        step: &mut Step<M, R, B, U, S>,
    ) -> Result<Metadata, CheckpointError> {
        self.from_bytes(&read(path.as_ref())?, model, step)
    }

    /// [`load_model`] with these choices.
    pub fn load_model<M: Model>(
        &self,
        path: impl AsRef<Path>,
        model: &mut M,
    ) -> Result<Metadata, CheckpointError> {
        self.model_from_bytes(&read(path.as_ref())?, model)
    }

    /// [`from_bytes`] with these choices.
    pub fn from_bytes<M: Model, R: Rule, const B: usize, U: UpdateMode, S: Storage>(
        &self,
        bytes: &[u8],
        model: &mut M,
        step: &mut Step<M, R, B, U, S>,
    ) -> Result<Metadata, CheckpointError> {
        format::read_training(bytes, model, step, self)
    }

    /// [`model_from_bytes`] with these choices.
    pub fn model_from_bytes<M: Model>(
        &self,
        bytes: &[u8],
        model: &mut M,
    ) -> Result<Metadata, CheckpointError> {
        format::read_model(bytes, model, self)
    }
}
