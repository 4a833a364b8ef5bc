//! The recurrent layer types: [`Recurrent`] over a [`RecurrentCell`] and an [`RnnOutput`], with
//! its aliases [`Gru`] and [`Lstm`] and their bidirectional twins [`BiGru`] and [`BiLstm`],
//! whose sizes and PyTorch tensor names are constants.

use super::{rnn_backward, rnn_forward, rnn_products, rnn_scratch_len, CellKind, RnnDims};
use crate::kernels::gemm::Product;
use crate::layers::{buffers, Backward, Ctx, Forward, Init, Layer, Tensor, Torch};
use core::marker::PhantomData;

/// A recurrent cell a [`Recurrent`] layer runs, in one direction ([`GruCell`], [`LstmCell`]) or
/// both ([`Bidirectional`]).
pub trait RecurrentCell {
    /// The cell.
    const KIND: CellKind;
    /// PyTorch's module name, `"GRU"` or `"LSTM"`.
    const NAME: &'static str;
    /// Whether each layer runs in both directions (PyTorch's `bidirectional=True`).
    const BIDIRECTIONAL: bool;
}

/// Cell `C` run in both directions (PyTorch's `bidirectional=True`): the cell of [`BiGru`]
/// and [`BiLstm`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bidirectional<C>(PhantomData<C>);

impl<C: RecurrentCell> RecurrentCell for Bidirectional<C> {
    const KIND: CellKind = C::KIND;
    const NAME: &'static str = C::NAME;
    const BIDIRECTIONAL: bool = true;
}

/// The cell of [`Gru`]: PyTorch's `nn.GRU`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GruCell;

impl RecurrentCell for GruCell {
    const KIND: CellKind = CellKind::Gru;
    const NAME: &'static str = "GRU";
    const BIDIRECTIONAL: bool = false;
}

/// The cell of [`Lstm`]: PyTorch's `nn.LSTM`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LstmCell;

impl RecurrentCell for LstmCell {
    const KIND: CellKind = CellKind::Lstm;
    const NAME: &'static str = "LSTM";
    const BIDIRECTIONAL: bool = false;
}

/// What a recurrent layer outputs: [`Last`] or [`Sequence`].
pub trait RnnOutput {
    /// `true` for [`Sequence`].
    const SEQUENCE: bool;
}

/// The top layer's hidden state after the last step, `[H]` per sample (PyTorch's `h_n[-1]`,
/// which is `out[:, -1]` without lengths); with lengths, after each sample's own last step.
/// Bidirectional, `[2H]`: the forward direction's after the last step and the reverse
/// direction's after step 0 (`concat(h_n[-2], h_n[-1])`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Last;

impl RnnOutput for Last {
    const SEQUENCE: bool = false;
}

/// The top layer's hidden state at every step, `[T, H]` per sample (PyTorch's `out` with
/// `batch_first=True`); bidirectional, `[T, 2H]`, the forward direction's state first. With
/// lengths, exactly 0 at padded steps (`pad_packed_sequence`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sequence;

impl RnnOutput for Sequence {
    const SEQUENCE: bool = true;
}

/// The most stacked layers a [`Recurrent`] type takes (the names of its tensors are constants).
pub const MAX_RNN_LAYERS: usize = 8;

