//! The contract between `optimizer!` and the runtime.

use crate::lane::Lane;
use core::ops::Range;

/// The most slots (per-element state buffers) one rule may declare.
pub const MAX_SLOTS: usize = 8;
/// The most carried scalars (per-optimizer state updated once per step) one rule may declare.
pub const MAX_CARRIED: usize = 4;

/// An element-wise optimizer rule, implemented by `fusegraph::optimizer!`.
///
/// The value of the implementing type holds the hyper-parameters (all `f32`). A rule has
/// named *slots* (one `f32` per parameter element, such as Adam's `m` and `v`), named *carried
/// scalars* (one `f32` per optimizer, such as Nadam's `u_product`), a `step` part that turns
/// the hyper-parameters and the 1-based step number `t` into per-step scalars once per step,
/// and an `update` part that runs on lanes of eight elements of any [`Lane`] type. The `step`
/// part reads hyper-parameters that it computes with in `f64` through [`Decimals`](Self::Decimals),
/// which the optimizer keeps between steps: their decimal values are computed when they change.
pub trait Rule: Copy + Send + Sync + core::fmt::Debug {
    /// The rule's name, as the user spelled its type.
    const NAME: &'static str;
    /// Hyper-parameter names, in declaration order.
    const HYPER: &'static [&'static str];
    /// Slot names, in declaration order; slot `i` is buffer `i` of the state.
    const SLOTS: &'static [&'static str];
    /// Carried scalar names, in declaration order.
    const CARRIED: &'static [&'static str];
    /// The per-step scalars that the element-wise update reads.
    type Step: Copy + Send + Sync;
    /// The decimal values of the hyper-parameters that the `step` part widens to `f64`, one
    /// [`Decimal`](crate::math::Decimal) each, kept from one step to the next.
    type Decimals: Copy + Default + Send + Sync;

    /// The value of hyper-parameter `name`, if the rule has one of that name.
    fn hyper(&self, name: &str) -> Option<f32>;
    /// Sets hyper-parameter `name`; returns `false` (and changes nothing) for an unknown name.
    fn set_hyper(&mut self, name: &str, value: f32) -> bool;
    /// The initial value of slot `slot` (it may depend on the hyper-parameters).
    fn slot_init(&self, slot: usize) -> f32;
    /// The initial value of carried scalar `index`.
    fn carried_init(&self, index: usize) -> f32;
    /// Evaluates the `step` part for step `t` (1-based): updates the carried scalars in place
    /// and returns the scalars the update reads; widens hyper-parameters through `decimals`.
    fn begin_step(&self, t: u64, carried: &mut [f32], decimals: &mut Self::Decimals) -> Self::Step;
    /// The element-wise update of one lane of eight elements. `slots` holds exactly
    /// `Self::SLOTS.len()` lanes, in slot order. The fused pass runs it on the lane type
    /// [`lane::dispatch`](crate::lane::dispatch) picks, so it must give the same bits on every
    /// one: written with [`Lane`]'s operations, it does.
    fn update<L: Lane>(step: &Self::Step, p: &mut L, g: L, slots: &mut [L]);

    /// Whether the rule updates a tensor at a time ([`update_tensor`](Self::update_tensor)),
    /// because it reads per-tensor reductions, row or column statistics or matrix steps;
    /// `false` for an element-wise rule, which [`update`](Self::update) runs in one fused pass.
    const TENSOR_WISE: bool = false;
    /// The names of the rule's branches (`update name when ... { }`), in order: a tensor takes
    /// the first whose condition holds for its [`Shape`], or the one a route names. Empty for a
    /// rule with one `update`.
    const BRANCHES: &'static [&'static str] = &[];
    /// How each slot is shaped, in slot order: empty when every slot is shaped as the
    /// parameters.
    const SLOT_SHAPES: &'static [SlotShape] = &[];
    /// The branch a tensor of `shape` takes when no route names one.
    fn branch(shape: Shape) -> usize {
        let _ = shape;
        0
    }
    /// The values slot `slot` keeps for a tensor of `shape` on branch `branch`: as many as the
    /// tensor for an element-wise slot, a row's or a column's for row and column statistics, 0
    /// where the branch does not use the slot.
    fn slot_len(slot: usize, shape: Shape, branch: usize) -> usize {
        let _ = (slot, branch);
        shape.numel()
    }
    /// The scratch values one tensor's update needs (materialised temporaries, row and column
    /// sums, matrix steps); the optimizer allocates the largest once.
    fn work_len(shape: Shape, branch: usize) -> usize {
        let _ = (shape, branch);
        0
    }
    /// A bound on [`work_len`](Self::work_len) without the matrix steps: it is at most
    /// `WORK_PER_VALUE` values per value of the tensor, what an arena sized at compile time
    /// holds ([`Bytes::of`](crate::train::Bytes::of)).
    const WORK_PER_VALUE: usize = 0;
    /// Whether some branch has a matrix step, whose scratch
    /// ([`newton_schulz_work`](super::newton_schulz_work) for one thread) [`work_len`](Self::work_len) adds.
    const MATRIX_STEP: bool = false;
    /// The update of one whole tensor, for a [`TENSOR_WISE`](Self::TENSOR_WISE) rule: its
    /// passes over `tensor`'s buffers, on lanes of type `L`, giving the same bits on every lane
    /// type and thread count.
    fn update_tensor<L: Lane>(step: &Self::Step, tensor: TensorUpdate<'_>) {
        let _ = (step, tensor);
        unreachable!("an element-wise rule is updated by `update`")
    }

    /// The slots that start as the parameter (`z = p` in `slots`): the first step copies each
    /// tensor's parameters into them before its update
    /// ([`Optimizer::start_from`](super::Optimizer::start_from) does it before).
    const PARAM_SLOTS: &'static [usize] = &[];
    /// The names of the rule's views (`views { name = expr }`): other values of the parameters
    /// kept by the state, such as schedule-free's average, at which to evaluate.
    const VIEWS: &'static [&'static str] = &[];
    /// View `view` of one lane of parameters `p` with its element slots `slots` (in slot
    /// order; the lanes of a slot a tensor does not keep are the parameters).
    fn view<L: Lane>(&self, view: usize, p: L, slots: &[L]) -> L {
        let _ = (view, slots);
        p
    }

    /// The learning rate, the hyper-parameter named `lr`; `None` for a rule without one. A
    /// schedule ([`Config::schedule`](super::Config::schedule)) sets it each step.
    fn learning_rate(&self) -> Option<f32>;
    /// The learning rate, writable: the field of `lr`; `None` for a rule without one.
    fn learning_rate_mut(&mut self) -> Option<&mut f32>;
}

