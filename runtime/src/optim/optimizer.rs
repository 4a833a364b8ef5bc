//! [`Optimizer`]: a rule, its configuration, and all of its state, in buffers it allocates
//! once or in an arena the caller owns; each step plans once ([`Plan`]) and runs the fused
//! pass over any run of tensors.

use super::config::{Config, NormClip};
use super::kernel::{
    apply_only, Buffers, Pass, Segment, PARALLEL_THRESHOLD, STEP_PARALLEL_THRESHOLD,
};
use super::mode::{Full, UpdateMode};
use super::plan::{Plan, MAX_SEGMENTS};
use super::rule::{Rule, Shape, MAX_CARRIED, MAX_SLOTS};
use super::storage::{Layout, Override, Storage};
use super::tensorwise::{self, Around, TensorBuffers};
use core::ops::Range;

use super::storage::DefaultStorage;

/// An optimizer: one [`Rule`], its [`Config`], and its state for a fixed parameter layout.
///
/// The parameters are one flat `f32` buffer made of tensors, one after the other. The state is
/// one buffer per slot, as long as the parameters (slot after slot), the EMA of the weights if
/// asked for, the carried scalars and the step counter. With the default storage
/// ([`Allocated`](super::Allocated)), construction allocates it once; a train step without an
/// allocator keeps it in its [`Arena`](super::Arena). [`step`](Self::step) allocates nothing.
///
/// ```
/// use fusegraph_runtime::optim::keras::Sgd;
/// use fusegraph_runtime::optim::{Config, NormClip, Optimizer};
/// let mut opt = Optimizer::with_config(
///     Sgd::default().with_lr(0.1),
///     &[3, 2],
///     Config::default().clip_norm(NormClip::Global(1.0)),
/// );
/// let mut params = vec![1.0_f32; 5];
/// opt.step(&mut params, &[0.0, 0.0, 0.0, 3.0, 4.0]);
/// assert_eq!(opt.iterations(), 1);
/// assert!((params[3] - (1.0 - 0.1 * 0.6)).abs() < 1e-7);
/// ```
pub struct Optimizer<R: Rule, U: UpdateMode = Full, S: Storage = DefaultStorage> {
    pub(crate) rule: R,
    pub(crate) config: Config<U>,
    pub(crate) layout: S::Layout,
    pub(crate) overrides: S::Overrides<R>,
    pub(crate) slots: S::Floats,
    pub(crate) ema: S::Floats,
    /// A tensor-wise rule's scratch ([`Rule::work_len`] of the largest need) and room for a
    /// transformed gradient; empty for an element-wise rule.
    pub(crate) work: S::Floats,
    pub(crate) carried: [f32; MAX_CARRIED],
    /// The decimals of the rule's hyper-parameters, computed when they change.
    decimals: R::Decimals,
    pub(crate) t: u64,
    /// Passes over at least this many elements are split across the pool.
    pub(crate) parallel_from: usize,
}