/// For each layer `l`, the forward direction's `weight_ih_l{l}`, `weight_hh_l{l}`,
/// `bias_ih_l{l}` and `bias_hh_l{l}`, then the reverse direction's, suffixed `_reverse`.
const NAMES: [[&str; 8]; MAX_RNN_LAYERS] = [
    [
        "weight_ih_l0",
        "weight_hh_l0",
        "bias_ih_l0",
        "bias_hh_l0",
        "weight_ih_l0_reverse",
        "weight_hh_l0_reverse",
        "bias_ih_l0_reverse",
        "bias_hh_l0_reverse",
    ],
    [
        "weight_ih_l1",
        "weight_hh_l1",
        "bias_ih_l1",
        "bias_hh_l1",
        "weight_ih_l1_reverse",
        "weight_hh_l1_reverse",
        "bias_ih_l1_reverse",
        "bias_hh_l1_reverse",
    ],
    [
        "weight_ih_l2",
        "weight_hh_l2",
        "bias_ih_l2",
        "bias_hh_l2",
        "weight_ih_l2_reverse",
        "weight_hh_l2_reverse",
        "bias_ih_l2_reverse",
        "bias_hh_l2_reverse",
    ],
    [
        "weight_ih_l3",
        "weight_hh_l3",
        "bias_ih_l3",
        "bias_hh_l3",
        "weight_ih_l3_reverse",
        "weight_hh_l3_reverse",
        "bias_ih_l3_reverse",
        "bias_hh_l3_reverse",
    ],
    [
        "weight_ih_l4",
        "weight_hh_l4",
        "bias_ih_l4",
        "bias_hh_l4",
        "weight_ih_l4_reverse",
        "weight_hh_l4_reverse",
        "bias_ih_l4_reverse",
        "bias_hh_l4_reverse",
    ],
    [
        "weight_ih_l5",
        "weight_hh_l5",
        "bias_ih_l5",
        "bias_hh_l5",
        "weight_ih_l5_reverse",
        "weight_hh_l5_reverse",
        "bias_ih_l5_reverse",
        "bias_hh_l5_reverse",
    ],
    [
        "weight_ih_l6",
        "weight_hh_l6",
        "bias_ih_l6",
        "bias_hh_l6",
        "weight_ih_l6_reverse",
        "weight_hh_l6_reverse",
        "bias_ih_l6_reverse",
        "bias_hh_l6_reverse",
    ],
    [
        "weight_ih_l7",
        "weight_hh_l7",
        "bias_ih_l7",
        "bias_hh_l7",
        "weight_ih_l7_reverse",
        "weight_hh_l7_reverse",
        "bias_ih_l7_reverse",
        "bias_hh_l7_reverse",
    ],
];

/// The most tensors a [`Recurrent`] type has: 4 per direction of each of [`MAX_RNN_LAYERS`].
const MAX_TENSORS: usize = 8 * MAX_RNN_LAYERS;

/// The shapes of one direction's four tensors, in the order of [`NAMES`].
type LayerShapes = [&'static [usize]; 4];

/// PyTorch's name of tensor `i` of a stack of layers of `directions` directions.
const fn tensor_name(i: usize, directions: usize) -> &'static str {
    let per_layer = 4 * directions;
    NAMES[i / per_layer][i % per_layer]
}

/// The tensors of [`MAX_RNN_LAYERS`] layers of `directions` directions (the first
/// `4 * directions * layers` are the layers'): the first layer's shapes `first`, the others'
/// `above`, all initialized as PyTorch does, uniform in `±1/sqrt(hidden)`.
const fn rnn_tensors(
    (first, above): (LayerShapes, LayerShapes),
    hidden: usize,
    gate_rows: usize,
    directions: usize,
) -> [Tensor; MAX_TENSORS] {
    let mut all = [Tensor {
        name: "",
        shape: &[],
        fans: (0, 0),
        init: Init::Zeros,
    }; MAX_TENSORS];
    let mut i = 0;
    while i < 4 * directions * MAX_RNN_LAYERS {
        let shapes = if i < 4 * directions { first } else { above };
        all[i] = Tensor {
            name: tensor_name(i, directions),
            shape: shapes[i % 4],
            // PyTorch bounds every tensor of a recurrent layer by 1/sqrt(hidden).
            fans: (hidden, gate_rows),
            init: Init::TorchDefault,
        };
        i += 1;
    }
    all
}

/// PyTorch's names of the tensors of [`MAX_RNN_LAYERS`] layers of `directions` directions, in
/// PyTorch's layout.
const fn rnn_torch_names(directions: usize) -> [Torch; MAX_TENSORS] {
    let mut all = [Torch {
        name: "",
        axes: &[],
    }; MAX_TENSORS];
    let mut i = 0;
    while i < 4 * directions * MAX_RNN_LAYERS {
        all[i].name = tensor_name(i, directions);
        i += 1;
    }
    all
}

/// The torch names of every layer of one direction, shared by every such [`Recurrent`] type.
const TORCH_NAMES: &[Torch; MAX_TENSORS] = &rnn_torch_names(1);

/// The torch names of every bidirectional layer, shared by every such [`Recurrent`] type.
const BIDIRECTIONAL_TORCH_NAMES: &[Torch; MAX_TENSORS] = &rnn_torch_names(2);

