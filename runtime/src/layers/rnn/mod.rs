//! Recurrent layers with PyTorch's semantics: [`Gru`] and [`Lstm`] (batch first, zero
//! initial states, stacked layers, the last hidden state or every one), in both directions
//! [`BiGru`] and [`BiLstm`], over sequences padded to their lengths or not, whose sizes are
//! constants, over [`rnn_forward`] and [`rnn_backward`], which take them at run time
//! ([`RnnDims`]).
//!
//! # Layout
//!
//! The input of a sample is `[T, inputs]` (time-major within the sample, features last), the
//! output `[D*H]` ([`Last`]) or `[T, D*H]` ([`Sequence`]), `D` = 2 directions when
//! bidirectional (forward features first), else 1. The parameters are, per stacked layer `l`
//! and in this order, PyTorch's `weight_ih_l{l}` `[G*H, in_l]`, `weight_hh_l{l}` `[G*H, H]`,
//! `bias_ih_l{l}` `[G*H]` and `bias_hh_l{l}` `[G*H]`, then for a bidirectional layer the
//! reverse direction's four, suffixed `_reverse`, with PyTorch's names and layouts (`in_0` the
//! input size, `in_l = D*H` above; `G` = 3 gates for a GRU in row blocks `r, z, n`, 4 for an
//! LSTM in row blocks `i, f, g, o`), so that a checkpoint loads into `nn.GRU` / `nn.LSTM` with
//! `batch_first=True` (and `bidirectional=True`).
//!
//! # Lengths
//!
//! With [`Ctx::lengths`] (right padding: sample `b`'s steps from its length on are padding),
//! every sample runs as PyTorch's `pack_padded_sequence` runs it: each layer reads the valid
//! steps only (the forward direction from step 0, the reverse one from the sample's last
//! valid step down to 0, each from zero states), a padded step never touches a state, the
//! output sequence is exactly 0 at padded steps (`pad_packed_sequence`), [`Last`] is each
//! direction's state after the sample's own last step, the layer above reads the layer
//! below's outputs at the valid steps, and the input gradient at padded steps is exactly 0.
//! The products still run over every row (a padded row's result is not used, its gate
//! gradients are 0); the cells of padded steps are skipped. Without lengths
//! ([`Lengths::FULL`]) every step is real and the computation is the one without lengths.
//!
//! # How it computes
//!
//! Layer after layer and direction after direction: the input projections of every time step
//! are one GEMM over `batch * T` rows, `X·W_ihᵀ + b_ih`, written where the step's gates are
//! saved; then per step (in the direction's order) one product of `batch` rows,
//! `h·W_hhᵀ + b_hh` (just `b_hh` at the first step, where `h = 0`), and one pass per sample,
//! on the lanes [`lane::dispatch`](crate::lane::dispatch) picks, for the gates and the new
//! state. Backward runs through time from the direction's last step, one product of `batch`
//! rows per step for the gradient reaching the previous hidden state; then `dW_ih`, `dW_hh`
//! and the input gradient are one GEMM each over `batch * T` rows, the bias gradients column
//! sums in order. `W_hh` is packed once per call ([`pack_b`]) for the products of every step;
//! and since samples do not depend on each other, a large enough batch goes through time in
//! runs of samples, one per thread of the pool (each run sees its own samples' lengths, so
//! the result does not depend on the threads). Nothing is allocated: forward saves the gate
//! activations, the cell states and the hidden states of every step, direction and layer
//! ([`RnnDims::saved`]), and backward's buffers are [`Ctx::scratch`] ([`rnn_scratch_len`]).

mod cell;
mod layer;
#[cfg(test)]
mod tests;

use super::{buffers, Backward, Ctx, Forward, Frozen, Grad, Lengths};
use crate::kernels::gemm::{
    gemm, gemm_packed, pack_b, pool_threads, products_workspace_len, MatMut, MatRef, PackedB,
    Product, Scaled,
};
use crate::kernels::parallel::{for_runs, PerSample};
use crate::lane::{add_rows, copy};
use cell::{Cell, GruStep, LstmStep, Prev, Step, StepGrad};
use core::ops::Range;
pub use layer::{
    BiGru, BiLstm, Bidirectional, Gru, GruCell, Last, Lstm, LstmCell, Recurrent, RecurrentCell,
    RnnOutput, Sequence, MAX_RNN_LAYERS,
};

/// Which recurrent cell a layer runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CellKind {
    /// PyTorch's `nn.GRU`: gates `r, z, n`, `n = tanh(W_in x + b_in + r * (W_hn h + b_hn))`,
    /// `h' = (1 - z) * n + z * h`.
    Gru,
    /// PyTorch's `nn.LSTM`: gates `i, f, g, o`, `c' = f * c + i * g`, `h' = o * tanh(c')`.
    Lstm,
}

impl CellKind {
    /// Gates per hidden unit: 3 for a GRU, 4 for an LSTM.
    pub const fn gates(self) -> usize {
        match self {
            CellKind::Gru => GruStep::GATES,
            CellKind::Lstm => LstmStep::GATES,
        }
    }

    /// Values per hidden unit and step that forward saves besides the gates and the hidden
    /// state: 1 for a GRU (`W_hn h + b_hn`), 2 for an LSTM (`c` and `tanh(c)`).
    const fn states(self) -> usize {
        match self {
            CellKind::Gru => GruStep::STATES,
            CellKind::Lstm => LstmStep::STATES,
        }
    }
}

/// The sizes of a stack of recurrent layers, for [`rnn_forward`] and [`rnn_backward`]: a
/// model whose shapes are known only at run time builds it; [`Gru`] and [`Lstm`] pass their
/// constants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RnnDims {
    /// The cell.
    pub cell: CellKind,
    /// Time steps per sample, `T`.
    pub steps: usize,
    /// Input features per time step.
    pub inputs: usize,
    /// Hidden units, `H`.
    pub hidden: usize,
    /// Stacked layers; layer `l + 1` reads the hidden states of layer `l`.
    pub layers: usize,
    /// The output: the top layer's hidden state at every step, `[T, D*H]`, when `true`
    /// ([`Sequence`]); after the last step only, `[D*H]`, when `false` ([`Last`]).
    pub sequence: bool,
    /// Whether every layer runs in both directions (`D = 2`, PyTorch's `bidirectional=True`):
    /// a forward direction from the first step and a reverse one from the last (valid) step,
    /// each with its own tensors, their hidden states side by side (forward first); else
    /// forward only (`D = 1`).
    pub bidirectional: bool,
}

