//! Layers with compile-time shapes: each one's forward and backward side by side, over
//! caller-owned buffers, allocation-free.
//!
//! Data is row-major: a batch of `batch` samples is `batch * IN` values, sample after sample;
//! images are NHWC, sequences channels last (`[time, channels]` per sample). A layer's
//! parameters are one contiguous slice of the model's flat parameter buffer, in the order of
//! its [`Layer::TENSORS`].

use crate::kernels::gemm::{pool_threads, products_workspace_len, Product};
use crate::lane::add_assign;
use crate::rng::Rng;

/// Training or inference: Dropout and BatchNorm behave differently.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Training: dropout drops, batch normalization uses batch statistics and updates its
    /// running ones.
    Train,
    /// Inference: dropout is the identity, batch normalization uses the running statistics.
    Eval,
}

/// How parameters are initialized.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Init {
    /// Keras' default for kernels: uniform in `±sqrt(6 / (fan_in + fan_out))`.
    GlorotUniform,
    /// Normal with standard deviation `sqrt(2 / fan_in)` (Keras `he_normal` truncates it at two
    /// standard deviations, as here).
    HeNormal,
    /// Uniform in `±sqrt(6 / fan_in)`.
    HeUniform,
    /// PyTorch's default for `Linear` and `Conv2d` weights and biases: uniform in
    /// `±1 / sqrt(fan_in)`.
    TorchDefault,
    /// Standard normal, `N(0, 1)`: PyTorch's default for `nn.Embedding`.
    StandardNormal,
    /// All zeros (Keras' default for biases).
    Zeros,
    /// All ones (normalization scales).
    Ones,
    /// Every value `f32::from_bits(bits)` (the bits, so that `Init` stays `Eq`): the initial
    /// value of a learnable parameter of `activation!`, such as PReLU's slope 0.25. Build it
    /// with [`Init::constant`].
    Constant(u32),
}

impl Init {
    /// Whether this initializer draws from a normal distribution ([`Init::HeNormal`],
    /// [`Init::StandardNormal`]).
    pub const fn draws_normal(self) -> bool {
        matches!(self, Init::HeNormal | Init::StandardNormal)
    }

    /// Every value `v`.
    ///
    /// ```
    /// use fusegraph_runtime::layers::Init;
    /// assert_eq!(Init::constant(0.25), Init::Constant(0.25f32.to_bits()));
    /// ```
    pub const fn constant(v: f32) -> Init {
        Init::Constant(v.to_bits())
    }
}

/// One named parameter tensor of a layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tensor {
    /// Name within the layer: `weight`, `bias`, `gamma`, `beta`...
    pub name: &'static str,
    /// Shape, in the layout the layer stores it (Dense `weight` is `[in, out]`, as Keras'
    /// kernel; Conv2D `weight` is `[kh, kw, in, out]`, HWIO; Conv1D `weight` is `[k, in, out]`).
    pub shape: &'static [usize],
    /// Fan-in and fan-out for initialization.
    pub fans: (usize, usize),
    /// The initializer used by `init` when the model does not choose another.
    pub init: Init,
}

impl Tensor {
    /// Number of values.
    pub const fn len(&self) -> usize {
        let mut n = 1;
        let mut i = 0;
        while i < self.shape.len() {
            n *= self.shape[i];
            i += 1;
        }
        n
    }

    /// `true` for a tensor without values.
    pub const fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// How PyTorch names and lays out one of a layer's tensors, for checkpoints that
/// `torch.nn.Module.load_state_dict` takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Torch {
    /// PyTorch's name for the tensor (`weight` for a normalization's `gamma`).
    pub name: &'static str,
    /// PyTorch's axes as axes of the stored shape: PyTorch's axis `i` is stored axis
    /// `axes[i]`. `[1, 0]` transposes a Dense weight (`[in, out]` to `[out, in]`),
    /// `[3, 2, 0, 1]` turns a Conv2d weight from HWIO into OIHW; empty for the same order.
    pub axes: &'static [usize],
}

/// PyTorch's size of its axis `k` of a tensor stored in `shape`, PyTorch's axes being the
/// stored `axes` ([`Torch::axes`]; empty for the same order).
pub const fn torch_dim(shape: &[usize], axes: &[usize], k: usize) -> usize {
    if axes.is_empty() {
        shape[k]
    } else {
        shape[axes[k]]
    }
}