impl<R: Rule, U: UpdateMode, S: Storage> Optimizer<R, U, S> {
    /// An optimizer over buffers given by the storage: `slots` of [`slots_len`] values, `ema`
    /// as long as the parameters with [`Config::ema`] (else empty), `work` of [`work_len`]
    /// values, `overrides` one per tensor or none. Sets the slots and carried scalars to the
    /// rule's initial values.
    pub(crate) fn from_parts(
        rule: R,
        config: Config<U>,
        layout: S::Layout,
        overrides: S::Overrides<R>,
        mut slots: S::Floats,
        ema: S::Floats,
        work: S::Floats,
    ) -> Self {
        // The builders refuse global clipping layer by layer at compile time; a field set by
        // hand is refused here rather than ignored.
        assert!(
            !U::FUSED
                || !matches!(
                    config.clip_norm,
                    Some(NormClip::Global(_) | NormClip::GlobalTorch(_))
                ),
            "global-norm clipping needs every gradient before the first update: use the Full mode"
        );
        // A schedule sets the rule's learning rate: a rule without one would ignore it.
        assert!(
            config.schedule.is_none() || rule.learning_rate().is_some(),
            "a learning-rate schedule sets the hyper-parameter `lr`, and `{}` has none: name its \
             learning rate `lr` in its `optimizer!` definition",
            R::NAME
        );
        assert_eq!(slots.len(), slots_len::<R>(&layout), "slot storage length");
        assert!(
            work.len() >= work_len::<R, U>(&layout, &config),
            "work storage length"
        );
        let mut start = 0;
        for j in 0..R::SLOTS.len() {
            let len = slot_total::<R>(&layout, j);
            slots[start..start + len].fill(rule.slot_init(j));
            start += len;
        }
        let mut carried = [0.0; MAX_CARRIED];
        for (i, c) in carried.iter_mut().enumerate().take(R::CARRIED.len()) {
            *c = rule.carried_init(i);
        }
        Optimizer {
            rule,
            config,
            layout,
            overrides,
            slots,
            ema,
            work,
            carried,
            decimals: R::Decimals::default(),
            t: 0,
            parallel_from: PARALLEL_THRESHOLD,
        }
    }

    /// Whether the gradients of the next update were written by several threads of the pool:
    /// then its passes split across the pool from [`STEP_PARALLEL_THRESHOLD`] elements, so that
    /// each thread updates what it wrote; otherwise from [`PARALLEL_THRESHOLD`].
    pub(crate) fn set_gradients_spread(&mut self, spread: bool) {
        self.parallel_from = if spread {
            STEP_PARALLEL_THRESHOLD
        } else {
            PARALLEL_THRESHOLD
        };
    }

    /// The rule (its hyper-parameters).
    pub fn rule(&self) -> &R {
        &self.rule
    }
    /// The rule, to change hyper-parameters between steps.
    pub fn rule_mut(&mut self) -> &mut R {
        &mut self.rule
    }
    /// What goes around the rule.
    pub fn config(&self) -> &Config<U> {
        &self.config
    }
    /// Number of completed steps (Keras `iterations`); the next step is `t = iterations + 1`.
    pub fn iterations(&self) -> u64 {
        self.t
    }
    /// Sets the number of completed steps (when restoring a state).
    pub fn set_iterations(&mut self, t: u64) {
        self.t = t;
    }
    /// Total number of parameter elements.
    pub fn len(&self) -> usize {
        self.layout.len()
    }
    /// `true` when there are no parameters.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Number of tensors.
    pub fn tensor_count(&self) -> usize {
        self.layout.tensor_count()
    }
    /// Where tensor `i` lies in the flat buffer.
    pub fn tensor_range(&self, i: usize) -> Option<Range<usize>> {
        (i < self.tensor_count()).then(|| self.layout.tensor_range(i))
    }