impl RnnDims {
    /// Rows of each weight, `G * H`.
    #[inline]
    pub const fn gate_rows(&self) -> usize {
        self.cell.gates() * self.hidden
    }

    /// Directions per layer, `D`: 2 when [`bidirectional`](Self::bidirectional), else 1.
    #[inline]
    pub const fn directions(&self) -> usize {
        if self.bidirectional {
            2
        } else {
            1
        }
    }

    /// Hidden-state values per step of a layer's output, `D * H`.
    #[inline]
    pub const fn layer_outputs(&self) -> usize {
        self.directions() * self.hidden
    }

    /// Input features of layer `l`: [`inputs`](Self::inputs) for the first, `D * H` above.
    #[inline]
    pub const fn layer_inputs(&self, l: usize) -> usize {
        if l == 0 {
            self.inputs
        } else {
            self.layer_outputs()
        }
    }

    /// Parameters of one direction of layer `l`: `weight_ih` `[G*H, in_l]`, `weight_hh`
    /// `[G*H, H]`, `bias_ih` and `bias_hh` `[G*H]`.
    #[inline]
    pub const fn direction_params(&self, l: usize) -> usize {
        self.gate_rows() * (self.layer_inputs(l) + self.hidden + 2)
    }

    /// Parameters of layer `l`: its forward direction's, then its reverse direction's.
    #[inline]
    pub const fn layer_params(&self, l: usize) -> usize {
        self.directions() * self.direction_params(l)
    }

    /// The values of the tensors of one direction of layer `l`, `weight_ih`, `weight_hh`,
    /// `bias_ih` and `bias_hh`: direction `d`'s tensors are the
    /// [`TENSORS_PER_DIRECTION`](Self::TENSORS_PER_DIRECTION) from
    /// `TENSORS_PER_DIRECTION * (D * l + d)` on.
    #[inline]
    pub const fn direction_tensor_lens(&self, l: usize) -> [usize; 4] {
        let g = self.gate_rows();
        [g * self.layer_inputs(l), g * self.hidden, g, g]
    }

    /// Tensors per direction of a stacked layer.
    pub const TENSORS_PER_DIRECTION: usize = 4;

    /// Tensors per stacked layer, `4 * D`.
    #[inline]
    pub const fn layer_tensors(&self) -> usize {
        Self::TENSORS_PER_DIRECTION * self.directions()
    }

    /// The values of the gradients of direction `d` of layer `l`'s tensors that `frozen` (a
    /// mask over every layer's tensors) does not freeze.
    fn direction_trainable(&self, frozen: Frozen, l: usize, d: usize) -> usize {
        let per = Self::TENSORS_PER_DIRECTION;
        frozen
            .part(per * (self.directions() * l + d), per)
            .trainable_values(&self.direction_tensor_lens(l))
    }

    /// The values of the gradients of layer `l`'s tensors that `frozen` (a mask over every
    /// layer's tensors) does not freeze.
    pub fn layer_trainable(&self, frozen: Frozen, l: usize) -> usize {
        (0..self.directions())
            .map(|d| self.direction_trainable(frozen, l, d))
            .sum()
    }

    /// The values of the gradients of the tensors that `frozen` does not freeze:
    /// [`params`](Self::params) with none frozen.
    pub fn trainable(&self, frozen: Frozen) -> usize {
        (0..self.layers)
            .map(|l| self.layer_trainable(frozen, l))
            .sum()
    }

    /// Parameters of every layer, layer after layer.
    #[inline]
    pub const fn params(&self) -> usize {
        if self.layers == 0 {
            return 0;
        }
        self.layer_params(0) + (self.layers - 1) * self.layer_params(1)
    }

    /// Input values per sample, `T * inputs`.
    #[inline]
    pub const fn input_len(&self) -> usize {
        self.steps * self.inputs
    }

    /// Output values per sample: `T * D * H` for a sequence, `D * H` for the last state.
    #[inline]
    pub const fn outputs(&self) -> usize {
        if self.sequence {
            self.steps * self.layer_outputs()
        } else {
            self.layer_outputs()
        }
    }

    /// Values per time step and layer that forward saves: the gate activations, the cell's
    /// extra states and the hidden state.
    #[inline]
    const fn saved_per_step(&self) -> usize {
        self.gate_rows() + (self.cell.states() + 1) * self.hidden
    }

    /// Values per sample that [`rnn_forward`] saves for [`rnn_backward`]: per layer, time
    /// step and direction, the `G*H` gate activations, the cell's states (a GRU's
    /// `W_hn h + b_hn`; an LSTM's `c` and `tanh(c)`) and the hidden state.
    #[inline]
    pub const fn saved(&self) -> usize {
        self.layers * self.steps * self.directions() * self.saved_per_step()
    }

    /// Panics unless every size is at least 1.
    #[inline]
    const fn check(&self) {
        assert!(
            self.steps > 0 && self.inputs > 0 && self.hidden > 0 && self.layers > 0,
            "Gru / Lstm<T, IN, H, LAYERS>: the sequence length T, the input features IN, the \
             hidden units H and LAYERS must be at least 1"
        );
    }
}

/// Scratch one [`rnn_forward`] or [`rnn_backward`] call needs for `batch` samples: per sample,
/// the gate gradients of every step of each direction (twice for a GRU, whose recurrent
/// gradient differs), the previous hidden states (`T * H`), the gradient of a layer's input
/// sequence (`T * D * H`), and the hidden-state gradients carried between steps (`H`, and `H`
/// more for an LSTM's cell).
#[inline]
pub const fn rnn_scratch_len(dims: RnnDims, batch: usize) -> usize {
    let (t, h, d) = (dims.steps, dims.hidden, dims.directions());
    let g = d * dims.gate_rows();
    let gate_grads = match dims.cell {
        CellKind::Gru => 2 * t * g,
        CellKind::Lstm => t * g,
    };
    let carried = match dims.cell {
        CellKind::Gru => h,
        CellKind::Lstm => 2 * h,
    };
    batch * (gate_grads + t * h + t * d * h + carried)
}

/// A product whose rows (`scaled` [`Scaled::M`]) or inner dimension ([`Scaled::K`]) grow with
/// the batch.
const fn product(m: usize, k: usize, n: usize, scaled: Scaled) -> Product {
    Product { m, k, n, scaled }
}

