//! The contract between `#[model]` and the runtime.

use super::input::InputValue;
use super::sink::GradSink;
use super::tensors::NamedTensor;
use crate::kernels::gemm::{max, pool_threads, products_workspace_len, Product};
use crate::layers::{Ctx, Grad, Layer};
use crate::loss::Loss;
use crate::optim::{newton_schulz_serial_work, Layout, Rule, Shape};
use core::fmt;
use core::marker::PhantomData;
use core::ops::Range;

/// Writes what a layer, an activation, a loss or a model's graph computes, with every option
/// that changes it (sizes, activation, stride, padding, bias...): `Dense 4->16 tanh`.
pub type Describe = fn(&mut dyn fmt::Write) -> fmt::Result;

/// A layer of a model: its field name and what it is, which a checkpoint records so that it
/// loads only into a model with the same layers.
#[derive(Clone, Copy, Debug)]
pub struct LayerKind {
    /// The layer's field name (`fc1`), or `graph` for the wiring of a model declared with a
    /// graph.
    pub name: &'static str,
    /// Writes the layer's kind ([`Layer::describe`]).
    pub describe: Describe,
}

/// Sizes in bytes of a model and everything a train step owns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bytes {
    /// Trainable parameters and non-trainable state.
    pub params: usize,
    /// Frozen parameters (`#[frozen]`): read, never trained.
    pub frozen: usize,
    /// Gradients: one per parameter, or, when each layer is updated as soon as its gradient is
    /// known, one per parameter of the largest layer.
    pub grads: usize,
    /// Activations, what layers save for backward, their gradients and the input gradient,
    /// for the maximum batch.
    pub activations: usize,
    /// Scratch and GEMM workspace for the maximum batch on one thread, a copy of the
    /// non-trainable state for inference, and a tensor-wise rule's scratch
    /// ([`optimizer_work`]).
    pub workspace: usize,
    /// Optimizer slots.
    pub slots: usize,
}

impl Bytes {
    /// Everything together.
    pub const fn total(&self) -> usize {
        self.params + self.frozen + self.grads + self.activations + self.workspace + self.slots
    }

    /// The bytes of model `M` and a train step of rule `R` for batches of `batch`, with a
    /// full gradient buffer or (`fused`) one the size of the largest layer. Frozen tensors
    /// have no gradients and no slots.
    pub const fn of<M: Model, R: Rule>(batch: usize, fused: bool) -> Bytes {
        let grads = if fused {
            M::MAX_LAYER_PARAMS
        } else {
            M::TRAINABLE
        };
        Bytes {
            params: (M::TRAINABLE + M::STATE) * 4,
            frozen: (M::PARAMS - M::TRAINABLE) * 4,
            grads: grads * 4,
            activations: (M::ACTIVATIONS + M::NODE_GRADS + M::IN) * batch * 4,
            workspace: (M::SCRATCH_PER_SAMPLE * batch
                + products_workspace_len(M::PRODUCTS, batch, 1)
                + M::STATE
                + optimizer_work::<M, R>())
                * 4,
            slots: R::SLOTS.len() * M::TRAINABLE * 4,
        }
    }
}

/// The scratch values a tensor-wise rule `R` needs over the trainable tensors of `M`, at most,
/// on one thread: room for the largest tensor's transformed gradient, its
/// [`Rule::WORK_PER_VALUE`] values per value, and the largest matrix step's (0 for an
/// element-wise rule). An arena sized by it holds what
/// [`Optimizer`](crate::optim::Optimizer) needs whatever its configuration and routes.
pub const fn optimizer_work<M: Model, R: Rule>() -> usize {
    if !R::TENSOR_WISE {
        return 0;
    }
    let (mut largest, mut matrix, mut i) = (0, 0, 0);
    while i < M::TRAINABLE_TENSORS.len() {
        let shape = Shape::of(M::TRAINABLE_TENSORS[i].tensor.shape);
        largest = max(largest, shape.numel());
        if R::MATRIX_STEP {
            matrix = max(matrix, newton_schulz_serial_work(shape.rows, shape.cols));
        }
        i += 1;
    }
    largest * (1 + R::WORK_PER_VALUE) + matrix
}