/// The name of the view at which to evaluate ([`Rule::VIEWS`]): the
/// [`Trainer`](crate::fit::Trainer) validates, evaluates and predicts at it (schedule-free
/// AdamW's average of its iterates, optax's `schedule_free_eval_params`).
pub const EVAL_VIEW: &str = "eval_params";

/// A rule with a learning rate, the hyper-parameter named `lr`: `optimizer!` implements it for
/// every rule that declares one. What sets the rate while training runs (the learning-rate
/// callbacks of `fit`) takes only such rules, so that a rule whose rate has another name is a
/// compile error there rather than a rate that never changes.
#[diagnostic::on_unimplemented(
    message = "`{Self}` has no learning rate that a schedule can set",
    label = "`{Self}` has no hyper-parameter named `lr`",
    note = "name the learning-rate hyper-parameter of `{Self}` `lr` in its `optimizer!` definition"
)]
pub trait LearningRate: Rule {
    /// The learning rate.
    fn lr(&self) -> f32;
    /// Sets the learning rate.
    fn set_lr(&mut self, lr: f32);
}

/// The shape of a parameter tensor as a rule sees it: its rank and, as a matrix, its rows (the
/// product of every axis but the last) and its columns (the last axis). A tensor of rank 1 is
/// one row; a scalar is one row of one column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Shape {
    /// The number of axes.
    pub rank: u32,
    /// The product of every axis but the last (1 for rank 0 and 1).
    pub rows: usize,
    /// The last axis (1 for rank 0).
    pub cols: usize,
}