/// The index in PyTorch's layout of the value at index `j` of a tensor stored in `shape`,
/// PyTorch's axes being the stored `axes` ([`Torch::axes`]; empty for the same order). The one
/// conversion between the two layouts: checkpoints and imports at run time, `static` weights
/// read from a PyTorch file in a constant. At most 8 axes.
///
/// ```
/// use fusegraph_runtime::layers::torch_index;
/// // A Dense weight stored [in = 3, out = 2] is PyTorch's [out, in]: stored (1, 0) is (0, 1).
/// assert_eq!(torch_index(&[3, 2], &[1, 0], 2), 1);
/// ```
pub const fn torch_index(shape: &[usize], axes: &[usize], j: usize) -> usize {
    if axes.is_empty() {
        return j;
    }
    // The stored coordinates of value `j`, last axis first.
    let mut coords = [0usize; 8];
    let (mut rest, mut a) = (j, shape.len());
    while a > 0 {
        a -= 1;
        coords[a] = rest % shape[a];
        rest /= shape[a];
    }
    let (mut index, mut stride, mut k) = (0, 1, axes.len());
    while k > 0 {
        k -= 1;
        index += coords[axes[k]] * stride;
        stride *= shape[axes[k]];
    }
    index
}

/// Where a gradient with respect to an input goes.
pub enum Grad<'a> {
    /// Not needed (the first layer, unless an input gradient is asked for).
    Skip,
    /// Overwrite the slice.
    Set(&'a mut [f32]),
    /// Add to the slice (an input consumed by several nodes of a graph).
    Add(&'a mut [f32]),
}

impl<'a> Grad<'a> {
    /// The slice and whether the gradient adds to it (`true`, [`Grad::Add`]) or overwrites it;
    /// `None` for [`Grad::Skip`].
    pub fn destination(self) -> Option<(&'a mut [f32], bool)> {
        match self {
            Grad::Skip => None,
            Grad::Set(d) => Some((d, false)),
            Grad::Add(d) => Some((d, true)),
        }
    }

    /// The slice to add the gradient into, zeroed first for [`Grad::Set`]; `None` for
    /// [`Grad::Skip`].
    pub fn accumulator(self) -> Option<&'a mut [f32]> {
        match self {
            Grad::Skip => None,
            Grad::Set(d) => {
                d.fill(0.0);
                Some(d)
            }
            Grad::Add(d) => Some(d),
        }
    }

    /// The same destination, borrowed again for one more call.
    pub fn reborrow(&mut self) -> Grad<'_> {
        match self {
            Grad::Skip => Grad::Skip,
            Grad::Set(d) => Grad::Set(d),
            Grad::Add(d) => Grad::Add(d),
        }
    }

    /// The same destination for a later contribution, which must add to the first.
    pub fn adding(&mut self) -> Grad<'_> {
        match self {
            Grad::Skip => Grad::Skip,
            Grad::Set(d) | Grad::Add(d) => Grad::Add(d),
        }
    }

    /// Writes (or adds) `src` into the destination.
    pub fn give(self, src: &[f32]) {
        match self {
            Grad::Skip => {}
            Grad::Set(d) => d.copy_from_slice(src),
            Grad::Add(d) => add_assign(d, src),
        }
    }
}

/// Which of a layer's tensors are frozen (`requires_grad=False`): bit `i` stands for the
/// layer's [`TENSORS`](Layer::TENSORS)`[i]`. A frozen tensor gets no gradient: a layer's
/// [`Backward::dparams`] holds the gradients of its other tensors only, one after the other
/// in the order of `TENSORS`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Frozen(pub u64);

impl Frozen {
    /// Every tensor trains.
    pub const NONE: Frozen = Frozen(0);
    /// The most tensors a layer may have for some of them to be frozen.
    pub const MAX_TENSORS: usize = 64;

    /// Every one of `count` tensors frozen.
    pub const fn all(count: usize) -> Frozen {
        if count >= Self::MAX_TENSORS {
            Frozen(u64::MAX)
        } else {
            Frozen((1u64 << count) - 1)
        }
    }

    /// Whether tensor `i` is frozen.
    pub const fn is_frozen(self, i: usize) -> bool {
        i < Self::MAX_TENSORS && self.0 >> i & 1 == 1
    }

    /// Whether some tensor is frozen.
    pub const fn any(self) -> bool {
        self.0 != 0
    }

    /// The values of the gradients of `tensors` that are not frozen: the length of
    /// [`Backward::dparams`].
    pub const fn trainable_len(self, tensors: &[Tensor]) -> usize {
        let (mut n, mut i) = (0, 0);
        while i < tensors.len() {
            if !self.is_frozen(i) {
                n += tensors[i].len();
            }
            i += 1;
        }
        n
    }