/// A model whose shapes are constants. Implemented by `#[fusegraph::model]`.
///
/// Buffers are laid out per sample: for a batch of `batch` samples, node `i` of the forward
/// pass owns `[offset_i * batch, (offset_i + width_i) * batch)` of the activation buffer, so
/// any batch up to the maximum uses a prefix of buffers sized for the maximum.
pub trait Model: Sized {
    /// Input values per sample.
    const IN: usize;
    /// Output values per sample.
    const OUT: usize;
    /// Parameters, frozen ones included.
    const PARAMS: usize;
    /// Trainable parameters: the values of the tensors that are not frozen, which have
    /// gradients and optimizer slots; [`PARAMS`](Self::PARAMS) when none is frozen.
    const TRAINABLE: usize;
    /// Non-trainable state (normalization statistics).
    const STATE: usize;
    /// Activation values per sample: every node's output and what its layer saves.
    const ACTIVATIONS: usize;
    /// Per-sample offset of the output node in the activation buffer.
    const OUTPUT_OFFSET: usize;
    /// Gradient values per sample: one per node output.
    const NODE_GRADS: usize;
    /// Per-sample offset of the output's gradient in the node-gradient buffer.
    const OUTPUT_GRAD_OFFSET: usize;
    /// Every parameter tensor, in buffer order.
    const TENSORS: &'static [NamedTensor];
    /// The tensors of [`TENSORS`](Self::TENSORS) that train, in the same order: the layout of
    /// the gradients and the optimizer's state.
    const TRAINABLE_TENSORS: &'static [NamedTensor];
    /// Every state tensor (BatchNorm's running statistics), in state-buffer order.
    const STATE_TENSORS: &'static [NamedTensor];
    /// The layers whose PyTorch module keeps a `num_batches_tracked` counter
    /// ([`Layer::BATCH_COUNTER`]), in declaration order.
    const BATCH_COUNTERS: &'static [&'static str];
    /// Every layer with its kind, in declaration order, then (for a model declared with a
    /// graph) `graph`, the wiring of its nodes.
    const LAYER_KINDS: &'static [LayerKind];
    /// The loss the model trains with.
    type Loss: Loss;
    /// What the input holds: `f32` features or `u32` token ids.
    type Input: InputValue;
    /// The token ids the input may hold, `0..VOCAB`, when it holds ids: the smallest
    /// vocabulary of the layers that read it, `u32` ids
    /// ([`TokenLayer::VOCAB`](crate::layers::TokenLayer::VOCAB)) or ids carried as `f32`
    /// whole numbers ([`Layer::IDS`](crate::layers::Layer::IDS), an `Embedding` fed by an
    /// `f32` input). 0 for `f32` features. A train step checks every id against it before
    /// any layer reads one ([`BatchError::TokenId`](super::BatchError::TokenId),
    /// [`BatchError::NotAnId`](super::BatchError::NotAnId)).
    const VOCAB: usize;
    /// The time steps of the sequences whose lengths the model's layers honour: the largest
    /// [`Layer::STEPS`](crate::layers::Layer::STEPS) of its layers, 0 (the default) when none
    /// does. A batch may come with lengths ([`Padded`](super::Padded)) from 1 to `STEPS` only
    /// when it is not 0.
    const STEPS: usize = 0;

    /// Scratch values per sample: the most any layer needs.
    const SCRATCH_PER_SAMPLE: usize;
    /// The matrix products of every layer, from which the GEMM workspace follows.
    const PRODUCTS: &'static [Product];
    /// The trainable parameters of the largest layer: the gradient buffer of a step that
    /// updates each layer as soon as its gradient is known.
    const MAX_LAYER_PARAMS: usize;

    /// Scratch one forward or backward call needs for `batch` samples.
    fn scratch_len(batch: usize) -> usize {
        Self::SCRATCH_PER_SAMPLE * batch
    }
    /// GEMM workspace one call needs for `batch` samples, for the threads of the current pool.
    fn gemm_len(batch: usize) -> usize {
        products_workspace_len(Self::PRODUCTS, batch, pool_threads())
    }

    /// The flat parameter buffer.
    fn params(&self) -> &[f32];
    /// The flat parameter buffer, writable.
    fn params_mut(&mut self) -> &mut [f32];
    /// The non-trainable state.
    fn state(&self) -> &[f32];
    /// Parameters (read) and state (written) together, for a forward pass.
    fn split_mut(&mut self) -> (&[f32], &mut [f32]);

    /// The forward pass over `batch` samples of `x`, writing `acts`.
    fn forward(
        ctx: &mut Ctx<'_>,
        params: &[f32],
        state: &mut [f32],
        x: &[Self::Input],
        acts: &mut [f32],
        batch: usize,
    );

    /// The backward pass: `node_grads` holds d loss / d output at the output's place; hands
    /// each layer's d loss / d params (of its trainable tensors) to `sink` (right after that
    /// layer's backward call, which has taken the gradient for the layer below from the
    /// layer's parameters) and writes d loss / d x into `dx`. A layer whose output gradient
    /// nothing needs (it trains nothing and nothing below it trains, and `dx` is skipped) is
    /// not called.
    fn backward(
        ctx: &mut Ctx<'_>,
        sink: &mut dyn GradSink,
        x: &[Self::Input],
        acts: &[f32],
        node_grads: &mut [f32],
        dx: Grad<'_>,
        batch: usize,
    );
}