impl Shape {
    /// A tensor of rank 1 with `n` values.
    pub const fn vector(n: usize) -> Self {
        Shape {
            rank: 1,
            rows: 1,
            cols: n,
        }
    }

    /// A `rows` x `cols` matrix.
    pub const fn matrix(rows: usize, cols: usize) -> Self {
        Shape {
            rank: 2,
            rows,
            cols,
        }
    }

    /// The shape of a tensor with axes `dims` (row-major).
    pub const fn of(dims: &[usize]) -> Self {
        let Some((&cols, lead)) = dims.split_last() else {
            return Shape {
                rank: 0,
                rows: 1,
                cols: 1,
            };
        };
        let (mut rows, mut k) = (1, 0);
        while k < lead.len() {
            rows *= lead[k];
            k += 1;
        }
        Shape {
            rank: dims.len() as u32,
            rows,
            cols,
        }
    }

    /// The number of values.
    pub const fn numel(self) -> usize {
        self.rows * self.cols
    }

    /// The same values as a `cols` x `rows` matrix: the shape of the transpose.
    pub const fn transposed(self) -> Self {
        Shape {
            rank: self.rank,
            rows: self.cols,
            cols: self.rows,
        }
    }
}

/// What a tensor-wise rule's [`update_tensor`](Rule::update_tensor) works on: one tensor's
/// parameters, gradient (after the gradient transforms of the [`Config`](super::Config)), its
/// part of every slot ([`Rule::slot_len`] values each) and its scratch.
pub struct TensorUpdate<'a> {
    /// The tensor's shape.
    pub shape: Shape,
    /// The branch it takes (an index into [`Rule::BRANCHES`]; 0 with one `update`).
    pub branch: usize,
    /// The parameters, updated in place.
    pub p: &'a mut [f32],
    /// The gradient.
    pub g: &'a [f32],
    /// The tensor's part of each slot, in slot order; the ones past the rule's are empty.
    pub slots: [&'a mut [f32]; MAX_SLOTS],
    /// Scratch of [`Rule::work_len`] values at least; its contents on entry are unspecified.
    pub work: &'a mut [f32],
}

/// Where slot `slot` of tensor `tensor` lies in the slot's buffer (the tensors one after the
/// other, each [`Rule::slot_len`] values), given each tensor's shape and branch.
pub fn slot_range<R: Rule>(
    slot: usize,
    tensor: usize,
    tensors: impl Iterator<Item = (Shape, usize)>,
) -> Range<usize> {
    let mut start = 0;
    for (i, (shape, branch)) in tensors.enumerate() {
        let len = R::slot_len(slot, shape, branch);
        if i == tensor {
            return start..start + len;
        }
        start += len;
    }
    start..start
}

/// How a slot of a tensor-wise rule is shaped, as declared in `slots`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotShape {
    /// As the parameters (no dimensions written).
    Element,
    /// `[rows]`: one value per row.
    Rows,
    /// `[rows, 1]`: one value per row, kept as a column (PyTorch's `row_var`).
    RowsByOne,
    /// `[cols]`: one value per column.
    Cols,
    /// `[1, cols]`: one value per column, kept as a row (PyTorch's `col_var`).
    OneByCols,
}

impl SlotShape {
    /// How slot `slot` of rule `R` is shaped (`Element` for a rule that declares none).
    pub fn of<R: Rule>(slot: usize) -> SlotShape {
        R::SLOT_SHAPES
            .get(slot)
            .copied()
            .unwrap_or(SlotShape::Element)
    }
}