/// The products of one layer with `inputs` features per step: the input projection, the
/// recurrent product of a step, its gradient, `dW_ih`, `dW_hh` and the input gradient.
const fn layer_products(dims: RnnDims, inputs: usize) -> [Product; 6] {
    let (t, h, g) = (dims.steps, dims.hidden, dims.gate_rows());
    [
        product(t, inputs, g, Scaled::M),
        product(1, h, g, Scaled::M),
        product(1, g, h, Scaled::M),
        product(g, t, inputs, Scaled::K),
        product(g, t, h, Scaled::K),
        product(t, g, inputs, Scaled::M),
    ]
}

/// The products of [`rnn_forward`] and [`rnn_backward`]: those of the first layer, then those
/// of the layers above (which read `D * H` features).
pub const fn rnn_products(dims: RnnDims) -> [Product; 12] {
    let first = layer_products(dims, dims.inputs);
    let above = layer_products(dims, dims.layer_inputs(1));
    let mut all = [Product::NONE; 12];
    let mut i = 0;
    while i < 6 {
        all[i] = first[i];
        all[6 + i] = above[i];
        i += 1;
    }
    all
}

/// GEMM workspace one [`rnn_forward`] or [`rnn_backward`] call needs for `batch` samples.
#[inline]
pub fn rnn_gemm_len(dims: RnnDims, batch: usize) -> usize {
    products_workspace_len(&rnn_products(dims), batch, pool_threads())
}

/// The sizes of one direction of one layer of the stack for one call, and the lengths of its
/// samples.
#[derive(Clone, Copy)]
struct Shape<'a> {
    /// Samples.
    batch: usize,
    /// Time steps.
    steps: usize,
    /// Input features per step.
    inputs: usize,
    /// Hidden units.
    hidden: usize,
    /// Hidden-state values per step of the layer's output, `D * H`.
    width: usize,
    /// Where this direction's hidden state starts in a step's `width` values: 0 forward, `H`
    /// reverse.
    offset: usize,
    /// Whether this is the reverse direction, which reads the steps from the last.
    reverse: bool,
    /// The valid steps of each sample.
    lengths: Lengths<'a>,
}

impl<'a> Shape<'a> {
    /// Direction `d` of layer `l` for `batch` samples of `lengths`.
    fn of(dims: RnnDims, l: usize, d: usize, batch: usize, lengths: Lengths<'a>) -> Self {
        Shape {
            batch,
            steps: dims.steps,
            inputs: dims.layer_inputs(l),
            hidden: dims.hidden,
            width: dims.layer_outputs(),
            offset: d * dims.hidden,
            reverse: d == 1,
            lengths,
        }
    }

    /// The samples `run` alone.
    fn samples(self, run: &Range<usize>) -> Self {
        Shape {
            batch: run.len(),
            lengths: self.lengths.from(run.start),
            ..self
        }
    }

    /// Rows of a whole sequence of the batch, `batch * T`.
    fn rows(&self) -> usize {
        self.batch * self.steps
    }

    /// Offset of sample `b`'s step `t` in a buffer of `width` values per step.
    fn at(&self, b: usize, t: usize, width: usize) -> usize {
        (b * self.steps + t) * width
    }

    /// Offset of this direction's hidden state of sample `b` at step `t` in a layer's output
    /// sequence.
    fn state_at(&self, b: usize, t: usize) -> usize {
        self.at(b, t, self.width) + self.offset
    }

    /// Step `t` of every sample in a `[batch, T, width]` buffer, as a `batch`x`width` view
    /// (an empty one for an empty batch).
    fn step_view<'d>(&self, data: &'d [f32], t: usize, width: usize) -> MatRef<'d> {
        let start = (t * width).min(data.len());
        MatRef::new(&data[start..], self.batch, width, self.steps * width, 1)
    }

    /// This direction's hidden states of every sample at step `t` of a layer's output
    /// sequence, as a `batch`x`H` view (an empty one for an empty batch).
    fn state_view<'d>(&self, h: &'d [f32], t: usize) -> MatRef<'d> {
        let start = (t * self.width + self.offset).min(h.len());
        let row = self.steps * self.width;
        MatRef::new(&h[start..], self.batch, self.hidden, row, 1)
    }

    /// The step this direction reads `i`-th: `i` forward, `T - 1 - i` reverse.
    fn time(&self, i: usize) -> usize {
        if self.reverse {
            self.steps - 1 - i
        } else {
            i
        }
    }

    /// The valid steps of sample `b`.
    fn len(&self, b: usize) -> usize {
        self.lengths.of(b, self.steps)
    }

    /// Whether step `t` of sample `b` is real (not padding).
    fn is_real(&self, b: usize, t: usize) -> bool {
        t < self.len(b)
    }

    /// The step whose state step `t` reads: `t - 1` forward, `t + 1` reverse.
    fn before(&self, t: usize) -> usize {
        if self.reverse {
            t + 1
        } else {
            t - 1
        }
    }

    /// Sample `b`'s first real step in this direction, which starts from zero states: 0
    /// forward, its last valid step reverse.
    fn first(&self, b: usize) -> usize {
        if self.reverse {
            self.len(b) - 1
        } else {
            0
        }
    }

    /// Sample `b`'s last real step in this direction, whose state is the direction's final
    /// one: its last valid step forward, 0 reverse.
    fn last(&self, b: usize) -> usize {
        if self.reverse {
            0
        } else {
            self.len(b) - 1
        }
    }
}

/// One layer's parameters (or their gradients), split by tensor.
struct Weights<S> {
    /// `weight_ih`, `[G*H, in]`.
    ih: S,
    /// `weight_hh`, `[G*H, H]`.
    hh: S,
    /// `bias_ih`, `[G*H]`.
    b_ih: S,
    /// `bias_hh`, `[G*H]`.
    b_hh: S,
}

/// Splits layer `l`'s parameters off the front of `params`.
fn split_weights(params: &[f32], dims: RnnDims, l: usize) -> (Weights<&[f32]>, &[f32]) {
    let (g, n) = (dims.gate_rows(), dims.layer_inputs(l));
    let (ih, rest) = params.split_at(g * n);
    let (hh, rest) = rest.split_at(g * dims.hidden);
    let (b_ih, rest) = rest.split_at(g);
    let (b_hh, rest) = rest.split_at(g);
    (Weights { ih, hh, b_ih, b_hh }, rest)
}

