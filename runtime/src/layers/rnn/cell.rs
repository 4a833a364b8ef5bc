//! The element-wise part of one time step of a recurrent cell, for one sample, in lanes of any
//! [`Lane`] type over the hidden units: [`GruStep`] and [`LstmStep`]. The matrix products around them
//! (the input projection of every step, the recurrent product of each step, and their
//! gradients) are the driver's, in [`super`].
//!
//! A step reads the gate pre-activations in PyTorch's row-block order (GRU `r, z, n`; LSTM
//! `i, f, g, o`), `H` values per gate, and writes what backward needs: the gate activations
//! over the pre-activations, the cell's extra states and the hidden state. The tail of `H` is
//! padded into a lane and runs the same lane code, so a unit's result does not depend on `H`.

use crate::lane::{self, pieces, sigmoid, Lane, OnLanes};
use core::marker::PhantomData;

/// The buffers of one sample's forward step.
pub(crate) struct Step<'a> {
    /// The input projection with its bias, `GATES * H` values, overwritten with the gate
    /// activations.
    pub gates: &'a mut [f32],
    /// The recurrent projection `W_hh h + b_hh`, `GATES * H` values.
    pub recurrent: &'a [f32],
    /// The cell's extra states of this step, `STATES * H` values, written.
    pub states: &'a mut [f32],
    /// The new hidden state, `H` values, written.
    pub h: &'a mut [f32],
    /// The previous hidden state and extra states; `None` at the first step (zeros).
    pub prev: Option<Prev<'a>>,
}

/// The hidden state and extra states of the previous step.
#[derive(Clone, Copy)]
pub(crate) struct Prev<'a> {
    /// `H` values.
    pub h: &'a [f32],
    /// `STATES * H` values.
    pub states: &'a [f32],
}

/// The buffers of one sample's backward step.
pub(crate) struct StepGrad<'a> {
    /// d loss / d h of this step from the next step, `H` values; when
    /// [`DIRECT`](Cell::DIRECT), replaced by the part of d loss / d (previous h) that does not
    /// go through the recurrent product.
    pub carry: &'a mut [f32],
    /// d loss / d h of this step from the layer's output or the layer above, `H` values, if
    /// any: d loss / d h is `carry + up`.
    pub up: Option<&'a [f32]>,
    /// LSTM: d loss / d c of this step from the next step, replaced by d loss / d c of the
    /// previous step (`H` values); empty for a GRU.
    pub dc: &'a mut [f32],
    /// The gate activations forward wrote, `GATES * H` values.
    pub gates: &'a [f32],
    /// The extra states forward wrote, `STATES * H` values.
    pub states: &'a [f32],
    /// The previous step's states; `None` at the first step.
    pub prev: Option<Prev<'a>>,
    /// d loss / d (input projection), `GATES * H` values, written.
    pub dx_gates: &'a mut [f32],
    /// d loss / d (recurrent projection), `GATES * H` values, written when
    /// [`OWN_RECURRENT_GRAD`](Cell::OWN_RECURRENT_GRAD); empty otherwise (it equals
    /// `dx_gates`).
    pub dh_gates: &'a mut [f32],
}

impl StepGrad<'_> {
    /// d loss / d h of units `i..i + n`: `carry + up` (`carry` alone without `up`).
    #[inline(always)]
    fn dh<L: Lane>(&self, h: usize, i: usize, n: usize) -> L {
        let carry = lane::<L>(self.carry, 0, h, i, n);
        match self.up {
            Some(up) => carry + lane::<L>(up, 0, h, i, n),
            None => carry,
        }
    }
}