/// A stack of `LAYERS` recurrent layers of cell `C` ([`GruCell`] or [`LstmCell`], or either in
/// both directions, [`Bidirectional`]) over sequences of `T` steps of `IN` features, with `H`
/// hidden units, outputting `O` ([`Last`] or [`Sequence`]): PyTorch's `nn.GRU` /
/// `nn.LSTM(IN, H, LAYERS, batch_first=True, bidirectional=...)` with zero initial states. Use
/// it through [`Gru`], [`Lstm`], [`BiGru`] and [`BiLstm`].
///
/// Input `[T, IN]` per sample; output `[D*H]` or `[T, D*H]` (`D` = 2 directions for
/// [`Bidirectional`], else 1). Parameters, per layer `l` in order: `weight_ih_l{l}`
/// `[G*H, in_l]`, `weight_hh_l{l}` `[G*H, H]`, `bias_ih_l{l}`, `bias_hh_l{l}` `[G*H]`, then for
/// a bidirectional layer the same four suffixed `_reverse` (`in_0 = IN`, `in_l = D*H` above;
/// `G` = 3 or 4 gates in PyTorch's row blocks), named and laid out as PyTorch's (a checkpoint
/// loads into the PyTorch module), each initialized as PyTorch does, uniform in `±1/sqrt(H)`
/// ([`Init::TorchDefault`] over fan-in `H`).
///
/// The layer honours the lengths of a padded batch ([`Layer::STEPS`] is `T`; see
/// [`Lengths`](crate::layers::Lengths)) as PyTorch's `pack_padded_sequence` does: each sample
/// runs over its own steps only, the output is 0 at padded steps and [`Last`] is the state
/// after each sample's last step.
///
/// Forward and backward are [`rnn_forward`] and [`rnn_backward`] with [`DIMS`](Self::DIMS):
/// the input projections of every step in one GEMM, one GEMM of `batch` rows per step, full
/// backpropagation through time. [`SAVED`](Layer::SAVED) holds the gates, cell states and
/// hidden states of every step and layer.
#[derive(Clone, Copy, Default)]
pub struct Recurrent<
    C: RecurrentCell,
    const T: usize,
    const IN: usize,
    const H: usize,
    const LAYERS: usize,
    O: RnnOutput,
>(PhantomData<fn() -> (C, O)>);

/// PyTorch's `nn.GRU(IN, H, LAYERS, batch_first=True)` over `T` steps: gates `r, z, n`,
/// `r = σ(W_ir x + b_ir + W_hr h + b_hr)`, `z = σ(W_iz x + b_iz + W_hz h + b_hz)`,
/// `n = tanh(W_in x + b_in + r * (W_hn h + b_hn))`, `h' = (1 - z) * n + z * h`, `h_0 = 0`.
/// The output is the last hidden state ([`Last`], the default) or every one ([`Sequence`]).
/// See [`Recurrent`] for the parameters, [`BiGru`] for both directions.
///
/// ```
/// use fusegraph_runtime::layers::{Ctx, Forward, Gru, Layer, Mode, Sequence};
/// use fusegraph_runtime::rng::{Rng, Seed};
///
/// type G = Gru<3, 2, 4>; // 3 steps of 2 features, 4 hidden units
/// assert_eq!((G::IN, G::OUT, G::PARAMS), (6, 4, 12 * 2 + 12 * 4 + 2 * 12));
/// assert_eq!(G::TENSORS[1].name, "weight_hh_l0");
/// assert_eq!(G::TENSORS[1].shape, &[12, 4]);
/// assert_eq!(<Gru<3, 2, 4, 2, Sequence>>::OUT, 12);
///
/// // With zero weights every gate is σ(0) = 1/2 and n = 0: h halves at every step.
/// let params = vec![0.0; G::PARAMS];
/// let x = [1.0; 6];
/// let (mut y, mut saved) = ([f32::NAN; 4], vec![0.0; G::SAVED]);
/// let (mut gemm, mut scratch) = (vec![0.0; G::gemm_len(1)], vec![0.0; G::scratch_len(1)]);
/// let mut rng = Rng::new(Seed(0));
/// let mut ctx = Ctx { gemm: &mut gemm, scratch: &mut scratch, rng: &mut rng, first_sample: 0, mode: Mode::Eval, lengths: fusegraph_runtime::layers::Lengths::FULL };
/// let io = Forward { params: &params, state: &mut [], x: &x, y: &mut y, saved: &mut saved, batch: 1 };
/// G::forward(&mut ctx, io);
/// assert_eq!(y, [0.0; 4]);
/// ```
pub type Gru<const T: usize, const IN: usize, const H: usize, const LAYERS: usize = 1, O = Last> =
    Recurrent<GruCell, T, IN, H, LAYERS, O>;