/// Direction `d` of layer `l`'s parameter gradients in `dparams` (every layer's trainable
/// tensors, packed), `None` for a tensor `frozen` freezes.
fn direction_grads(
    dparams: &mut [f32],
    frozen: Frozen,
    dims: RnnDims,
    (l, d): (usize, usize),
) -> Weights<Option<&mut [f32]>> {
    let layers_below: usize = (0..l).map(|k| dims.layer_trainable(frozen, k)).sum();
    let before: usize = (0..d).map(|e| dims.direction_trainable(frozen, l, e)).sum();
    let start = layers_below + before;
    let own = &mut dparams[start..start + dims.direction_trainable(frozen, l, d)];
    let per = RnnDims::TENSORS_PER_DIRECTION;
    let part = frozen.part(per * (dims.directions() * l + d), per);
    let [ih, hh, b_ih, b_hh] = part.split(own, dims.direction_tensor_lens(l));
    Weights { ih, hh, b_ih, b_hh }
}

/// What forward saves for one direction of one layer, each `[batch, T, width]`.
struct Saved<S> {
    /// Gate activations, `G*H` per step.
    gates: S,
    /// The cell's extra states, `STATES * H` per step.
    states: S,
    /// The layer's output sequence, `D * H` per step: the hidden states of every direction,
    /// this one's at [`Shape::offset`].
    h: S,
}

impl<'a> Saved<&'a [f32]> {
    /// The values of the samples `run` alone, for cell `C`.
    fn samples<C: Cell>(&self, s: Shape<'_>, run: Range<usize>) -> Saved<&'a [f32]> {
        let part = |data: &'a [f32], width: usize| {
            &data[s.at(run.start, 0, width)..s.at(run.end, 0, width)]
        };
        Saved {
            gates: part(self.gates, C::GATES * s.hidden),
            states: part(self.states, C::STATES * s.hidden),
            h: part(self.h, s.width),
        }
    }
}

/// Values one direction of a layer saves besides the hidden states, for `batch` samples: the
/// gates and the cell's states.
fn direction_saved_len(dims: RnnDims, batch: usize) -> usize {
    batch * dims.steps * (dims.gate_rows() + dims.cell.states() * dims.hidden)
}

/// Splits one layer's saved values (the layers are in order) off the front of `saved`: the
/// gates and states of each direction, and the layer's output sequence.
fn split_saved(saved: &[f32], dims: RnnDims, batch: usize) -> ([&[f32]; 2], &[f32], &[f32]) {
    let own = direction_saved_len(dims, batch);
    let (forward, rest) = saved.split_at(own);
    let (reverse, rest) = rest.split_at(if dims.bidirectional { own } else { 0 });
    let (h, rest) = rest.split_at(batch * dims.steps * dims.layer_outputs());
    ([forward, reverse], h, rest)
}

/// [`split_saved`], mutably.
fn split_saved_mut(
    saved: &mut [f32],
    dims: RnnDims,
    batch: usize,
) -> ([&mut [f32]; 2], &mut [f32], &mut [f32]) {
    let own = direction_saved_len(dims, batch);
    let (forward, rest) = saved.split_at_mut(own);
    let (reverse, rest) = rest.split_at_mut(if dims.bidirectional { own } else { 0 });
    let (h, rest) = rest.split_at_mut(batch * dims.steps * dims.layer_outputs());
    ([forward, reverse], h, rest)
}

/// A direction's gates and states, `[batch, T, G*H]` and `[batch, T, STATES*H]`, from its
/// saved values.
fn split_direction(own: &[f32], dims: RnnDims, batch: usize) -> (&[f32], &[f32]) {
    own.split_at(batch * dims.steps * dims.gate_rows())
}

/// [`split_direction`], mutably.
fn split_direction_mut(own: &mut [f32], dims: RnnDims, batch: usize) -> (&mut [f32], &mut [f32]) {
    own.split_at_mut(batch * dims.steps * dims.gate_rows())
}

/// Every row of `rows` (`bias.len()` values each) set to `bias`.
fn fill_rows(rows: &mut [f32], bias: &[f32]) {
    for row in rows.chunks_exact_mut(bias.len()) {
        copy(row, bias);
    }
}

/// The stack's output for `batch` samples, `io.y`: the top layer's hidden state after the last
/// step (`[batch, D*H]`) or at every step (`[batch, T, D*H]`), for the `io.batch` sequences of
/// `io.x` (`[batch, T, inputs]`), with zero initial states. Writes into `io.saved` what
/// [`rnn_backward`] needs ([`RnnDims::saved`] values per sample); `io.state` is not read.
///
/// `io.params` holds each layer's `weight_ih_l{l}` `[G*H, in_l]`, `weight_hh_l{l}` `[G*H, H]`,
/// `bias_ih_l{l}` and `bias_hh_l{l}` `[G*H]`, layer after layer (a bidirectional layer's
/// forward tensors, then its reverse ones), as PyTorch lays them out.
/// PyTorch's `nn.GRU(inputs, hidden, layers, batch_first=True)` (or `nn.LSTM`, and with
/// `bidirectional=True`) computes the same: `out` for the sequence; for the last state
/// `h_n[-1]` (`out[:, -1]`), or `concat(h_n[-2], h_n[-1])` when bidirectional.
///
/// With `ctx.lengths` (right padding), each sample runs as PyTorch's `pack_padded_sequence`
/// runs it: every layer reads its valid steps only (the reverse direction from its last valid
/// step down to 0, from zero states), a padded step never changes a state, the output
/// sequence is exactly 0 at padded steps (as `pad_packed_sequence` pads it), and the last
/// state is each direction's state after the sample's own last step. Padded inputs must be
/// finite (they are multiplied by 0).
///
/// # Panics
/// If a size in `dims` is 0, a buffer's length does not follow from `dims` and `batch`,
/// `ctx.scratch` or `ctx.gemm` is shorter than [`rnn_scratch_len`] or [`rnn_gemm_len`], or
/// `ctx.lengths` has fewer than `batch` lengths or a length of 0.
pub fn rnn_forward(ctx: &mut Ctx<'_>, dims: RnnDims, io: Forward<'_>) {
    dims.check();
    let name = "rnn_forward";
    buffers::expect(name, "params", io.params.len(), dims.params());
    buffers::expect(name, "x", io.x.len(), io.batch * dims.input_len());
    buffers::expect(name, "y", io.y.len(), io.batch * dims.outputs());
    buffers::expect(name, "saved", io.saved.len(), io.batch * dims.saved());
    check_lengths(ctx.lengths, io.batch);
    match dims.cell {
        CellKind::Gru => forward_stack::<GruStep>(ctx, dims, io),
        CellKind::Lstm => forward_stack::<LstmStep>(ctx, dims, io),
    }
}