/// One time step of a recurrent cell over `h` hidden units.
pub(crate) trait Cell {
    /// Gates: rows of the weights per hidden unit (GRU 3, LSTM 4).
    const GATES: usize;
    /// Values per hidden unit a step keeps besides its gates and hidden state (GRU: `W_hn h +
    /// b_hn`; LSTM: `c` and `tanh(c)`).
    const STATES: usize;
    /// Whether the gradient of the recurrent projection differs from that of the input
    /// projection (GRU: `r` scales `W_hn h + b_hn`), so backward keeps both.
    const OWN_RECURRENT_GRAD: bool;
    /// Whether the previous hidden state reaches the new one other than through the recurrent
    /// product (GRU: `z * h`), so backward writes its part into [`StepGrad::carry`].
    const DIRECT: bool;
    /// Whether the cell carries a state besides `h` from step to step (LSTM's `c`), so
    /// backward carries its gradient in [`StepGrad::dc`].
    const CARRIES_CELL: bool;
    /// The forward step of one sample, on lanes of type `L`.
    fn forward<L: Lane>(step: Step<'_>, h: usize);
    /// The backward step of one sample, on lanes of type `L`.
    fn backward<L: Lane>(step: StepGrad<'_>, h: usize);
}

/// The forward step of cell `C` for one sample, on the lanes [`lane::dispatch`] picks.
pub(crate) fn forward<C: Cell>(step: Step<'_>, h: usize) {
    lane::dispatch(Forward::<C>(step, h, PhantomData));
}

/// The backward step of cell `C` for one sample, on the lanes [`lane::dispatch`] picks.
pub(crate) fn backward<C: Cell>(step: StepGrad<'_>, h: usize) {
    lane::dispatch(Backward::<C>(step, h, PhantomData));
}

/// A forward step of cell `C` over `h` units, to run on any lane type.
struct Forward<'a, C>(Step<'a>, usize, PhantomData<C>);

impl<C: Cell> OnLanes for Forward<'_, C> {
    type Output = ();
    #[inline(always)]
    fn run<L: Lane>(self) {
        C::forward::<L>(self.0, self.1);
    }
}

/// A backward step of cell `C` over `h` units, to run on any lane type.
struct Backward<'a, C>(StepGrad<'a>, usize, PhantomData<C>);

impl<C: Cell> OnLanes for Backward<'_, C> {
    type Output = ();
    #[inline(always)]
    fn run<L: Lane>(self) {
        C::backward::<L>(self.0, self.1);
    }
}

/// `H` values of gate `k` (or state `k`) of a row, from unit `i`, `n` of them, as a lane.
#[inline(always)]
fn lane<L: Lane>(row: &[f32], k: usize, h: usize, i: usize, n: usize) -> L {
    L::load_padded(&row[k * h + i..k * h + i + n])
}

/// Stores a lane into gate (or state) `k` of a row, units `i..i + n`.
#[inline(always)]
fn put<L: Lane>(row: &mut [f32], k: usize, h: usize, i: usize, n: usize, v: L) {
    v.store_partial(&mut row[k * h + i..k * h + i + n]);
}

/// Units `i..i + n` of state `k` of the previous step, zeros at the first step.
#[inline(always)]
fn prev_lane<L: Lane>(
    prev: Option<Prev<'_>>,
    state: Option<usize>,
    h: usize,
    i: usize,
    n: usize,
) -> L {
    match (prev, state) {
        (None, _) => L::ZERO,
        (Some(p), None) => lane(p.h, 0, h, i, n),
        (Some(p), Some(k)) => lane(p.states, k, h, i, n),
    }
}

/// PyTorch's GRU step, gates `r, z, n`:
/// `r = σ(x_r + h_r)`, `z = σ(x_z + h_z)`, `n = tanh(x_n + r * h_n)`,
/// `h' = (h - n) * z + n` (= `(1 - z) * n + z * h`, written as PyTorch's CPU cell computes it),
/// where `x_*` is the input projection with `b_i*` and `h_*` the recurrent one with `b_h*`.
/// Saves `r, z, n` over the gates and `h_n = W_hn h + b_hn` as its state.
pub(crate) struct GruStep;

impl Cell for GruStep {
    const GATES: usize = 3;
    const STATES: usize = 1;
    const OWN_RECURRENT_GRAD: bool = true;
    const DIRECT: bool = true;
    const CARRIES_CELL: bool = false;

    #[inline(always)]
    fn forward<L: Lane>(s: Step<'_>, h: usize) {
        for (i, n) in pieces::<L>(h) {
            let x = |k| lane::<L>(s.gates, k, h, i, n);
            let rec = |k| lane::<L>(s.recurrent, k, h, i, n);
            let r = sigmoid(x(0) + rec(0));
            let z = sigmoid(x(1) + rec(1));
            let hn = rec(2);
            let cand = (x(2) + r * hn).tanh();
            let prev = prev_lane::<L>(s.prev, None, h, i, n);
            put(s.gates, 0, h, i, n, r);
            put(s.gates, 1, h, i, n, z);
            put(s.gates, 2, h, i, n, cand);
            put(s.states, 0, h, i, n, hn);
            put(s.h, 0, h, i, n, (prev - cand) * z + cand);
        }
    }