/// PyTorch's `nn.LSTM(IN, H, LAYERS, batch_first=True)` over `T` steps: gates `i, f, g, o`,
/// `i = σ(W_ii x + b_ii + W_hi h + b_hi)` and likewise `f`, `o`, `g` with `tanh`;
/// `c' = f * c + i * g`, `h' = o * tanh(c')`, `h_0 = c_0 = 0`. The output is the last hidden
/// state ([`Last`], the default) or every one ([`Sequence`]). See [`Recurrent`] for the
/// parameters, [`BiLstm`] for both directions.
pub type Lstm<const T: usize, const IN: usize, const H: usize, const LAYERS: usize = 1, O = Last> =
    Recurrent<LstmCell, T, IN, H, LAYERS, O>;

/// PyTorch's `nn.GRU(IN, H, LAYERS, batch_first=True, bidirectional=True)` over `T` steps: each
/// layer runs a [`Gru`] forward and another, with its own tensors (`*_reverse`), from the last
/// step to the first; their hidden states side by side, forward first, are the layer's output
/// (`[T, 2H]`) and the next layer's input. [`Last`] (the default) is `[2H]`, the forward
/// direction's state after the last step and the reverse direction's after step 0
/// (`concat(h_n[-2], h_n[-1])`); [`Sequence`] is `[T, 2H]`.
///
/// With lengths (a padded batch's, in [`Ctx::lengths`]) each sample
/// is packed as by `pack_padded_sequence`: the reverse direction starts at the sample's last
/// valid step, and padded steps output 0.
///
/// ```
/// use fusegraph_runtime::layers::{BiGru, Ctx, Forward, Layer, Lengths, Mode};
/// use fusegraph_runtime::rng::{Rng, Seed};
///
/// type G = BiGru<3, 2, 4>; // 3 steps of 2 features, 4 hidden units each way
/// assert_eq!((G::IN, G::OUT, G::STEPS), (6, 8, 3));
/// assert_eq!(G::TENSORS[4].name, "weight_ih_l0_reverse");
///
/// // Two samples: 3 real steps, and 1 real step followed by padding that changes nothing.
/// let mut params = vec![0.0; G::PARAMS];
/// params.iter_mut().enumerate().for_each(|(i, p)| *p = ((i % 7) as f32 - 3.0) / 10.0);
/// let lengths = [3, 1];
/// let forward = |x: &[f32]| {
///     let (mut y, mut saved) = (vec![0.0; 2 * G::OUT], vec![0.0; 2 * G::SAVED]);
///     let mut gemm = vec![0.0; G::gemm_len(2)];
///     let mut scratch = vec![0.0; G::scratch_len(2)];
///     let mut rng = Rng::new(Seed(0));
///     let mut ctx = Ctx { gemm: &mut gemm, scratch: &mut scratch, rng: &mut rng,
///         first_sample: 0, mode: Mode::Eval, lengths: Lengths::new(&lengths) };
///     let io = Forward { params: &params, state: &mut [], x, y: &mut y, saved: &mut saved, batch: 2 };
///     G::forward(&mut ctx, io);
///     y
/// };
/// let padded = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, /* sample 2 */ 0.5, -0.5, 9.0, 9.0, 9.0, 9.0];
/// let mut other = padded;
/// other[8..].copy_from_slice(&[-7.0, 3.0, 1.0, 2.0]);
/// assert_eq!(forward(&padded), forward(&other));
/// // A sample of one step: both directions read that step alone, from zero states.
/// let y = forward(&padded);
/// assert_eq!(y[8..12].iter().map(|v| v.abs()).sum::<f32>() > 0.0, true);
/// ```
pub type BiGru<const T: usize, const IN: usize, const H: usize, const LAYERS: usize = 1, O = Last> =
    Recurrent<Bidirectional<GruCell>, T, IN, H, LAYERS, O>;

/// PyTorch's `nn.LSTM(IN, H, LAYERS, batch_first=True, bidirectional=True)` over `T` steps: as
/// [`BiGru`], with [`Lstm`]'s cell in each direction.
pub type BiLstm<
    const T: usize,
    const IN: usize,
    const H: usize,
    const LAYERS: usize = 1,
    O = Last,
> = Recurrent<Bidirectional<LstmCell>, T, IN, H, LAYERS, O>;