    /// The shape of tensor `i`.
    pub fn tensor_shape(&self, i: usize) -> Option<Shape> {
        (i < self.tensor_count()).then(|| self.layout.tensor_shape(i))
    }
    /// The branch of a tensor-wise rule that tensor `i` takes (an index into
    /// [`Rule::BRANCHES`]; 0 for a rule with one `update`).
    pub fn tensor_branch(&self, i: usize) -> Option<usize> {
        (i < self.tensor_count()).then(|| self.layout.tensor_branch::<R>(i))
    }
    /// Where slot `j` lies in the buffer of every slot.
    pub(crate) fn slot_span(&self, j: usize) -> Range<usize> {
        let start: usize = (0..j).map(|k| slot_total::<R>(&self.layout, k)).sum();
        start..start + slot_total::<R>(&self.layout, j)
    }
    /// Where tensor `i`'s part of slot `j` lies in the slot's buffer: the tensor's range for an
    /// element-wise slot; [`Rule::slot_len`] values, after the other tensors', for a
    /// tensor-wise rule's.
    pub fn slot_range(&self, j: usize, i: usize) -> Option<Range<usize>> {
        let r = self.tensor_range(i)?;
        if !R::TENSOR_WISE {
            return Some(r);
        }
        let layout = &self.layout;
        let tensors = (0..layout.tensor_count())
            .map(|k| (layout.tensor_shape(k), layout.tensor_branch::<R>(k)));
        Some(super::rule::slot_range::<R>(j, i, tensors))
    }
    /// The whole buffer of slot `name` (all tensors).
    pub fn slot(&self, name: &str) -> Option<&[f32]> {
        let j = R::SLOTS.iter().position(|s| *s == name)?;
        Some(&self.slots[self.slot_span(j)])
    }
    /// Slot `name` of tensor `i` (empty where tensor `i`'s branch keeps none).
    pub fn slot_tensor(&self, name: &str, i: usize) -> Option<&[f32]> {
        let j = R::SLOTS.iter().position(|s| *s == name)?;
        let r = self.slot_range(j, i)?;
        Some(&self.slot(name)?[r])
    }
    /// Slot `name` of tensor `i`, writable.
    pub fn slot_tensor_mut(&mut self, name: &str, i: usize) -> Option<&mut [f32]> {
        let j = R::SLOTS.iter().position(|s| *s == name)?;
        let r = self.slot_range(j, i)?;
        let span = self.slot_span(j);
        Some(&mut self.slots[span][r])
    }
    /// The EMA of the parameters, when [`Config::ema`] is set.
    pub fn ema(&self) -> Option<&[f32]> {
        self.config.ema.map(|_| &*self.ema)
    }
    /// The EMA of the parameters, writable (when restoring a state).
    pub fn ema_mut(&mut self) -> Option<&mut [f32]> {
        self.config.ema.map(|_| &mut *self.ema)
    }
    /// The value of carried scalar `name`.
    pub fn carried(&self, name: &str) -> Option<f32> {
        let i = R::CARRIED.iter().position(|s| *s == name)?;
        Some(self.carried[i])
    }

    /// Copies the parameters into the slots that start as them ([`Rule::PARAM_SLOTS`], as
    /// optax's `init(params)` does), so that the state reads as it will at the first step; the
    /// first step copies the parameters it is given anyway.
    ///
    /// Panics if `params` is not as long as the layout.
    pub fn start_from(&mut self, params: &[f32]) {
        assert_eq!(params.len(), self.len(), "parameter buffer length");
        self.copy_param_slots(0..self.len(), params);
    }

    /// Copies `params`, the range `at` of the flat buffer, into the slots that start as the
    /// parameters, for the tensors inside `at` whose branch keeps them.
    fn copy_param_slots(&mut self, at: Range<usize>, params: &[f32]) {
        for &j in R::PARAM_SLOTS {
            let span = self.slot_span(j);
            for i in 0..self.tensor_count() {
                let r = self.layout.tensor_range(i);
                let Some(slot) = self.slot_range(j, i) else {
                    continue;
                };
                if r.start < at.start || r.end > at.end || slot.len() != r.len() {
                    continue;
                }
                let local = r.start - at.start..r.end - at.start;
                self.slots[span.clone()][slot].copy_from_slice(&params[local]);
            }
        }
    }

    /// Writes view `view` of [`Rule::VIEWS`] (schedule-free's `eval_params`) of `params` into
    /// `out`: each tensor's values computed on lanes from its parameters and element slots.
    /// A tensor whose branch keeps no such slot reads its parameters in its place.
    ///
    /// Panics if `view` is not an index of [`Rule::VIEWS`], or `params` or `out` is not as
    /// long as the layout.
    pub fn view(&self, view: usize, params: &[f32], out: &mut [f32]) {
        assert_eq!(params.len(), self.len(), "parameter buffer length");
        assert_eq!(out.len(), self.len(), "view buffer length");
        for i in 0..self.tensor_count() {
            let r = self.layout.tensor_range(i);
            self.view_tensor(view, i, &params[r.clone()], &mut out[r]);
        }
    }

