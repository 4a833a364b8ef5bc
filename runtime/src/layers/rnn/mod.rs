//! Recurrent layers with PyTorch's semantics: [`Gru`] and [`Lstm`] (batch first, zero
//! initial states, stacked layers, the last hidden state or every one), whose sizes are
//! constants, over [`rnn_forward`] and [`rnn_backward`], which take them at run time
//! ([`RnnDims`]).
//!
//! # Layout
//!
//! The input of a sample is `[T, inputs]` (time-major within the sample, features last), the
//! output `[hidden]` ([`Last`]) or `[T, hidden]` ([`Sequence`]). The parameters are, per
//! stacked layer `l` and in this order, PyTorch's `weight_ih_l{l}` `[G*H, in_l]`,
//! `weight_hh_l{l}` `[G*H, H]`, `bias_ih_l{l}` `[G*H]` and `bias_hh_l{l}` `[G*H]`, with
//! PyTorch's names and layouts (`in_0` the input size, `in_l = H` above; `G` = 3 gates for a
//! GRU in row blocks `r, z, n`, 4 for an LSTM in row blocks `i, f, g, o`), so that a checkpoint
//! loads into `nn.GRU` / `nn.LSTM` with `batch_first=True`.
//!
//! # How it computes
//!
//! Layer after layer: the input projections of every time step are one GEMM over `batch * T`
//! rows, `X·W_ihᵀ + b_ih`, written where the step's gates are saved; then per step one product
//! of `batch` rows, `h·W_hhᵀ + b_hh` (just `b_hh` at the first step, where `h = 0`), and one pass
//! per sample, on the lanes [`lane::dispatch`](crate::lane::dispatch) picks, for the gates and
//! the new state. Backward runs through time from
//! the last step, one product of `batch` rows per step for the gradient reaching the previous
//! hidden state; then `dW_ih`, `dW_hh` and the input gradient are one GEMM each over
//! `batch * T` rows, the bias gradients column sums in order. `W_hh` is packed once per call
//! ([`pack_b`]) for the products of every step; and since samples do not depend on each other,
//! a large enough batch goes through time in runs of samples, one per thread of the pool.
//! Nothing is allocated: forward
//! saves the gate activations, the cell states and the hidden states of every step and layer
//! ([`RnnDims::saved`]), and backward's buffers are [`Ctx::scratch`] ([`rnn_scratch_len`]).

mod cell;
mod layer;
#[cfg(test)]
mod tests;

use super::{buffers, Backward, Ctx, Forward, Frozen, Grad};
use crate::kernels::gemm::{
    gemm, gemm_packed, pack_b, pool_threads, products_workspace_len, MatMut, MatRef, PackedB,
    Product, Scaled,
};
use crate::kernels::parallel::{for_runs, PerSample};
use crate::lane::{add_rows, copy};
use cell::{Cell, GruStep, LstmStep, Prev, Step, StepGrad};
use core::ops::Range;
pub use layer::{
    Gru, GruCell, Last, Lstm, LstmCell, Recurrent, RecurrentCell, RnnOutput, Sequence,
    MAX_RNN_LAYERS,
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
    /// The output: the top layer's hidden state at every step, `[T, H]`, when `true`
    /// ([`Sequence`]); after the last step only, `[H]`, when `false` ([`Last`]).
    pub sequence: bool,
}

impl RnnDims {
    /// Rows of each weight, `G * H`.
    #[inline]
    pub const fn gate_rows(&self) -> usize {
        self.cell.gates() * self.hidden
    }

    /// Input features of layer `l`: [`inputs`](Self::inputs) for the first, `H` above.
    #[inline]
    pub const fn layer_inputs(&self, l: usize) -> usize {
        if l == 0 {
            self.inputs
        } else {
            self.hidden
        }
    }

    /// Parameters of layer `l`: `weight_ih` `[G*H, in_l]`, `weight_hh` `[G*H, H]`, `bias_ih`
    /// and `bias_hh` `[G*H]`.
    #[inline]
    pub const fn layer_params(&self, l: usize) -> usize {
        self.gate_rows() * (self.layer_inputs(l) + self.hidden + 2)
    }