/// Panics unless `lengths` are full or give each of `batch` samples at least one step.
fn check_lengths(lengths: Lengths<'_>, batch: usize) {
    if let Some(lengths) = lengths.get() {
        assert!(
            lengths.len() >= batch && lengths[..batch].iter().all(|&l| l >= 1),
            "rnn_forward / rnn_backward: {batch} samples need {batch} lengths of at least 1, \
             got {lengths:?}"
        );
    }
}

/// [`rnn_forward`] with cell `C`: layer after layer and direction after direction, each
/// reading the one below's hidden states, then the output from the top layer's.
fn forward_stack<C: Cell>(ctx: &mut Ctx<'_>, dims: RnnDims, io: Forward<'_>) {
    let Forward {
        params,
        x,
        y,
        saved,
        batch,
        ..
    } = io;
    let lengths = ctx.lengths;
    let (mut params, mut saved, mut input) = (params, saved, x);
    for l in 0..dims.layers {
        let (directions, h, rest) = split_saved_mut(core::mem::take(&mut saved), dims, batch);
        saved = rest;
        for (d, own) in directions.into_iter().take(dims.directions()).enumerate() {
            let (w, rest) = split_weights(params, dims, l);
            params = rest;
            let (gates, states) = split_direction_mut(own, dims, batch);
            let mut layer = Saved {
                gates,
                states,
                h: &mut *h,
            };
            let s = Shape::of(dims, l, d, batch, lengths);
            forward_layer::<C>(ctx, s, &w, input, &mut layer);
        }
        input = h;
    }
    write_output(dims, lengths, input, y);
}

/// The output from the top layer's hidden states `h`, `[batch, T, D*H]`: all of them, or the
/// forward direction's after each sample's last step and the reverse's after step 0.
fn write_output(dims: RnnDims, lengths: Lengths<'_>, h: &[f32], y: &mut [f32]) {
    if dims.sequence {
        copy(y, h);
        return;
    }
    let (t, n, width) = (dims.steps, dims.hidden, dims.layer_outputs());
    for (b, out) in y.chunks_exact_mut(width).enumerate() {
        let last = (b * t + lengths.of(b, t) - 1) * width;
        let (forward, reverse) = out.split_at_mut(n);
        copy(forward, &h[last..last + n]);
        if dims.bidirectional {
            let first = b * t * width + n;
            copy(reverse, &h[first..first + n]);
        }
    }
}

/// One direction of one layer's forward pass over `x`, `[batch, T, in]`, into `saved`.
fn forward_layer<C: Cell>(
    ctx: &mut Ctx<'_>,
    s: Shape<'_>,
    w: &Weights<&[f32]>,
    x: &[f32],
    saved: &mut Saved<&mut [f32]>,
) {
    let g = w.b_ih.len();
    let Saved { gates, states, h } = saved;
    // The input projections of every step: X·W_ihᵀ + b_ih over `batch * T` rows.
    fill_rows(gates, w.b_ih);
    gemm(
        1.0,
        MatRef::row_major(x, s.rows(), s.inputs),
        MatRef::row_major(w.ih, g, s.inputs).t(),
        1.0,
        MatMut::row_major(gates, s.rows(), g),
        ctx.gemm,
    );
    let w_hh = MatRef::row_major(w.hh, g, s.hidden).t();
    // What a run of samples writes: its gates, states and hidden states of every step, and
    // the recurrent projection of the current one.
    let out = [
        per_sample(gates, s.steps * g),
        per_sample(states, s.steps * C::STATES * s.hidden),
        per_sample(h, s.steps * s.width),
        per_sample(&mut ctx.scratch[..s.batch * g], g),
    ];
    let pieces = recurrence_pieces(s, g);
    match pack_b(w_hh, s.batch.div_ceil(pieces), ctx.gemm) {
        Some(packed) => for_runs(s.batch, pieces, out, &|run: Range<usize>, out| {
            let s = s.samples(&run);
            forward_run::<C>(s, w.b_hh, &mut Recurrence::Packed(&packed), out);
        }),
        None => forward_run::<C>(s, w.b_hh, &mut Recurrence::Plain(w_hh, ctx.gemm), out),
    }
}

/// Runs of samples a recurrence is cut into: one per thread of the pool when its recurrent
/// products reach [`RECURRENCE_PARALLEL_FLOPS`], else one.
fn recurrence_pieces(s: Shape<'_>, g: usize) -> usize {
    let flops = 2 * s.rows() * s.hidden * g;
    if flops >= RECURRENCE_PARALLEL_FLOPS {
        pool_threads().min(s.batch).max(1)
    } else {
        1
    }
}

/// A recurrence (forward or backward through time) whose per-step products add up to at least
/// this many floating-point operations is cut into runs of samples, one per thread; each run
/// goes through every step on its own (samples do not depend on each other), so the step
/// runs on two threads with two hand-offs instead of two per time step.
const RECURRENCE_PARALLEL_FLOPS: usize = 1 << 22;

/// A `[batch, ...]` buffer of `per` values a sample, cut between samples.
fn per_sample(data: &mut [f32], per: usize) -> PerSample<'_> {
    PerSample { data, per }
}

/// How a step multiplies by the recurrent weight.
enum Recurrence<'a> {
    /// Packed once for every step (and every run of samples).
    Packed(&'a PackedB<'a>),
    /// Packed by every product, in this workspace (where the GEMM workspace is too short to
    /// keep it packed).
    Plain(MatRef<'a>, &'a mut [f32]),
}

impl Recurrence<'_> {
    /// `C = A·W + beta * C`.
    fn multiply(&mut self, a: MatRef<'_>, beta: f32, c: MatMut<'_>) {
        match self {
            Recurrence::Packed(w) => gemm_packed(1.0, a, w, beta, c),
            Recurrence::Plain(w, ws) => gemm(1.0, a, *w, beta, c, ws),
        }
    }
}