    /// [`view`](Self::view) of tensor `i` alone: `params` and `out` are its values.
    ///
    /// Panics if `view` is not an index of [`Rule::VIEWS`], `i` not a tensor, or `params` or
    /// `out` not as long as the tensor.
    pub fn view_tensor(&self, view: usize, i: usize, params: &[f32], out: &mut [f32]) {
        assert!(view < R::VIEWS.len(), "{} has no view {view}", R::NAME);
        let n = self.layout.tensor_range(i).len();
        assert_eq!(params.len(), n, "tensor {i}'s parameters");
        assert_eq!(out.len(), n, "tensor {i}'s view");
        let slots: [&[f32]; MAX_SLOTS] = core::array::from_fn(|j| {
            let slot = match self.slot_range(j, i) {
                Some(slot) if j < R::SLOTS.len() && slot.len() == n => slot,
                _ => return &[][..],
            };
            &self.slots[self.slot_span(j)][slot]
        });
        super::views::write::<R>(&self.rule, view, params, slots, out);
    }

    /// The learning rate the next step will use (the schedule's value, or the rule's `lr`).
    pub fn current_learning_rate(&self) -> Option<f32> {
        self.config
            .scheduled_rate(self.t)
            .or(self.rule.learning_rate())
    }

    /// One optimizer step: gradient transforms, weight decay, the rule and the EMA, in one fused
    /// pass over `params` (updated in place) and the state. Allocates nothing.
    ///
    /// Panics if `params` or `grads` is not as long as the layout given at construction.
    pub fn step(&mut self, params: &mut [f32], grads: &[f32]) {
        let n = self.len();
        assert_eq!(params.len(), n, "parameter buffer length");
        self.step_runs(params, grads, core::iter::once((0..n, 0..n)));
    }

    /// [`step`](Self::step) over parameters among which some do not train: `runs` gives,
    /// for each run of trainable tensors, its range of `params` and of `grads` (as long as
    /// the layout, the trainable tensors one after the other), in order.
    pub(crate) fn step_runs(
        &mut self,
        params: &mut [f32],
        grads: &[f32],
        runs: impl Iterator<Item = (Range<usize>, Range<usize>)>,
    ) {
        assert_eq!(grads.len(), self.len(), "gradient buffer length");
        let mut plan = self.plan();
        let layout = &self.layout;
        plan.clip_globally(
            &self.config,
            (0..layout.tensor_count()).map(|i| &grads[layout.tensor_range(i)]),
        );
        for (p, g) in runs {
            self.update(&plan, g.clone(), &mut params[p], &grads[g]);
        }
        self.finish(&plan);
    }

    /// Plans the next step: the schedule, the rule's per-step values and the carried scalars,
    /// once. Global-norm clipping is set on the plan once every gradient is known.
    pub(crate) fn plan(&mut self) -> Plan<R> {
        Plan::begin(
            self.rule,
            &self.config,
            self.t,
            &mut self.carried,
            &mut self.decimals,
        )
    }

    /// Ends the step that `plan` planned.
    pub(crate) fn finish(&mut self, plan: &Plan<R>) {
        self.t = plan.t;
    }