    /// The values of layer `l`'s tensors, `weight_ih`, `weight_hh`, `bias_ih` and `bias_hh`:
    /// the layer's tensors are the layer's [`TENSORS_PER_LAYER`](Self::TENSORS_PER_LAYER)
    /// from `TENSORS_PER_LAYER * l` on.
    #[inline]
    pub const fn layer_tensor_lens(&self, l: usize) -> [usize; 4] {
        let g = self.gate_rows();
        [g * self.layer_inputs(l), g * self.hidden, g, g]
    }

    /// Tensors per stacked layer.
    pub const TENSORS_PER_LAYER: usize = 4;

    /// The values of the gradients of layer `l`'s tensors that `frozen` (a mask over every
    /// layer's tensors) does not freeze.
    pub fn layer_trainable(&self, frozen: Frozen, l: usize) -> usize {
        let per = Self::TENSORS_PER_LAYER;
        frozen
            .part(per * l, per)
            .trainable_values(&self.layer_tensor_lens(l))
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

    /// Output values per sample: `T * H` for a sequence, `H` for the last state.
    #[inline]
    pub const fn outputs(&self) -> usize {
        if self.sequence {
            self.steps * self.hidden
        } else {
            self.hidden
        }
    }

    /// Values per time step and layer that forward saves: the gate activations, the cell's
    /// extra states and the hidden state.
    #[inline]
    const fn saved_per_step(&self) -> usize {
        self.gate_rows() + (self.cell.states() + 1) * self.hidden
    }

    /// Values per sample that [`rnn_forward`] saves for [`rnn_backward`]: per layer and time
    /// step, the `G*H` gate activations, the cell's states (a GRU's `W_hn h + b_hn`; an LSTM's
    /// `c` and `tanh(c)`) and the hidden state.
    #[inline]
    pub const fn saved(&self) -> usize {
        self.layers * self.steps * self.saved_per_step()
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
/// the gate gradients of every step (twice for a GRU, whose recurrent gradient differs), the
/// previous hidden states and the gradient of a layer's input sequence (`T * H` each), and the
/// hidden-state gradients carried between steps (`H`, and `H` more for an LSTM's cell).
#[inline]
pub const fn rnn_scratch_len(dims: RnnDims, batch: usize) -> usize {
    let (t, h, g) = (dims.steps, dims.hidden, dims.gate_rows());
    let gate_grads = match dims.cell {
        CellKind::Gru => 2 * t * g,
        CellKind::Lstm => t * g,
    };
    let carried = match dims.cell {
        CellKind::Gru => h,
        CellKind::Lstm => 2 * h,
    };
    batch * (gate_grads + 2 * t * h + carried)
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
/// of the layers above (which read `H` features).
pub const fn rnn_products(dims: RnnDims) -> [Product; 12] {
    let first = layer_products(dims, dims.inputs);
    let above = layer_products(dims, dims.hidden);
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

/// The sizes of one layer of the stack for one call.
#[derive(Clone, Copy)]
struct Shape {
    /// Samples.
    batch: usize,
    /// Time steps.
    steps: usize,
    /// Input features per step.
    inputs: usize,
    /// Hidden units.
    hidden: usize,
}

impl Shape {
    fn of(dims: RnnDims, l: usize, batch: usize) -> Shape {
        Shape {
            batch,
            steps: dims.steps,
            inputs: dims.layer_inputs(l),
            hidden: dims.hidden,
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

    /// Step `t` of every sample in a `[batch, T, width]` buffer, as a `batch`x`width` view
    /// (an empty one for an empty batch).
    fn step_view<'a>(&self, data: &'a [f32], t: usize, width: usize) -> MatRef<'a> {
        let start = (t * width).min(data.len());
        MatRef::new(&data[start..], self.batch, width, self.steps * width, 1)
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

/// Layer `l`'s parameter gradients in `dparams` (every layer's trainable tensors, packed),
/// `None` for a tensor `frozen` freezes.
fn layer_grads(
    dparams: &mut [f32],
    frozen: Frozen,
    dims: RnnDims,
    l: usize,
) -> Weights<Option<&mut [f32]>> {
    let below: usize = (0..l).map(|k| dims.layer_trainable(frozen, k)).sum();
    let own = &mut dparams[below..below + dims.layer_trainable(frozen, l)];
    let per = RnnDims::TENSORS_PER_LAYER;
    let part = frozen.part(per * l, per);
    let [ih, hh, b_ih, b_hh] = part.split(own, dims.layer_tensor_lens(l));
    Weights { ih, hh, b_ih, b_hh }
}

/// What forward saves for one layer, each `[batch, T, width]`.
struct Saved<S> {
    /// Gate activations, `G*H` per step.
    gates: S,
    /// The cell's extra states, `STATES * H` per step.
    states: S,
    /// Hidden states, `H` per step: the layer's output sequence.
    h: S,
}

impl<'a> Saved<&'a [f32]> {
    /// The values of the samples `run` alone, for cell `C`.
    fn samples<C: Cell>(&self, s: Shape, run: Range<usize>) -> Saved<&'a [f32]> {
        let part = |data: &'a [f32], width: usize| {
            &data[s.at(run.start, 0, width)..s.at(run.end, 0, width)]
        };
        Saved {
            gates: part(self.gates, C::GATES * s.hidden),
            states: part(self.states, C::STATES * s.hidden),
            h: part(self.h, s.hidden),
        }
    }
}

/// Splits layer `l`'s saved values (the layers are in order) off the front of `saved`.
fn split_saved(saved: &[f32], dims: RnnDims, batch: usize) -> (Saved<&[f32]>, &[f32]) {
    let rows = batch * dims.steps;
    let (gates, rest) = saved.split_at(rows * dims.gate_rows());
    let (states, rest) = rest.split_at(rows * dims.cell.states() * dims.hidden);
    let (h, rest) = rest.split_at(rows * dims.hidden);
    (Saved { gates, states, h }, rest)
}

/// [`split_saved`], mutably.
fn split_saved_mut(
    saved: &mut [f32],
    dims: RnnDims,
    batch: usize,
) -> (Saved<&mut [f32]>, &mut [f32]) {
    let rows = batch * dims.steps;
    let (gates, rest) = saved.split_at_mut(rows * dims.gate_rows());
    let (states, rest) = rest.split_at_mut(rows * dims.cell.states() * dims.hidden);
    let (h, rest) = rest.split_at_mut(rows * dims.hidden);
    (Saved { gates, states, h }, rest)
}

/// Every row of `rows` (`bias.len()` values each) set to `bias`.
fn fill_rows(rows: &mut [f32], bias: &[f32]) {
    for row in rows.chunks_exact_mut(bias.len()) {
        copy(row, bias);
    }
}

/// The stack's output for `batch` samples, `io.y`: the top layer's hidden state after the last
/// step (`[batch, H]`) or at every step (`[batch, T, H]`), for the `io.batch` sequences of
/// `io.x` (`[batch, T, inputs]`), with zero initial states. Writes into `io.saved` what
/// [`rnn_backward`] needs ([`RnnDims::saved`] values per sample); `io.state` is not read.
///
/// `io.params` holds each layer's `weight_ih_l{l}` `[G*H, in_l]`, `weight_hh_l{l}` `[G*H, H]`,
/// `bias_ih_l{l}` and `bias_hh_l{l}` `[G*H]`, layer after layer, as PyTorch lays them out.
/// PyTorch's `nn.GRU(inputs, hidden, layers, batch_first=True)` (or `nn.LSTM`) computes the
/// same: `out[:, -1]` for the last state, `out` for the sequence.
///
/// # Panics
/// If a size in `dims` is 0, a buffer's length does not follow from `dims` and `batch`, or
/// `ctx.scratch` or `ctx.gemm` is shorter than [`rnn_scratch_len`] or [`rnn_gemm_len`].
pub fn rnn_forward(ctx: &mut Ctx<'_>, dims: RnnDims, io: Forward<'_>) {
    dims.check();
    let name = "rnn_forward";
    buffers::expect(name, "params", io.params.len(), dims.params());
    buffers::expect(name, "x", io.x.len(), io.batch * dims.input_len());
    buffers::expect(name, "y", io.y.len(), io.batch * dims.outputs());
    buffers::expect(name, "saved", io.saved.len(), io.batch * dims.saved());
    match dims.cell {
        CellKind::Gru => forward_stack::<GruStep>(ctx, dims, io),
        CellKind::Lstm => forward_stack::<LstmStep>(ctx, dims, io),
    }
}

/// [`rnn_forward`] with cell `C`: layer after layer, each reading the one below's hidden
/// states, then the output from the top layer's.
fn forward_stack<C: Cell>(ctx: &mut Ctx<'_>, dims: RnnDims, io: Forward<'_>) {
    let Forward {
        params,
        x,
        y,
        saved,
        batch,
        ..
    } = io;
    let (mut params, mut saved, mut input) = (params, saved, x);
    for l in 0..dims.layers {
        let (w, rest) = split_weights(params, dims, l);
        params = rest;
        let (mut layer, rest) = split_saved_mut(core::mem::take(&mut saved), dims, batch);
        saved = rest;
        forward_layer::<C>(ctx, Shape::of(dims, l, batch), &w, input, &mut layer);
        input = layer.h;
    }
    write_output(dims, input, y);
}

/// The output from the top layer's hidden states `h`, `[batch, T, H]`.
fn write_output(dims: RnnDims, h: &[f32], y: &mut [f32]) {
    if dims.sequence {
        copy(y, h);
        return;
    }
    let (t, n) = (dims.steps, dims.hidden);
    for (b, out) in y.chunks_exact_mut(n).enumerate() {
        let last = (b * t + t - 1) * n;
        copy(out, &h[last..last + n]);
    }
}

/// One layer's forward pass over `x`, `[batch, T, in]`, into `saved`.
fn forward_layer<C: Cell>(
    ctx: &mut Ctx<'_>,
    s: Shape,
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
        per_sample(h, s.steps * s.hidden),
        per_sample(&mut ctx.scratch[..s.batch * g], g),
    ];
    let pieces = recurrence_pieces(s, g);
    match pack_b(w_hh, s.batch.div_ceil(pieces), ctx.gemm) {
        Some(packed) => for_runs(s.batch, pieces, out, &|run: Range<usize>, out| {
            let s = Shape {
                batch: run.len(),
                ..s
            };
            forward_run::<C>(s, w.b_hh, &mut Recurrence::Packed(&packed), out);
        }),
        None => forward_run::<C>(s, w.b_hh, &mut Recurrence::Plain(w_hh, ctx.gemm), out),
    }
}

/// Runs of samples a recurrence is cut into: one per thread of the pool when its recurrent
/// products reach [`RECURRENCE_PARALLEL_FLOPS`], else one.
fn recurrence_pieces(s: Shape, g: usize) -> usize {
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
/// recurrent projection `h·W_hhᵀ + b_hh` of the run's previous hidden states, then the cell.
fn forward_run<C: Cell>(
    s: Shape,
    b_hh: &[f32],
    w_hh: &mut Recurrence<'_>,
    out: [PerSample<'_>; 4],
) {
    let g = b_hh.len();
    let [gates, states, h, recurrent] = out.map(|o| o.data);
    for t in 0..s.steps {
        fill_rows(recurrent, b_hh);
        if t > 0 {
            let prev = s.step_view(h, t - 1, s.hidden);
            w_hh.multiply(prev, 1.0, MatMut::row_major(recurrent, s.batch, g));
        }
        for b in 0..s.batch {
            forward_sample::<C>(s, b, t, &recurrent[b * g..(b + 1) * g], gates, states, h);
        }
    }
}

/// The cell's forward step for sample `b` at step `t`, given its recurrent projection.
fn forward_sample<C: Cell>(
    s: Shape,
    b: usize,
    t: usize,
    recurrent: &[f32],
    gates: &mut [f32],
    states: &mut [f32],
    h: &mut [f32],
) {
    let (n, g, k) = (s.hidden, C::GATES * s.hidden, C::STATES * s.hidden);
    let (h_before, h_now) = h.split_at_mut(s.at(b, t, n));
    let (states_before, states_now) = states.split_at_mut(s.at(b, t, k));
    let prev = (t > 0).then(|| Prev {
        h: &h_before[h_before.len() - n..],
        states: &states_before[states_before.len() - k..],
    });
    let at = s.at(b, t, g);
    let step = Step {
        gates: &mut gates[at..at + g],
        recurrent,
        states: &mut states_now[..k],
        h: &mut h_now[..n],
        prev,
    };
    cell::forward::<C>(step, n);
}

/// Where the gradient of a layer's output sequence comes from.
#[derive(Clone, Copy)]
enum Upstream<'a> {
    /// The stack's output gradient for the last state only, `[batch, H]`.
    Last(&'a [f32]),
    /// A gradient for every step, `[batch, T, H]`.
    Every(&'a [f32]),
}

impl<'a> Upstream<'a> {
    /// The gradients of the samples `run` alone.
    fn samples(self, s: Shape, run: Range<usize>) -> Upstream<'a> {
        match self {
            Upstream::Last(d) => Upstream::Last(&d[run.start * s.hidden..run.end * s.hidden]),
            Upstream::Every(d) => {
                Upstream::Every(&d[s.at(run.start, 0, s.hidden)..s.at(run.end, 0, s.hidden)])
            }
        }
    }

    /// The gradient for sample `b`'s hidden state at step `t`, if any.
    fn at(self, s: Shape, b: usize, t: usize) -> Option<&'a [f32]> {
        let n = s.hidden;
        match self {
            Upstream::Last(d) if t + 1 == s.steps => Some(&d[b * n..(b + 1) * n]),
            Upstream::Last(_) => None,
            Upstream::Every(d) => Some(&d[s.at(b, t, n)..s.at(b, t, n) + n]),
        }
    }
}

/// Backward's buffers in [`Ctx::scratch`], each `[batch, ...]`.
struct Scratch<'a> {
    /// d loss / d (input projection) of every step, `[batch, T, G*H]`.
    dx_gates: &'a mut [f32],
    /// d loss / d (recurrent projection) of every step, when it differs (GRU); else empty.
    dh_gates: &'a mut [f32],
    /// The previous hidden state of every step (0 at the first), `[batch, T, H]`.
    h_prev: &'a mut [f32],
    /// d loss / d h of the previous step, as far as it is known, `[batch, H]`.
    carry: &'a mut [f32],
    /// LSTM: d loss / d c carried between steps, `[batch, H]`; empty for a GRU.
    dc: &'a mut [f32],
}

impl<'a> Scratch<'a> {
    /// The buffers, and apart from them d loss / d (a layer's input sequence), `[batch, T, H]`:
    /// the upstream gradient of the layer below.
    fn split<C: Cell>(
        scratch: &'a mut [f32],
        dims: RnnDims,
        batch: usize,
    ) -> (Scratch<'a>, &'a mut [f32]) {
        let rows = batch * dims.steps;
        let (g, n) = (dims.gate_rows(), dims.hidden);
        let own = if C::OWN_RECURRENT_GRAD { rows * g } else { 0 };
        let cell = if C::CARRIES_CELL { batch * n } else { 0 };
        let (dx_gates, rest) = scratch.split_at_mut(rows * g);
        let (dh_gates, rest) = rest.split_at_mut(own);
        let (h_prev, rest) = rest.split_at_mut(rows * n);
        let (d_below, rest) = rest.split_at_mut(rows * n);
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
}

/// The backward pass of [`rnn_forward`]: given `io.dy` (d loss / d y, not modified), writes
/// d loss / d params into `io.dparams` (overwriting it; laid out as `io.params`, without the
/// tensors `io.frozen` names: [`RnnDims::trainable`] values) and d loss / d x into `io.dx`,
/// by backpropagation through every time step. `io.x`, `io.y` and `io.saved` are what
/// [`rnn_forward`] saw and wrote.
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
    match dims.cell {
        CellKind::Gru => backward_stack::<GruStep>(ctx, dims, io),
        CellKind::Lstm => backward_stack::<LstmStep>(ctx, dims, io),
    }
}

/// [`rnn_backward`] with cell `C`: layer after layer from the top, each passing the gradient
/// of its input sequence to the one below, as long as one of the layers below has a tensor
/// that trains or `io.dx` is wanted.
fn backward_stack<C: Cell>(ctx: &mut Ctx<'_>, dims: RnnDims, io: Backward<'_>) {
    let batch = io.batch;
    let Ctx { gemm, scratch, .. } = ctx;
    let (mut buf, d_below) = Scratch::split::<C>(scratch, dims, batch);
    let mut dx = io.dx;
    let input_grad_wanted = !matches!(dx, Grad::Skip);
    // Whether layers `0..=l` need backward: some of their tensors train, or `dx` is wanted.
    let needed = |l: usize| {
        input_grad_wanted
            || !io
                .frozen
                .freezes_first(RnnDims::TENSORS_PER_LAYER * (l + 1))
    };
    for l in (0..dims.layers).rev() {
        if !needed(l) {
            break;
        }
        let w = layer_weights(io.params, dims, l);
        let dw = layer_grads(io.dparams, io.frozen, dims, l);
        let (saved, input) = layer_saved(io.saved, io.x, dims, batch, l);
        let s = Shape::of(dims, l, batch);
        let upstream = match (l + 1 == dims.layers, dims.sequence) {
            (true, true) => Upstream::Every(io.dy),
            (true, false) => Upstream::Last(io.dy),
            (false, _) => Upstream::Every(d_below),
        };
        backward_through_time::<C>(gemm, s, &w, &saved, upstream, &mut buf);
        weight_grads((gemm, dims.gate_rows()), s, &saved, input, &mut buf, dw);
        let below = if l == 0 {
            dx.reborrow()
        } else if needed(l - 1) {
            Grad::Set(&mut *d_below)
        } else {
            Grad::Skip
        };
        input_grad(gemm, s, w.ih, buf.dx_gates, below);
    }
}

/// Layer `l`'s parameters.
fn layer_weights(params: &[f32], dims: RnnDims, l: usize) -> Weights<&[f32]> {
    let mut params = params;
    for k in 0..l {
        params = &params[dims.layer_params(k)..];
    }
    split_weights(params, dims, l).0
}

/// Layer `l`'s saved values and its input sequence: `x` for the first layer, the hidden
/// states of the layer below otherwise.
fn layer_saved<'a>(
    saved: &'a [f32],
    x: &'a [f32],
    dims: RnnDims,
    batch: usize,
    l: usize,
) -> (Saved<&'a [f32]>, &'a [f32]) {
    let (mut input, mut rest) = (x, saved);
    for _ in 0..l {
        let (below, r) = split_saved(rest, dims, batch);
        input = below.h;
        rest = r;
    }
    (split_saved(rest, dims, batch).0, input)
}

/// Backpropagation through time over one layer: the gate gradients of every step into
/// `buf.dx_gates` (and `buf.dh_gates`), in runs of samples ([`recurrence_pieces`]) that share
/// `W_hh`, packed once ([`through_time`]).
fn backward_through_time<C: Cell>(
    ws: &mut [f32],
    s: Shape,
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
            let s = Shape {
                batch: run.len(),
                ..s
            };
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

/// Backpropagation through time for the `s.batch` samples of `buf`: from the last step to the
/// first, each step's gradient for the previous hidden state through one product by `W_hh`.
fn through_time<C: Cell>(
    w_hh: &mut Recurrence<'_>,
    s: Shape,
    saved: &Saved<&[f32]>,
    upstream: Upstream<'_>,
    buf: &mut Scratch<'_>,
) {
    let g = C::GATES * s.hidden;
    buf.carry.fill(0.0);
    buf.dc.fill(0.0);
    for t in (0..s.steps).rev() {
        for b in 0..s.batch {
            backward_sample::<C>(s, (b, t), saved, upstream.at(s, b, t), buf);
        }
        if t == 0 {
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

/// The cell's backward step for sample `b` at step `t`, from `buf.carry` and `up`.
fn backward_sample<C: Cell>(
    s: Shape,
    (b, t): (usize, usize),
    saved: &Saved<&[f32]>,
    up: Option<&[f32]>,
    buf: &mut Scratch<'_>,
) {
    let (n, g, k) = (s.hidden, C::GATES * s.hidden, C::STATES * s.hidden);
    let prev = (t > 0).then(|| Prev {
        h: &saved.h[s.at(b, t - 1, n)..s.at(b, t - 1, n) + n],
        states: &saved.states[s.at(b, t - 1, k)..s.at(b, t - 1, k) + k],
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
/// column sums of the gate gradients, for the tensors not frozen (`Some`) of a layer of `g`
/// gate rows.
fn weight_grads(
    (ws, g): (&mut [f32], usize),
    s: Shape,
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

/// The hidden state before each step, `[batch, T, H]`: zeros, then `h` shifted by one step.
fn previous_states(s: Shape, h: &[f32], h_prev: &mut [f32]) {
    let n = s.hidden;
    for b in 0..s.batch {
        let sample = s.at(b, 0, n)..s.at(b, s.steps, n);
        let (first, rest) = h_prev[sample.clone()].split_at_mut(n);
        first.fill(0.0);
        copy(rest, &h[sample.start..sample.end - n]);
    }
}

/// d loss / d (the layer's input sequence) `= dGx·W_ih`, into `dx`.
fn input_grad(ws: &mut [f32], s: Shape, w_ih: &[f32], dx_gates: &[f32], dx: Grad<'_>) {
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