    /// Whether each of the first `count` tensors is frozen (`true` for none): whether the
    /// layers or projections that hold them need no gradient.
    ///
    /// ```
    /// use fusegraph_runtime::layers::Frozen;
    /// assert!(Frozen(0b1011).freezes_first(2));
    /// assert!(!Frozen(0b1011).freezes_first(3));
    /// ```
    pub const fn freezes_first(self, count: usize) -> bool {
        self.part(0, count).0 == Self::all(count).0
    }

    /// The values of the gradients of tensors of `lens` values that are not frozen:
    /// [`trainable_len`](Self::trainable_len) for sizes known at run time.
    pub fn trainable_values(self, lens: &[usize]) -> usize {
        let trainable = lens.iter().enumerate().filter(|&(i, _)| !self.is_frozen(i));
        trainable.map(|(_, &n)| n).sum()
    }

    /// The mask of the `count` tensors from `first` on, as a part of a layer that holds them
    /// sees it (its tensor 0 is the layer's tensor `first`): a stacked recurrent layer's, an
    /// attention projection's.
    ///
    /// ```
    /// use fusegraph_runtime::layers::Frozen;
    /// assert_eq!(Frozen(0b1101_0110).part(4, 2), Frozen(0b01));
    /// ```
    pub const fn part(self, first: usize, count: usize) -> Frozen {
        let shifted = if first >= Self::MAX_TENSORS {
            0
        } else {
            self.0 >> first
        };
        Frozen(shifted & Self::all(count).0)
    }

    /// The gradient of each of `N` tensors of `lens` values, cut from `dparams` (the
    /// trainable tensors' gradients, one after the other): `None` for a frozen tensor.
    ///
    /// ```
    /// use fusegraph_runtime::layers::Frozen;
    /// let mut dparams = [0.0; 3]; // weight [2, 3] frozen, bias [3] trains
    /// let [dw, db] = Frozen(0b01).split(&mut dparams, [6, 3]);
    /// assert!(dw.is_none());
    /// assert_eq!(db.map(|d| d.len()), Some(3));
    /// ```
    ///
    /// # Panics
    /// If `dparams` is not as long as the trainable tensors together.
    pub fn split<const N: usize>(
        self,
        dparams: &mut [f32],
        lens: [usize; N],
    ) -> [Option<&mut [f32]>; N] {
        let mut rest = dparams;
        let grads = core::array::from_fn(|i| {
            if self.is_frozen(i) {
                return None;
            }
            let (head, tail) = core::mem::take(&mut rest).split_at_mut(lens[i]);
            rest = tail;
            Some(head)
        });
        assert!(
            rest.is_empty(),
            "dparams holds {} values more than the trainable tensors",
            rest.len()
        );
        grads
    }
}

/// Memory and randomness one forward or backward call may use.
pub struct Ctx<'a> {
    /// Workspace for [`kernels::gemm`](crate::kernels::gemm), at least the largest
    /// [`Layer::gemm_len`] of the model.
    pub gemm: &'a mut [f32],
    /// Per-call scratch, at least the largest [`Layer::scratch_len`] of the model.
    pub scratch: &'a mut [f32],
    /// The random stream of this step: each layer that draws (dropout) takes one key from
    /// it, in layer order, and keys each sample's draws by that and the sample's index.
    pub rng: &'a mut Rng,
    /// The index of the call's first sample in the global batch (0 unless the batch is a
    /// shard of a larger one: see [`distributed::Shards`](crate::distributed::Shards)), so that a
    /// sample's dropout mask does not depend on how the global batch was cut.
    pub first_sample: usize,
    /// Training or inference.
    pub mode: Mode,
    /// The real steps of each of the call's samples, the rest padding ([`Lengths::FULL`]
    /// when every step is real): the layers whose [`Layer::STEPS`] is not 0 honour it.
    pub lengths: Lengths<'a>,
}

/// The buffers of one [`Layer::forward`] call, each sized from the layer's constants and
/// `batch`. The input holds `f32` values, or (`X = u32`) the token ids of a model's input that
/// a [`TokenLayer`] reads.
pub struct Forward<'a, X = f32> {
    /// The layer's parameters, [`PARAMS`](Layer::PARAMS) values in the order of its
    /// [`TENSORS`](Layer::TENSORS).
    pub params: &'a [f32],
    /// The layer's non-trainable state, [`STATE`](Layer::STATE) values, updated in training.
    pub state: &'a mut [f32],
    /// The input, `batch * IN` values (or ids).
    pub x: &'a [X],
    /// The output, `batch * OUT` values, overwritten.
    pub y: &'a mut [f32],
    /// What the call saves for [`Layer::backward`], `batch * SAVED` values, overwritten.
    pub saved: &'a mut [f32],
    /// The number of samples.
    pub batch: usize,
}