    /// Updates the tensors lying in `at` of the flat buffer; `params` and `grads` are that
    /// range. Consecutive tensors that share their per-step values form one segment.
    pub(crate) fn update(
        &mut self,
        plan: &Plan<R>,
        at: Range<usize>,
        params: &mut [f32],
        grads: &[f32],
    ) {
        if at.is_empty() {
            return;
        }
        if plan.t == 1 && !R::PARAM_SLOTS.is_empty() {
            self.copy_param_slots(at.clone(), params);
        }
        if R::TENSOR_WISE {
            self.update_tensors(plan, at, params, grads);
            return;
        }
        if !self.per_tensor_values() {
            // Every tensor shares the per-step values: one segment over the whole range.
            let (segment, _) = plan.segment(&self.config, Override::NONE, &[]);
            let whole = Segment {
                end: at.len(),
                ..segment
            };
            self.pass(plan, &[whole], at.clone(), &at, params, grads);
            return;
        }
        let mut segments = [plan.empty_segment(); MAX_SEGMENTS];
        let (mut count, mut last_shared, mut start) = (0, false, at.start);
        for i in 0..self.layout.tensor_count() {
            let r = self.layout.tensor_range(i);
            if r.start >= at.end {
                break;
            }
            if r.start < at.start || r.is_empty() {
                continue;
            }
            debug_assert!(r.end <= at.end, "an update covers whole tensors");
            let over = self.overrides.get(i).copied().unwrap_or(Override::NONE);
            let local = r.start - at.start..r.end - at.start;
            let (segment, shared) = plan.segment(&self.config, over, &grads[local]);
            match segments[..count].last_mut() {
                Some(last) if shared && last_shared => last.end = r.end - start,
                _ => {
                    if count == MAX_SEGMENTS {
                        let end = start + segments[count - 1].end;
                        self.pass(plan, &segments[..count], start..end, &at, params, grads);
                        start = end;
                        count = 0;
                    }
                    segments[count] = Segment {
                        end: r.end - start,
                        ..segment
                    };
                    count += 1;
                }
            }
            last_shared = shared;
        }
        if count > 0 {
            let end = start + segments[count - 1].end;
            self.pass(plan, &segments[..count], start..end, &at, params, grads);
        }
    }

    /// Updates the tensors lying in `at` with a tensor-wise rule, one tensor at a time: a
    /// tensor's reductions need all of it.
    fn update_tensors(
        &mut self,
        plan: &Plan<R>,
        at: Range<usize>,
        params: &mut [f32],
        grads: &[f32],
    ) {
        let around = Around {
            clip_value: plan.pass.clip_value,
            ema_momentum: plan.pass.ema_momentum,
            ema_overwrite: plan.pass.ema_overwrite,
        };
        let spans: [Range<usize>; MAX_SLOTS] = core::array::from_fn(|j| {
            if j < R::SLOTS.len() {
                self.slot_span(j)
            } else {
                0..0
            }
        });
        let mut starts = [0usize; MAX_SLOTS];
        let gradient_room = gradient_room::<R, U>(&self.layout, &self.config);
        let (gradient, work) = self.work.split_at_mut(gradient_room);
        for i in 0..self.layout.tensor_count() {
            let r = self.layout.tensor_range(i);
            let shape = self.layout.tensor_shape(i);
            let branch = self.layout.tensor_branch::<R>(i);
            let lens: [usize; MAX_SLOTS] = core::array::from_fn(|j| {
                if j < R::SLOTS.len() {
                    R::slot_len(j, shape, branch)
                } else {
                    0
                }
            });
            let inside = r.start >= at.start && r.end <= at.end && !r.is_empty();
            if inside {
                let over = self.overrides.get(i).copied().unwrap_or(Override::NONE);
                let local = r.start - at.start..r.end - at.start;
                let (segment, _) = plan.segment(&self.config, over, &grads[local.clone()]);
                let mut slots: [&mut [f32]; MAX_SLOTS] = Default::default();
                let mut rest = &mut *self.slots;
                let mut taken = 0;
                for j in 0..R::SLOTS.len() {
                    let from = spans[j].start + starts[j];
                    let (_, tail) = core::mem::take(&mut rest).split_at_mut(from - taken);
                    let (mine, tail) = tail.split_at_mut(lens[j]);
                    slots[j] = mine;
                    rest = tail;
                    taken = from + lens[j];
                }
                let ema = if around.ema_momentum.is_some() {
                    &mut self.ema[r.clone()]
                } else {
                    &mut []
                };
                tensorwise::update_tensor::<R>(
                    &segment,
                    around,
                    shape,
                    branch,
                    TensorBuffers {
                        params: &mut params[local.clone()],
                        grads: &grads[local],
                        slots,
                        ema,
                        gradient: &mut *gradient,
                        work: &mut *work,
                    },
                );
            }
            for j in 0..R::SLOTS.len() {
                starts[j] += lens[j];
            }
        }
    }