impl<
        C: RecurrentCell,
        const T: usize,
        const IN: usize,
        const H: usize,
        const LAYERS: usize,
        O: RnnOutput,
    > Recurrent<C, T, IN, H, LAYERS, O>
{
    /// The sizes, for [`rnn_forward`] and [`rnn_backward`].
    pub const DIMS: RnnDims = {
        assert!(
            LAYERS >= 1 && LAYERS <= MAX_RNN_LAYERS,
            "Gru / Lstm<T, IN, H, LAYERS>: LAYERS stacks 1 to 8 layers (MAX_RNN_LAYERS)"
        );
        let dims = RnnDims {
            cell: C::KIND,
            steps: T,
            inputs: IN,
            hidden: H,
            layers: LAYERS,
            sequence: O::SEQUENCE,
            bidirectional: C::BIDIRECTIONAL,
        };
        dims.check();
        dims
    };
    /// Rows of each weight, `G * H`.
    const G: usize = Self::DIMS.gate_rows();
    /// The shape of the first layer's `weight_ih`, `[G*H, IN]`.
    const SHAPE_IH: &'static [usize] = &[Self::G, IN];
    /// The shape of `weight_hh`, `[G*H, H]`.
    const SHAPE_HH: &'static [usize] = &[Self::G, H];
    /// The shape of the upper layers' `weight_ih`, `[G*H, D*H]`.
    const SHAPE_IH_ABOVE: &'static [usize] = &[Self::G, Self::DIMS.layer_outputs()];
    /// The shape of a bias, `[G*H]`.
    const SHAPE_BIAS: &'static [usize] = &[Self::G];
    /// The tensors of every possible layer, of which the first `4 * D * LAYERS` are this
    /// type's.
    const ALL_TENSORS: &'static [Tensor; MAX_TENSORS] = &rnn_tensors(
        (
            [
                Self::SHAPE_IH,
                Self::SHAPE_HH,
                Self::SHAPE_BIAS,
                Self::SHAPE_BIAS,
            ],
            [
                Self::SHAPE_IH_ABOVE,
                Self::SHAPE_HH,
                Self::SHAPE_BIAS,
                Self::SHAPE_BIAS,
            ],
        ),
        H,
        Self::G,
        Self::DIMS.directions(),
    );
    /// This type's tensors: 4 per direction of each layer.
    const TENSOR_COUNT: usize = Self::DIMS.layer_tensors() * LAYERS;

    /// The layer (it holds no data: parameters live in the model's flat buffer).
    pub const fn new() -> Self {
        Recurrent(PhantomData)
    }
}

impl<
        C: RecurrentCell,
        const T: usize,
        const IN: usize,
        const H: usize,
        const LAYERS: usize,
        O: RnnOutput,
    > core::fmt::Debug for Recurrent<C, T, IN, H, LAYERS, O>
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        <Self as Layer>::describe(f)
    }
}

impl<
        C: RecurrentCell,
        const T: usize,
        const IN: usize,
        const H: usize,
        const LAYERS: usize,
        O: RnnOutput,
    > Layer for Recurrent<C, T, IN, H, LAYERS, O>
{
    fn describe(out: &mut dyn core::fmt::Write) -> core::fmt::Result {
        let output = if O::SEQUENCE { "sequence" } else { "last" };
        let both = if C::BIDIRECTIONAL {
            "bidirectional, "
        } else {
            ""
        };
        write!(
            out,
            "{}<{T} steps, {IN} -> {H}, layers: {LAYERS}, {both}{output}>",
            C::NAME
        )
    }

    const IN: usize = Self::DIMS.input_len();
    const OUT: usize = Self::DIMS.outputs();
    const PARAMS: usize = Self::DIMS.params();
    const STATE: usize = 0;
    const SAVED: usize = Self::DIMS.saved();
    const TENSORS: &'static [Tensor] = Self::ALL_TENSORS.split_at(Self::TENSOR_COUNT).0;
    /// The same names and layouts as PyTorch's.
    const TORCH: &'static [Torch] = if C::BIDIRECTIONAL {
        BIDIRECTIONAL_TORCH_NAMES.split_at(Self::TENSOR_COUNT).0
    } else {
        TORCH_NAMES.split_at(Self::TENSOR_COUNT).0
    };
    const SCRATCH_PER_SAMPLE: usize = rnn_scratch_len(Self::DIMS, 1);
    const PRODUCTS: &'static [Product] = &rnn_products(Self::DIMS);
    const FREEZABLE: bool = true;
    /// Lengths are honoured: each sample runs over its own steps.
    const STEPS: usize = T;

    fn forward(ctx: &mut Ctx<'_>, io: Forward<'_>) {
        buffers::forward::<Self>(&io);
        rnn_forward(ctx, Self::DIMS, io);
    }

    fn backward(ctx: &mut Ctx<'_>, io: Backward<'_>) {
        buffers::backward::<Self>(&io);
        rnn_backward(ctx, Self::DIMS, io);
    }
}