    #[inline(always)]
    fn backward<L: Lane>(s: StepGrad<'_>, h: usize) {
        let one = L::ONE;
        for (i, n) in pieces::<L>(h) {
            let dh = s.dh::<L>(h, i, n);
            let (r, z, cand) = (
                lane(s.gates, 0, h, i, n),
                lane(s.gates, 1, h, i, n),
                lane(s.gates, 2, h, i, n),
            );
            let hn = lane(s.states, 0, h, i, n);
            let prev = prev_lane::<L>(s.prev, None, h, i, n);
            let d_cand = dh * (one - z) * (one - cand * cand);
            let dr = d_cand * hn * r * (one - r);
            let dz = dh * (prev - cand) * z * (one - z);
            put(s.dx_gates, 0, h, i, n, dr);
            put(s.dx_gates, 1, h, i, n, dz);
            put(s.dx_gates, 2, h, i, n, d_cand);
            put(s.dh_gates, 0, h, i, n, dr);
            put(s.dh_gates, 1, h, i, n, dz);
            put(s.dh_gates, 2, h, i, n, d_cand * r);
            put(s.carry, 0, h, i, n, dh * z);
        }
    }
}

/// PyTorch's LSTM step, gates `i, f, g, o`: `i = σ(·)`, `f = σ(·)`, `g = tanh(·)`, `o = σ(·)`
/// of the sums of both projections, `c' = f * c + i * g`, `h' = o * tanh(c')`. Saves the
/// activations over the gates and `c'`, `tanh(c')` as its states.
pub(crate) struct LstmStep;

impl Cell for LstmStep {
    const GATES: usize = 4;
    const STATES: usize = 2;
    const OWN_RECURRENT_GRAD: bool = false;
    const DIRECT: bool = false;
    const CARRIES_CELL: bool = true;

    #[inline(always)]
    fn forward<L: Lane>(s: Step<'_>, h: usize) {
        for (i, n) in pieces::<L>(h) {
            let pre = |k| lane::<L>(s.gates, k, h, i, n) + lane::<L>(s.recurrent, k, h, i, n);
            let input = sigmoid(pre(0));
            let forget = sigmoid(pre(1));
            let cand = pre(2).tanh();
            let output = sigmoid(pre(3));
            let c_prev = prev_lane::<L>(s.prev, Some(0), h, i, n);
            let c = forget * c_prev + input * cand;
            let tanh_c = c.tanh();
            put(s.gates, 0, h, i, n, input);
            put(s.gates, 1, h, i, n, forget);
            put(s.gates, 2, h, i, n, cand);
            put(s.gates, 3, h, i, n, output);
            put(s.states, 0, h, i, n, c);
            put(s.states, 1, h, i, n, tanh_c);
            put(s.h, 0, h, i, n, output * tanh_c);
        }
    }

    #[inline(always)]
    fn backward<L: Lane>(s: StepGrad<'_>, h: usize) {
        let one = L::ONE;
        for (i, n) in pieces::<L>(h) {
            let dh = s.dh::<L>(h, i, n);
            let gate = |k| lane::<L>(s.gates, k, h, i, n);
            let (input, forget, cand, output) = (gate(0), gate(1), gate(2), gate(3));
            let tanh_c = lane(s.states, 1, h, i, n);
            let c_prev = prev_lane::<L>(s.prev, Some(0), h, i, n);
            let dc = lane::<L>(s.dc, 0, h, i, n) + dh * output * (one - tanh_c * tanh_c);
            put(s.dx_gates, 0, h, i, n, dc * cand * input * (one - input));
            put(
                s.dx_gates,
                1,
                h,
                i,
                n,
                dc * c_prev * forget * (one - forget),
            );
            put(s.dx_gates, 2, h, i, n, dc * input * (one - cand * cand));
            put(
                s.dx_gates,
                3,
                h,
                i,
                n,
                dh * tanh_c * output * (one - output),
            );
            put(s.dc, 0, h, i, n, dc * forget);
        }
    }
}