/// The buffers of one [`Layer::backward`] call: what [`Layer::forward`] saw and wrote, the
/// output gradient and where the gradients go. The input is what [`Forward`]'s was: `f32`
/// values, or (`X = u32`) token ids, which have no gradient.
pub struct Backward<'a, X = f32> {
    /// The layer's parameters, as `forward` saw them.
    pub params: &'a [f32],
    /// The input `forward` saw, `batch * IN` values (or ids).
    pub x: &'a [X],
    /// The output `forward` wrote, `batch * OUT` values.
    pub y: &'a [f32],
    /// What `forward` saved, `batch * SAVED` values.
    pub saved: &'a [f32],
    /// d loss / d y, `batch * OUT` values, which the call may overwrite.
    pub dy: &'a mut [f32],
    /// Where d loss / d x goes (`batch * IN` values, unless skipped).
    pub dx: Grad<'a>,
    /// Which of the layer's tensors are frozen: they get no gradient, and with all of them
    /// frozen the call computes `dx` only. [`Frozen::NONE`] unless the layer's
    /// [`FREEZABLE`](Layer::FREEZABLE).
    pub frozen: Frozen,
    /// d loss / d params of the tensors not `frozen`, one after the other in the order of
    /// [`TENSORS`](Layer::TENSORS) ([`PARAMS`](Layer::PARAMS) values when none is),
    /// overwritten.
    pub dparams: &'a mut [f32],
    /// The number of samples.
    pub batch: usize,
}

/// A layer type. Shapes are associated constants computed from const generics, so a model's
/// buffer sizes are constants.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a layer",
    label = "a model's field is a layer, such as `Dense<784, 128, Relu>`",
    note = "an activation on its own is the layer `Act<A, N>` over `N` values per sample, such as `Act<Tanh, 16>` after a layer of 16 outputs"
)]
pub trait Layer {
    /// Input values per sample.
    const IN: usize;
    /// Output values per sample.
    const OUT: usize;
    /// Trainable parameters: the sum of the lengths of [`TENSORS`](Self::TENSORS).
    const PARAMS: usize;
    /// Non-trainable state (BatchNorm's running mean and variance).
    const STATE: usize;
    /// Values per sample that `forward` saves for `backward`, besides the input and output
    /// (pre-activations, pooling arg-max, dropout mask, normalization statistics).
    const SAVED: usize;
    /// The parameter tensors, in storage order.
    const TENSORS: &'static [Tensor];
    /// PyTorch's name and layout of each of [`TENSORS`](Self::TENSORS), in the same order;
    /// empty (the default) when they are the layer's own.
    const TORCH: &'static [Torch] = &[];
    /// The non-trainable state as tensors, in storage order, named as PyTorch names them
    /// (BatchNorm's `running_mean` and `running_var`); their lengths add up to
    /// [`STATE`](Self::STATE). None by default.
    const STATE_TENSORS: &'static [Tensor] = &[];
    /// Whether [`backward`](Self::backward) honours [`Backward::frozen`]: a model may then
    /// freeze any of the layer's tensors (`#[frozen]` in `#[fusegraph::model]`). Every layer of
    /// this crate does; `false` by default, so that a layer written before freezing existed is
    /// never handed a mask it would ignore.
    const FREEZABLE: bool = false;
    /// The time steps of the sequences whose lengths the layer honours ([`Ctx::lengths`]): a
    /// [`Gru`], [`Lstm`], [`CausalSelfAttention`] or [`MeanOverTime`] over `T` steps says `T`;
    /// 0 (the default) for a layer that ignores lengths. A model takes lengths only if one of
    /// its layers honours them, and a length of at most its largest `STEPS`.
    const STEPS: usize = 0;
    /// The vocabulary of the token ids the layer reads from its `f32` input, which must then
    /// hold whole numbers from 0 to `IDS - 1` (an [`Embedding`] over `f32` values says its
    /// `VOCAB`); 0 (the default) for a layer that reads values. A model whose `f32` input goes
    /// to such a layer checks the ids before any layer sees them
    /// (the model's `VOCAB`).
    const IDS: usize = 0;
    /// Whether the equivalent PyTorch module keeps an integer `num_batches_tracked` beside its
    /// state (BatchNorm does); `false` by default.
    const BATCH_COUNTER: bool = false;

    /// Writes what the layer computes, with every option that changes it (sizes, activation,
    /// stride, padding, bias): `Dense<4, 16, tanh, bias: true>`. A checkpoint records it for
    /// each layer and loads only into a model whose layers are the same.
    fn describe(out: &mut dyn core::fmt::Write) -> core::fmt::Result;