    /// Whether some tensor has per-step values of its own: per-tensor clipping, or an override.
    fn per_tensor_values(&self) -> bool {
        matches!(self.config.clip_norm, Some(NormClip::PerTensor(_)))
            || self
                .overrides
                .iter()
                .any(|o| o.rule.is_some() || o.decay.is_some())
    }

    /// One fused pass over `piece` of the flat buffer (inside `at`, the range of `params` and
    /// `grads`).
    #[inline]
    fn pass(
        &mut self,
        plan: &Plan<R>,
        segments: &[Segment<R>],
        piece: Range<usize>,
        at: &Range<usize>,
        params: &mut [f32],
        grads: &[f32],
    ) {
        let local = piece.start - at.start..piece.end - at.start;
        let n = self.layout.len();
        let mut slots: [&mut [f32]; MAX_SLOTS] = Default::default();
        let mut rest = &mut *self.slots;
        for s in slots.iter_mut().take(R::SLOTS.len()) {
            let (head, tail) = core::mem::take(&mut rest).split_at_mut(n);
            *s = &mut head[piece.clone()];
            rest = tail;
        }
        let ema = if plan.pass.ema_momentum.is_some() {
            &mut self.ema[piece]
        } else {
            &mut []
        };
        apply_only::<R, U::Updates>(
            segments,
            &Pass {
                parallel_from: self.parallel_from,
                ..plan.pass
            },
            Buffers {
                params: &mut params[local.clone()],
                grads: &grads[local],
                slots,
                ema,
            },
        );
    }
}

/// The values slot `j` keeps over every tensor of `layout`.
fn slot_total<R: Rule>(layout: &impl Layout, j: usize) -> usize {
    if !R::TENSOR_WISE {
        return layout.len();
    }
    (0..layout.tensor_count())
        .map(|i| R::slot_len(j, layout.tensor_shape(i), layout.tensor_branch::<R>(i)))
        .sum()
}

/// The values every slot of rule `R` keeps over the tensors of `layout`.
pub(crate) fn slots_len<R: Rule>(layout: &impl Layout) -> usize {
    (0..R::SLOTS.len())
        .map(|j| slot_total::<R>(layout, j))
        .sum()
}

/// The room for a transformed gradient that a tensor-wise rule needs with `config`: as long as
/// the largest tensor when the gradient may be scaled, clipped or given an L2 term, else none.
fn gradient_room<R: Rule, U: UpdateMode>(layout: &impl Layout, config: &Config<U>) -> usize {
    let transforms = config.clip_value.is_some()
        || config.clip_norm.is_some()
        || config.maximize
        || matches!(config.weight_decay, super::config::WeightDecay::L2(_));
    if !R::TENSOR_WISE || !transforms {
        return 0;
    }
    (0..layout.tensor_count())
        .map(|i| layout.tensor_range(i).len())
        .max()
        .unwrap_or(0)
}

/// The scratch an optimizer of rule `R` over `layout` with `config` needs: room for a
/// transformed gradient and the largest [`Rule::work_len`] of its tensors (none for an
/// element-wise rule).
pub(crate) fn work_len<R: Rule, U: UpdateMode>(layout: &impl Layout, config: &Config<U>) -> usize {
    if !R::TENSOR_WISE {
        return 0;
    }
    let rule_work = (0..layout.tensor_count())
        .map(|i| R::work_len(layout.tensor_shape(i), layout.tensor_branch::<R>(i)))
        .max()
        .unwrap_or(0);
    gradient_room::<R, U>(layout, config) + rule_work
}