/// The recurrence of forward for a run of samples (`s.batch` of them): at each step, the
/// recurrent projection `h·W_hhᵀ + b_hh` of the run's previous hidden states, then the cell
/// for the samples whose step is real; a padded step's hidden state is 0.
fn forward_run<C: Cell>(
    s: Shape<'_>,
    b_hh: &[f32],
    w_hh: &mut Recurrence<'_>,
    out: [PerSample<'_>; 4],
) {
    let g = b_hh.len();
    let [gates, states, h, recurrent] = out.map(|o| o.data);
    for i in 0..s.steps {
        let t = s.time(i);
        fill_rows(recurrent, b_hh);
        if i > 0 {
            let prev = s.state_view(h, s.before(t));
            w_hh.multiply(prev, 1.0, MatMut::row_major(recurrent, s.batch, g));
        }
        for b in 0..s.batch {
            if s.is_real(b, t) {
                let recurrent = &recurrent[b * g..(b + 1) * g];
                forward_sample::<C>(s, (b, t), recurrent, gates, states, h);
            } else {
                let at = s.state_at(b, t);
                h[at..at + s.hidden].fill(0.0);
            }
        }
    }
}

/// The cell's forward step for sample `b` at step `t`, given its recurrent projection.
fn forward_sample<C: Cell>(
    s: Shape<'_>,
    (b, t): (usize, usize),
    recurrent: &[f32],
    gates: &mut [f32],
    states: &mut [f32],
    h: &mut [f32],
) {
    let (n, g, k) = (s.hidden, C::GATES * s.hidden, C::STATES * s.hidden);
    let at = s.at(b, t, g);
    let step = if t == s.first(b) {
        let (h_at, states_at) = (s.state_at(b, t), s.at(b, t, k));
        Step {
            gates: &mut gates[at..at + g],
            recurrent,
            states: &mut states[states_at..states_at + k],
            h: &mut h[h_at..h_at + n],
            prev: None,
        }
    } else {
        let before = s.before(t);
        let (h, h_prev) = split_pair(h, s.state_at(b, t), s.state_at(b, before), n);
        let (states, states_prev) = split_pair(states, s.at(b, t, k), s.at(b, before, k), k);
        Step {
            gates: &mut gates[at..at + g],
            recurrent,
            states,
            h,
            prev: Some(Prev {
                h: h_prev,
                states: states_prev,
            }),
        }
    };
    cell::forward::<C>(step, n);
}

/// `data[at..at + n]`, mutably, and `data[from..from + n]`, which must not overlap it.
fn split_pair(data: &mut [f32], at: usize, from: usize, n: usize) -> (&mut [f32], &[f32]) {
    if from < at {
        let (before, after) = data.split_at_mut(at);
        (&mut after[..n], &before[from..from + n])
    } else {
        let (before, after) = data.split_at_mut(from);
        (&mut before[at..at + n], &after[..n])
    }
}

/// Where the gradient of a layer's output sequence comes from.
#[derive(Clone, Copy)]
enum Upstream<'a> {
    /// The stack's output gradient for the last state only, `[batch, D*H]`.
    Last(&'a [f32]),
    /// A gradient for every step, `[batch, T, D*H]`.
    Every(&'a [f32]),
}

impl<'a> Upstream<'a> {
    /// The gradients of the samples `run` alone.
    fn samples(self, s: Shape<'_>, run: Range<usize>) -> Upstream<'a> {
        let w = s.width;
        match self {
            Upstream::Last(d) => Upstream::Last(&d[run.start * w..run.end * w]),
            Upstream::Every(d) => Upstream::Every(&d[s.at(run.start, 0, w)..s.at(run.end, 0, w)]),
        }
    }

    /// The gradient for this direction's hidden state of sample `b` at step `t`, a real one,
    /// if any.
    fn at(self, s: Shape<'_>, b: usize, t: usize) -> Option<&'a [f32]> {
        let n = s.hidden;
        match self {
            Upstream::Last(d) if t == s.last(b) => {
                let at = b * s.width + s.offset;
                Some(&d[at..at + n])
            }
            Upstream::Last(_) => None,
            Upstream::Every(d) => Some(&d[s.state_at(b, t)..s.state_at(b, t) + n]),
        }
    }
}

/// Backward's buffers in [`Ctx::scratch`], each `[batch, ...]`.
struct Scratch<'a> {
    /// d loss / d (input projection) of every step, `[batch, T, G*H]`, for each direction.
    dx_gates: &'a mut [f32],
    /// d loss / d (recurrent projection) of every step, when it differs (GRU), for each
    /// direction; else empty.
    dh_gates: &'a mut [f32],
    /// The previous hidden state of every step (0 at the first), `[batch, T, H]`.
    h_prev: &'a mut [f32],
    /// d loss / d h of the previous step, as far as it is known, `[batch, H]`.
    carry: &'a mut [f32],
    /// LSTM: d loss / d c carried between steps, `[batch, H]`; empty for a GRU.
    dc: &'a mut [f32],
}

impl<'a> Scratch<'a> {
    /// The buffers, and apart from them d loss / d (a layer's input sequence),
    /// `[batch, T, D*H]`: the upstream gradient of the layer below.
    fn split<C: Cell>(
        scratch: &'a mut [f32],
        dims: RnnDims,
        batch: usize,
    ) -> (Scratch<'a>, &'a mut [f32]) {
        let rows = batch * dims.steps;
        let (g, n) = (dims.directions() * dims.gate_rows(), dims.hidden);
        let own = if C::OWN_RECURRENT_GRAD { rows * g } else { 0 };
        let cell = if C::CARRIES_CELL { batch * n } else { 0 };
        let (dx_gates, rest) = scratch.split_at_mut(rows * g);
        let (dh_gates, rest) = rest.split_at_mut(own);
        let (h_prev, rest) = rest.split_at_mut(rows * n);
        let (d_below, rest) = rest.split_at_mut(rows * dims.layer_outputs());
        let (carry, rest) = rest.split_at_mut(batch * n);
        let (dc, _) = rest.split_at_mut(cell);
        let buffers = Scratch {
            dx_gates,
            dh_gates,
            h_prev,
            carry,
            dc,
        };
        (buffers, d_below)
    }

    /// The buffers of direction `d` of `directions`: its gate gradients, and the shared rest.
    fn direction(&mut self, d: usize, directions: usize) -> Scratch<'_> {
        Scratch {
            dx_gates: part_of(self.dx_gates, d, directions),
            dh_gates: part_of(self.dh_gates, d, directions),
            h_prev: self.h_prev,
            carry: self.carry,
            dc: self.dc,
        }
    }
}

/// Part `d` of `data` cut into `parts` equal parts.
fn part_of(data: &mut [f32], d: usize, parts: usize) -> &mut [f32] {
    let per = data.len() / parts;
    &mut data[d * per..(d + 1) * per]
}

/// The backward pass of [`rnn_forward`]: given `io.dy` (d loss / d y, not modified), writes
/// d loss / d params into `io.dparams` (overwriting it; laid out as `io.params`, without the
/// tensors `io.frozen` names: [`RnnDims::trainable`] values) and d loss / d x into `io.dx`,
/// by backpropagation through every (valid) time step. `io.x`, `io.y` and `io.saved` are
/// what [`rnn_forward`] saw and wrote, with the same `ctx.lengths`. The input gradient at a
/// padded step is exactly 0, and the output gradient `io.dy` at a padded step is not read.
///
/// A frozen tensor's GEMM or sum is not computed, and the pass stops at the top of the
/// stacked layers below which every tensor is frozen, unless `io.dx` is wanted.
///
/// # Panics
/// As [`rnn_forward`], also for `dy`, `dparams` and `dx`.
pub fn rnn_backward(ctx: &mut Ctx<'_>, dims: RnnDims, io: Backward<'_>) {
    dims.check();
    let (name, batch) = ("rnn_backward", io.batch);
    buffers::expect(name, "params", io.params.len(), dims.params());
    let trainable = match io.frozen.any() {
        true => dims.trainable(io.frozen),
        false => dims.params(),
    };
    buffers::expect(name, "dparams", io.dparams.len(), trainable);
    buffers::expect(name, "x", io.x.len(), batch * dims.input_len());
    buffers::expect(name, "y", io.y.len(), batch * dims.outputs());
    buffers::expect(name, "dy", io.dy.len(), batch * dims.outputs());
    buffers::expect(name, "saved", io.saved.len(), batch * dims.saved());
    if let Grad::Set(d) | Grad::Add(d) = &io.dx {
        buffers::expect(name, "dx", d.len(), batch * dims.input_len());
    }
    check_lengths(ctx.lengths, batch);
    match dims.cell {
        CellKind::Gru => backward_stack::<GruStep>(ctx, dims, io),
        CellKind::Lstm => backward_stack::<LstmStep>(ctx, dims, io),
    }
}

/// [`rnn_backward`] with cell `C`: layer after layer from the top, each passing the gradient
/// of its input sequence to the one below, as long as one of the layers below has a tensor
/// that trains or `io.dx` is wanted. Both directions of a layer go through time before
/// either writes the input gradient, since they read the same upstream gradient.
fn backward_stack<C: Cell>(ctx: &mut Ctx<'_>, dims: RnnDims, io: Backward<'_>) {
    let batch = io.batch;
    let Ctx {
        gemm,
        scratch,
        lengths,
        ..
    } = ctx;
    let (mut buf, d_below) = Scratch::split::<C>(scratch, dims, batch);
    let mut dx = io.dx;
    let input_grad_wanted = !matches!(dx, Grad::Skip);
    // Whether layers `0..=l` need backward: some of their tensors train, or `dx` is wanted.
    let needed =
        |l: usize| input_grad_wanted || !io.frozen.freezes_first(dims.layer_tensors() * (l + 1));
    let directions = dims.directions();
    for l in (0..dims.layers).rev() {
        if !needed(l) {
            break;
        }
        let upstream = match (l + 1 == dims.layers, dims.sequence) {
            (true, true) => Upstream::Every(io.dy),
            (true, false) => Upstream::Last(io.dy),
            (false, _) => Upstream::Every(d_below),
        };
        for d in 0..directions {
            let w = direction_weights(io.params, dims, (l, d));
            let dw = direction_grads(io.dparams, io.frozen, dims, (l, d));
            let (saved, input) = layer_saved(io.saved, io.x, dims, batch, (l, d));
            let s = Shape::of(dims, l, d, batch, *lengths);
            let mut own = buf.direction(d, directions);
            backward_through_time::<C>(gemm, s, &w, &saved, upstream, &mut own);
            weight_grads((gemm, dims.gate_rows()), s, &saved, input, &mut own, dw);
        }
        let mut below = if l == 0 {
            dx.reborrow()
        } else if needed(l - 1) {
            Grad::Set(&mut *d_below)
        } else {
            Grad::Skip
        };
        for d in 0..directions {
            let w = direction_weights(io.params, dims, (l, d));
            let s = Shape::of(dims, l, d, batch, *lengths);
            let dx_gates = part_of(buf.dx_gates, d, directions);
            let into = if d == 0 {
                below.reborrow()
            } else {
                below.adding()
            };
            input_grad(gemm, s, w.ih, dx_gates, into);
        }
    }
}

/// Direction `d` of layer `l`'s parameters.
fn direction_weights(params: &[f32], dims: RnnDims, (l, d): (usize, usize)) -> Weights<&[f32]> {
    let below: usize = (0..l).map(|k| dims.layer_params(k)).sum();
    let start = below + d * dims.direction_params(l);
    split_weights(&params[start..], dims, l).0
}

/// Direction `d` of layer `l`'s saved values and the layer's input sequence: `x` for the
/// first layer, the hidden states of the layer below otherwise.
fn layer_saved<'a>(
    saved: &'a [f32],
    x: &'a [f32],
    dims: RnnDims,
    batch: usize,
    (l, d): (usize, usize),
) -> (Saved<&'a [f32]>, &'a [f32]) {
    let (mut input, mut rest) = (x, saved);
    for _ in 0..l {
        let (_, below, r) = split_saved(rest, dims, batch);
        input = below;
        rest = r;
    }
    let (directions, h, _) = split_saved(rest, dims, batch);
    let (gates, states) = split_direction(directions[d], dims, batch);
    (Saved { gates, states, h }, input)
}

/// Backpropagation through time over one direction of one layer: the gate gradients of every
/// step into `buf.dx_gates` (and `buf.dh_gates`), in runs of samples ([`recurrence_pieces`])
/// that share `W_hh`, packed once ([`through_time`]).
fn backward_through_time<C: Cell>(
    ws: &mut [f32],
    s: Shape<'_>,
    w: &Weights<&[f32]>,
    saved: &Saved<&[f32]>,
    upstream: Upstream<'_>,
    buf: &mut Scratch<'_>,
) {
    let (n, g) = (s.hidden, C::GATES * s.hidden);
    let w_hh = MatRef::row_major(w.hh, g, n);
    let pieces = recurrence_pieces(s, g);
    let Some(packed) = pack_b(w_hh, s.batch.div_ceil(pieces), ws) else {
        through_time::<C>(&mut Recurrence::Plain(w_hh, ws), s, saved, upstream, buf);
        return;
    };
    let own = if C::OWN_RECURRENT_GRAD {
        s.steps * g
    } else {
        0
    };
    let cell = if C::CARRIES_CELL { n } else { 0 };
    let out = [
        per_sample(buf.dx_gates, s.steps * g),
        per_sample(buf.dh_gates, own),
        per_sample(buf.carry, n),
        per_sample(buf.dc, cell),
    ];
    for_runs(
        s.batch,
        pieces,
        out,
        &|run: Range<usize>, out: [PerSample<'_>; 4]| {
            let [dx_gates, dh_gates, carry, dc] = out.map(|o| o.data);
            let mut buf = Scratch {
                dx_gates,
                dh_gates,
                h_prev: &mut [],
                carry,
                dc,
            };
            let saved = saved.samples::<C>(s, run.clone());
            let upstream = upstream.samples(s, run.clone());
            let s = s.samples(&run);
            through_time::<C>(
                &mut Recurrence::Packed(&packed),
                s,
                &saved,
                upstream,
                &mut buf,
            );
        },
    );
}

/// Backpropagation through time for the `s.batch` samples of `buf`: from the direction's last
/// step to its first, each step's gradient for the previous hidden state through one product
/// by `W_hh`. A padded step's gate gradients are 0, so what it carries stays 0.
fn through_time<C: Cell>(
    w_hh: &mut Recurrence<'_>,
    s: Shape<'_>,
    saved: &Saved<&[f32]>,
    upstream: Upstream<'_>,
    buf: &mut Scratch<'_>,
) {
    let g = C::GATES * s.hidden;
    buf.carry.fill(0.0);
    buf.dc.fill(0.0);
    for i in (0..s.steps).rev() {
        let t = s.time(i);
        for b in 0..s.batch {
            if s.is_real(b, t) {
                backward_sample::<C>(s, (b, t), saved, upstream.at(s, b, t), buf);
            } else {
                zero_gate_grads::<C>(s, (b, t), buf);
            }
        }
        if i == 0 {
            break;
        }
        let recurrent_grads = if C::OWN_RECURRENT_GRAD {
            &*buf.dh_gates
        } else {
            &*buf.dx_gates
        };
        w_hh.multiply(
            s.step_view(recurrent_grads, t, g),
            if C::DIRECT { 1.0 } else { 0.0 },
            MatMut::row_major(buf.carry, s.batch, s.hidden),
        );
    }
}

/// A padded step's gate gradients: 0.
fn zero_gate_grads<C: Cell>(s: Shape<'_>, (b, t): (usize, usize), buf: &mut Scratch<'_>) {
    let g = C::GATES * s.hidden;
    let at = s.at(b, t, g);
    buf.dx_gates[at..at + g].fill(0.0);
    if C::OWN_RECURRENT_GRAD {
        buf.dh_gates[at..at + g].fill(0.0);
    }
}

/// The cell's backward step for sample `b` at step `t`, from `buf.carry` and `up`.
fn backward_sample<C: Cell>(
    s: Shape<'_>,
    (b, t): (usize, usize),
    saved: &Saved<&[f32]>,
    up: Option<&[f32]>,
    buf: &mut Scratch<'_>,
) {
    let (n, g, k) = (s.hidden, C::GATES * s.hidden, C::STATES * s.hidden);
    let prev = (t != s.first(b)).then(|| {
        let before = s.before(t);
        Prev {
            h: &saved.h[s.state_at(b, before)..s.state_at(b, before) + n],
            states: &saved.states[s.at(b, before, k)..s.at(b, before, k) + k],
        }
    });
    let at = s.at(b, t, g);
    let own = if C::OWN_RECURRENT_GRAD {
        at..at + g
    } else {
        0..0
    };
    let unit = b * n..(b + 1) * n;
    let cell = if C::CARRIES_CELL { unit.clone() } else { 0..0 };
    let step = StepGrad {
        carry: &mut buf.carry[unit],
        up,
        dc: &mut buf.dc[cell],
        gates: &saved.gates[at..at + g],
        states: &saved.states[s.at(b, t, k)..s.at(b, t, k) + k],
        prev,
        dx_gates: &mut buf.dx_gates[at..at + g],
        dh_gates: &mut buf.dh_gates[own],
    };
    cell::backward::<C>(step, n);
}

/// `dW_ih = dGxᵀ·X`, `dW_hh = dGhᵀ·H_prev` over `batch * T` rows, and the bias gradients as
/// column sums of the gate gradients, for the tensors not frozen (`Some`) of a direction of
/// `g` gate rows.
fn weight_grads(
    (ws, g): (&mut [f32], usize),
    s: Shape<'_>,
    saved: &Saved<&[f32]>,
    input: &[f32],
    buf: &mut Scratch<'_>,
    dw: Weights<Option<&mut [f32]>>,
) {
    let (n, rows) = (s.hidden, s.rows());
    let dx_gates = &*buf.dx_gates;
    let dh_gates = if buf.dh_gates.is_empty() {
        dx_gates
    } else {
        &*buf.dh_gates
    };
    if let Some(ih) = dw.ih {
        gemm(
            1.0,
            MatRef::row_major(dx_gates, rows, g).t(),
            MatRef::row_major(input, rows, s.inputs),
            0.0,
            MatMut::row_major(ih, g, s.inputs),
            ws,
        );
    }
    if let Some(hh) = dw.hh {
        previous_states(s, saved.h, buf.h_prev);
        gemm(
            1.0,
            MatRef::row_major(dh_gates, rows, g).t(),
            MatRef::row_major(buf.h_prev, rows, n),
            0.0,
            MatMut::row_major(hh, g, n),
            ws,
        );
    }
    for (db, gates) in [(dw.b_ih, dx_gates), (dw.b_hh, dh_gates)] {
        if let Some(db) = db {
            db.fill(0.0);
            add_rows(db, gates);
        }
    }
}

/// The hidden state each step of this direction reads, `[batch, T, H]`: the state of the step
/// before it, 0 at each sample's first step and at padded steps.
fn previous_states(s: Shape<'_>, h: &[f32], h_prev: &mut [f32]) {
    let n = s.hidden;
    for b in 0..s.batch {
        for t in 0..s.steps {
            let row = &mut h_prev[s.at(b, t, n)..s.at(b, t, n) + n];
            if s.is_real(b, t) && t != s.first(b) {
                let from = s.state_at(b, s.before(t));
                copy(row, &h[from..from + n]);
            } else {
                row.fill(0.0);
            }
        }
    }
}

/// d loss / d (the layer's input sequence) `= dGx·W_ih`, into `dx`.
fn input_grad(ws: &mut [f32], s: Shape<'_>, w_ih: &[f32], dx_gates: &[f32], dx: Grad<'_>) {
    let Some((dx, add)) = dx.destination() else {
        return;
    };
    let g = w_ih.len() / s.inputs;
    gemm(
        1.0,
        MatRef::row_major(dx_gates, s.rows(), g),
        MatRef::row_major(w_ih, g, s.inputs),
        if add { 1.0 } else { 0.0 },
        MatMut::row_major(dx, s.rows(), s.inputs),
        ws,
    );
}