    /// Scratch values per sample one call needs (im2col patches); none by default.
    const SCRATCH_PER_SAMPLE: usize = 0;
    /// The matrix products a call computes, from which the GEMM workspace follows; none by
    /// default.
    const PRODUCTS: &'static [Product] = &[];

    /// Scratch values one call needs for `batch` samples.
    fn scratch_len(batch: usize) -> usize {
        Self::SCRATCH_PER_SAMPLE * batch
    }
    /// GEMM workspace one call needs for `batch` samples, for the threads of the current pool.
    fn gemm_len(batch: usize) -> usize {
        products_workspace_len(Self::PRODUCTS, batch, pool_threads())
    }
    /// Initial state (running variance 1, mean 0); parameters are initialized by the model
    /// from [`TENSORS`](Self::TENSORS). Nothing by default.
    fn init_state(state: &mut [f32]) {
        let _ = state;
    }
    /// Adjusts parameters just drawn from the initializers of [`TENSORS`](Self::TENSORS)
    /// (an [`Embedding`] zeroes its padding row). Nothing by default.
    fn finish_init(params: &mut [f32]) {
        let _ = params;
    }
    /// `y = layer(x)` for the `io.batch` samples of `io.x`; writes `io.saved` for `backward`,
    /// and in training updates `io.state`.
    fn forward(ctx: &mut Ctx<'_>, io: Forward<'_>);
    /// Given `io.dy` (d loss / d y, which this call may overwrite), writes d loss / d params
    /// into `io.dparams` (overwriting it) and d loss / d x into `io.dx`. `io.x`, `io.y` and
    /// `io.saved` are what `forward` saw and wrote.
    fn backward(ctx: &mut Ctx<'_>, io: Backward<'_>);
    /// [`forward`](Self::forward) as a call of its own, never inlined, which is what a model of
    /// `#[fusegraph::model]` calls for each layer: its passes then grow by one call a layer, and
    /// layers of one type share one compiled body, so the time the compiler's optimizer spends
    /// on a model grows linearly with its depth. (Inlined, a model of 256 layers held every
    /// layer's kernels in one function.) Not meant to be overridden.
    #[inline(never)]
    fn forward_out_of_line(ctx: &mut Ctx<'_>, io: Forward<'_>) {
        Self::forward(ctx, io);
    }
    /// [`backward`](Self::backward) as a call of its own, for the reasons of
    /// [`forward_out_of_line`](Self::forward_out_of_line).
    #[inline(never)]
    fn backward_out_of_line(ctx: &mut Ctx<'_>, io: Backward<'_>) {
        Self::backward(ctx, io);
    }
}

mod buffers;
#[cfg(test)]
mod gradcheck;
mod lengths;

pub mod activation;
pub mod attention;
pub mod conv;
pub mod conv1d;
pub mod dense;
pub mod dropout;
pub mod embedding;
pub mod graph;
pub mod init;
pub mod norm;
pub(crate) mod per_feature;
pub mod per_position;
pub mod pool;
pub mod reshape;
pub mod rnn;
pub mod token;

pub use activation::{
    Act, Activation, Elementwise, Elu, Gelu, Identity, LeakyRelu, Relu, Sigmoid, Softmax, Swish,
    Tanh,
};
pub use attention::{attention_backward, attention_forward, AttentionDims, CausalSelfAttention};
pub use conv::{
    conv_backward, conv_forward, conv_gemm_len, conv_scratch_len, Conv2d, ConvDims, Padding, Same,
    Valid,
};
pub use conv1d::Conv1d;
pub use dense::{dense_backward, dense_forward, dense_gemm_len, Dense, DenseDims};
pub use dropout::Dropout;
pub use embedding::{
    embedding_backward, embedding_forward, positional_backward, positional_forward, Embedding,
    EmbeddingDims, PositionalDims, PositionalEmbedding, NO_PADDING,
};
pub use init::{init_tensor, init_without_normal};
pub use lengths::Lengths;
pub use norm::{layer_norm_backward, layer_norm_forward, BatchNorm, LayerNorm};
pub use per_position::PerPosition;
pub use pool::{
    mean_over_time_backward, mean_over_time_forward, AvgPool2d, MaxPool2d, MeanOverTime,
};
pub use reshape::Flatten;
pub use rnn::{
    rnn_backward, rnn_forward, rnn_gemm_len, rnn_scratch_len, BiGru, BiLstm, Bidirectional,
    CellKind, Gru, GruCell, Last, Lstm, LstmCell, Recurrent, RecurrentCell, RnnDims, RnnOutput,
    Sequence,
};
pub use token::TokenLayer;