/// The trainable tensors of model `M` as an optimizer's [`Layout`].
pub struct ModelTensors<M>(PhantomData<fn() -> M>);

impl<M> ModelTensors<M> {
    /// The layout of `M`'s parameters.
    pub const fn new() -> Self {
        ModelTensors(PhantomData)
    }
}

impl<M> Default for ModelTensors<M> {
    fn default() -> Self {
        Self::new()
    }
}

impl<M: Model> Layout for ModelTensors<M> {
    fn tensor_count(&self) -> usize {
        M::TRAINABLE_TENSORS.len()
    }
    fn tensor_range(&self, i: usize) -> Range<usize> {
        let t = &M::TRAINABLE_TENSORS[i];
        let at = t.grad.expect("a trainable tensor");
        at..at + t.tensor.len()
    }
    fn len(&self) -> usize {
        M::TRAINABLE
    }
    fn tensor_shape(&self, i: usize) -> Shape {
        Shape::of(M::TRAINABLE_TENSORS[i].tensor.shape)
    }
}

/// A read-only view of one layer's parameters, from a model's accessor (`model.fc1()`).
pub struct View<'a, L> {
    data: &'a [f32],
    layer: PhantomData<L>,
}

impl<'a, L> View<'a, L> {
    /// The view over a layer's parameter slice.
    #[doc(hidden)]
    pub fn new(data: &'a [f32]) -> Self {
        View {
            data,
            layer: PhantomData,
        }
    }
}

impl<'a, L: Layer> View<'a, L> {
    /// Tensor `name` (`weight`, `bias`, `gamma`, ...), if the layer has it.
    pub fn tensor(&self, name: &str) -> Option<&'a [f32]> {
        let mut offset = 0;
        for t in L::TENSORS {
            if t.name == name {
                return Some(&self.data[offset..offset + t.len()]);
            }
            offset += t.len();
        }
        None
    }

    /// The `weight` tensor (empty for a layer without one).
    pub fn weight(&self) -> &'a [f32] {
        self.tensor("weight").unwrap_or_default()
    }

    /// The `bias` tensor (empty for a layer without one).
    pub fn bias(&self) -> &'a [f32] {
        self.tensor("bias").unwrap_or_default()
    }

    /// All of the layer's parameters.
    pub fn all(&self) -> &'a [f32] {
        self.data
    }
}
