//! Training without an allocator: [`EmbeddedStep`] keeps every buffer of a train step in one
//! arena the caller owns (a `static`, or an array on the stack), sized by a constant, and can
//! update each layer during the backward pass ([`Fused`]) so that no full gradient buffer
//! exists.

mod cell;
mod config;

pub use cell::Static;
pub use config::{AllGradientsFirst, Full, Fused, StepConfig, UpdateMode};

use super::model::{batch_of, check_targets, Bytes, Model, NamedTensor};
use crate::layers::{Ctx, Grad, Mode};
use crate::loss::Loss;
use crate::math;
use crate::optim::MAX_CARRIED;
use crate::optim::{apply, sum_squares, Buffers, NormClip, Pass, Rule, Segment, WeightDecay};
use crate::rng::{Rng, Seed};
use core::fmt;
use core::marker::PhantomData;

/// The target type of a model's loss.
type Target<M> = <<M as Model>::Loss as Loss>::Target;

/// An arena of the wrong length for a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArenaLength {
    /// The values the step needs ([`EmbeddedStep::FLOATS`]).
    pub needed: usize,
    /// The values given.
    pub given: usize,
}

impl fmt::Display for ArenaLength {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the arena has {} values, the step needs {}",
            self.given, self.needed
        )
    }
}

impl core::error::Error for ArenaLength {}

/// The per-step values of the update, computed once before the backward pass.
struct Plan<R: Rule> {
    step: R::Step,
    sign: f32,
    l2: f32,
    decay: f32,
    pass: Pass,
}

/// The optimizer's state and options, apart from the buffers the backward pass borrows.
struct Update<'a, M: Model, R: Rule> {
    rule: R,
    carried: [f32; MAX_CARRIED],
    t: u64,
    clip_value: Option<f32>,
    clip_norm: Option<NormClip>,
    weight_decay: WeightDecay,
    maximize: bool,
    schedule: Option<crate::optim::Schedule>,
    /// Slots, layer after layer; each layer's slots slot after slot, so that one fused pass
    /// updates a layer.
    slots: &'a mut [f32],
    model: PhantomData<fn() -> M>,
}

impl<M: Model, R: Rule> Update<'_, M, R> {
    /// Evaluates the rule's `step` part and the options for the next step, as
    /// [`Optimizer::step`](crate::optim::Optimizer::step) does.
    fn plan(&mut self) -> Plan<R> {
        let done = self.t;
        let mut base = self.rule;
        if let Some(s) = self.schedule {
            base.set_hyper("lr", s.at(done));
        }
        let step = base.begin_step(done + 1, &mut self.carried[..R::CARRIED.len()]);
        let lr = base.learning_rate().unwrap_or(0.0);
        let (l2, decay) = match self.weight_decay {
            WeightDecay::None => (0.0, 0.0),
            WeightDecay::L2(wd) => (wd, 0.0),
            WeightDecay::Decoupled(wd) => (0.0, wd * lr),
        };
        Plan {
            step,
            sign: if self.maximize { -1.0 } else { 1.0 },
            l2,
            decay,
            pass: Pass {
                clip_value: self.clip_value,
                ema_momentum: None,
                ema_overwrite: false,
            },
        }
    }

    /// The factor of global-norm clipping over `grads` (all of them), 1 without it.
    fn global_scale(&self, grads: &[f32]) -> f32 {
        let norm = || {
            let total: f64 = M::TENSORS
                .iter()
                .map(|t| sum_squares(&grads[t.offset..t.offset + t.tensor.len()]))
                .sum();
            math::sqrt(total) as f32
        };
        match self.clip_norm {
            Some(NormClip::Global(c)) => c * (1.0 / norm()).min(1.0 / c),
            Some(NormClip::GlobalTorch(c)) => (c / (norm() + 1e-6)).min(1.0),
            _ => 1.0,
        }
    }

    /// Updates the layers whose parameters lie in `offset..offset + params.len()` of the
    /// model's buffer (`params` and `grads` are that range): one fused pass per layer, over
    /// its tensors as segments.
    fn layer(
        &mut self,
        plan: &Plan<R>,
        scale: f32,
        offset: usize,
        params: &mut [f32],
        grads: &[f32],
    ) {
        let n_slots = R::SLOTS.len();
        let end = offset + params.len();
        for layer in layers(M::TENSORS) {
            let (start, len) = span(layer);
            let stop = start + len;
            if start < offset || stop > end || start == stop {
                continue;
            }
            let mut segments = [Segment::<R> {
                end: 0,
                step: plan.step,
                grad_scale: plan.sign * scale,
                l2: plan.l2,
                decay: plan.decay,
            }; MAX_LAYER_TENSORS];
            for (segment, t) in segments.iter_mut().zip(layer) {
                let at = t.offset - offset;
                segment.end = t.offset + t.tensor.len() - start;
                if let Some(NormClip::PerTensor(c)) = self.clip_norm {
                    let g = &grads[at..at + t.tensor.len()];
                    let norm = math::sqrt(sum_squares(g) as f32);
                    segment.grad_scale = plan.sign * (c / norm.max(c));
                }
            }
            // Without per-tensor clipping every tensor of the layer has the same per-step
            // values: one segment (the update is element-wise, so the bits do not change).
            let count = if matches!(self.clip_norm, Some(NormClip::PerTensor(_))) {
                layer.len()
            } else {
                segments[0].end = len;
                1
            };
            apply(
                &segments[..count],
                &plan.pass,
                Buffers {
                    params: &mut params[start - offset..stop - offset],
                    grads: &grads[start - offset..stop - offset],
                    slots: &mut self.slots[start * n_slots..stop * n_slots],
                    ema: &mut [],
                },
            );
        }
    }
}

/// The most tensors one layer may have in an [`EmbeddedStep`] (one segment of the layer's
/// fused pass each).
pub const MAX_LAYER_TENSORS: usize = 16;

/// The model's tensors grouped by layer, in order.
fn layers(tensors: &'static [NamedTensor]) -> impl Iterator<Item = &'static [NamedTensor]> {
    tensors.chunk_by(|a, b| a.layer == b.layer)
}

/// The most tensors of one layer in `tensors`.
const fn most_tensors_per_layer(tensors: &[NamedTensor]) -> usize {
    let (mut most, mut run, mut i) = (0, 0, 0);
    while i < tensors.len() {
        run = if i > 0 && same(tensors[i].layer, tensors[i - 1].layer) {
            run + 1
        } else {
            1
        };
        if run > most {
            most = run;
        }
        i += 1;
    }
    most
}

/// `a == b` for strings, in a constant.
const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// A train step of model `M` with rule `R` for batches of at most `B` samples whose buffers
/// (gradients, activations, workspace, optimizer slots) are slices of one arena of
/// [`FLOATS`](Self::FLOATS) values that the caller owns: no allocator is needed. With
/// `U = `[`Fused`] (the default) each layer is updated as soon as its gradient is known, and
/// the gradient buffer only holds the largest layer's.
///
/// ```
/// use fusegraph_runtime::train::{EmbeddedStep, Fused, Model};
/// # fn demo<M: Model, R: fusegraph_runtime::optim::Rule>(model: &mut M, rule: R, x: &[f32], y: &[<M::Loss as fusegraph_runtime::loss::Loss>::Target], arena: &mut [f32]) {
/// let mut step = EmbeddedStep::<M, R, 8, Fused>::new(model, rule, arena).unwrap();
/// let loss = step.run(model, x, y);
/// # let _ = loss; }
/// ```
pub struct EmbeddedStep<'a, M: Model, R: Rule, const B: usize, U: UpdateMode = Fused> {
    update: Update<'a, M, R>,
    grads: &'a mut [f32],
    acts: &'a mut [f32],
    node_grads: &'a mut [f32],
    dx: &'a mut [f32],
    scratch: &'a mut [f32],
    gemm: &'a mut [f32],
    state: &'a mut [f32],
    seed: Seed,
    mode: PhantomData<U>,
}

/// The offset and length of a layer's parameters.
fn span(layer: &[NamedTensor]) -> (usize, usize) {
    let last = &layer[layer.len() - 1];
    (
        layer[0].offset,
        last.offset + last.tensor.len() - layer[0].offset,
    )
}

/// Takes the first `n` values of `rest`.
fn carve<'a>(rest: &mut &'a mut [f32], n: usize) -> &'a mut [f32] {
    let (head, tail) = core::mem::take(rest).split_at_mut(n);
    *rest = tail;
    head
}

impl<'a, M: Model, R: Rule, const B: usize, U: UpdateMode> EmbeddedStep<'a, M, R, B, U> {
    /// Bytes of the model and of everything the step keeps in its arena.
    pub const BYTES: Bytes = Bytes::of::<M, R>(B, U::FUSED);

    /// Values of the arena: everything in [`BYTES`](Self::BYTES) but the model's own
    /// parameters and state.
    pub const FLOATS: usize = (Self::BYTES.total() - Self::BYTES.params) / 4;

    /// A step for `model` keeping its buffers in `arena`, which must hold exactly
    /// [`FLOATS`](Self::FLOATS) values.
    pub fn new(model: &M, rule: R, arena: &'a mut [f32]) -> Result<Self, ArenaLength> {
        Self::with_config(model, rule, StepConfig::new(), arena)
    }

    /// A step with clipping, weight decay or a schedule.
    pub fn with_config(
        model: &M,
        rule: R,
        config: StepConfig<U>,
        arena: &'a mut [f32],
    ) -> Result<Self, ArenaLength> {
        const {
            assert!(
                most_tensors_per_layer(M::TENSORS) <= MAX_LAYER_TENSORS,
                "a layer has more tensors than EmbeddedStep's MAX_LAYER_TENSORS"
            )
        };
        if arena.len() != Self::FLOATS {
            return Err(ArenaLength {
                needed: Self::FLOATS,
                given: arena.len(),
            });
        }
        debug_assert_eq!(model.params().len(), M::PARAMS);
        let grads_len = if U::FUSED {
            M::MAX_LAYER_PARAMS
        } else {
            M::PARAMS
        };
        let mut rest = arena;
        let slots = carve(&mut rest, R::SLOTS.len() * M::PARAMS);
        for layer in layers(M::TENSORS) {
            let (o, n) = span(layer);
            let layer_slots = &mut slots[o * R::SLOTS.len()..(o + n) * R::SLOTS.len()];
            for (j, s) in layer_slots.chunks_mut(n.max(1)).enumerate() {
                s.fill(rule.slot_init(j));
            }
        }
        let mut carried = [0.0; MAX_CARRIED];
        for (i, c) in carried.iter_mut().enumerate().take(R::CARRIED.len()) {
            *c = rule.carried_init(i);
        }
        let grads = carve(&mut rest, grads_len);
        let acts = carve(&mut rest, M::ACTIVATIONS * B);
        let node_grads = carve(&mut rest, M::NODE_GRADS * B);
        let dx = carve(&mut rest, M::IN * B);
        let scratch = carve(&mut rest, M::SCRATCH_PER_SAMPLE * B);
        let state = carve(&mut rest, M::STATE);
        let gemm = rest;
        gemm.fill(0.0);
        for b in [
            &mut *grads,
            &mut *acts,
            &mut *node_grads,
            &mut *dx,
            &mut *scratch,
            &mut *state,
        ] {
            b.fill(0.0);
        }
        Ok(EmbeddedStep {
            update: Update {
                rule,
                carried,
                t: 0,
                clip_value: config.clip_value,
                clip_norm: config.clip_norm,
                weight_decay: config.weight_decay,
                maximize: config.maximize,
                schedule: config.schedule,
                slots,
                model: PhantomData,
            },
            grads,
            acts,
            node_grads,
            dx,
            scratch,
            gemm,
            state,
            seed: Seed(0x5eed),
            mode: PhantomData,
        })
    }

    /// Seeds the random stream of dropout, as
    /// [`TrainStep::with_seed`](crate::train::TrainStep::with_seed) does.
    #[must_use]
    pub fn with_seed(mut self, seed: Seed) -> Self {
        self.seed = seed;
        self
    }

    /// Optimizer steps taken.
    pub fn iterations(&self) -> u64 {
        self.update.t
    }

    /// The rule (its hyper-parameters).
    pub fn rule(&self) -> &R {
        &self.update.rule
    }

    /// Slot `name` of tensor `i` (in the order of the model's tensors).
    pub fn slot_tensor(&self, name: &str, i: usize) -> Option<&[f32]> {
        let j = R::SLOTS.iter().position(|s| *s == name)?;
        let t = M::TENSORS.get(i)?;
        let layer = layers(M::TENSORS).find(|l| {
            l.iter()
                .any(|u| u.offset == t.offset && u.tensor == t.tensor)
        })?;
        let (o, n) = span(layer);
        let at = o * R::SLOTS.len() + j * n + (t.offset - o);
        Some(&self.update.slots[at..at + t.tensor.len()])
    }

    /// One training step: forward, loss, backward and the update, allocating nothing; returns
    /// the batch's loss before the update.
    pub fn run(&mut self, model: &mut M, x: &[f32], y: &[Target<M>]) -> f32 {
        let batch = batch_of::<M>(x, B);
        check_targets::<M>(batch, y);
        let plan = self.update.plan();
        let mut rng = Rng::with_stream(self.seed, self.update.t);
        let (params, state) = model.split_mut();
        let mut ctx = Ctx {
            gemm: self.gemm,
            scratch: self.scratch,
            rng: &mut rng,
            mode: Mode::Train,
        };
        M::forward(&mut ctx, params, state, x, self.acts, batch);
        let (o, g, n) = (
            M::OUTPUT_OFFSET * batch,
            M::OUTPUT_GRAD_OFFSET * batch,
            M::OUT * batch,
        );
        let loss = <M::Loss as Loss>::loss_and_grad(
            &self.acts[o..o + n],
            y,
            &mut self.node_grads[g..g + n],
            M::OUT,
        );
        let mut rng = Rng::with_stream(self.seed, self.update.t);
        let mut ctx = Ctx {
            gemm: self.gemm,
            scratch: self.scratch,
            rng: &mut rng,
            mode: Mode::Train,
        };
        let update = &mut self.update;
        if U::FUSED {
            M::backward_update(
                &mut ctx,
                model.params_mut(),
                x,
                self.acts,
                self.node_grads,
                self.grads,
                Grad::Skip,
                batch,
                &mut |offset, p, g| update.layer(&plan, 1.0, offset, p, g),
            );
        } else {
            M::backward(
                &mut ctx,
                model.params(),
                x,
                self.acts,
                self.node_grads,
                self.grads,
                Grad::Skip,
                batch,
            );
            let scale = update.global_scale(self.grads);
            update.layer(&plan, scale, 0, model.params_mut(), self.grads);
        }
        update.t += 1;
        loss
    }

    /// The model's outputs for a batch, in inference mode.
    pub fn predict(&mut self, model: &M, x: &[f32]) -> &[f32] {
        let batch = batch_of::<M>(x, B);
        self.state.copy_from_slice(model.state());
        let mut rng = Rng::with_stream(self.seed, self.update.t);
        let mut ctx = Ctx {
            gemm: self.gemm,
            scratch: self.scratch,
            rng: &mut rng,
            mode: Mode::Eval,
        };
        M::forward(&mut ctx, model.params(), self.state, x, self.acts, batch);
        let o = M::OUTPUT_OFFSET * batch;
        &self.acts[o..o + M::OUT * batch]
    }

    /// d sum(output) / d x for a batch, from the model's current weights (inference mode). The
    /// model is taken writable because the backward pass walks its layers as a training step
    /// does; its parameters are not changed.
    pub fn input_gradient(&mut self, model: &mut M, x: &[f32]) -> &[f32] {
        let batch = self.predict(model, x).len() / M::OUT.max(1);
        let g = M::OUTPUT_GRAD_OFFSET * batch;
        self.node_grads[g..g + M::OUT * batch].fill(1.0);
        let mut rng = Rng::with_stream(self.seed, self.update.t);
        let mut ctx = Ctx {
            gemm: self.gemm,
            scratch: self.scratch,
            rng: &mut rng,
            mode: Mode::Eval,
        };
        let dx = &mut self.dx[..M::IN * batch];
        M::backward_update(
            &mut ctx,
            model.params_mut(),
            x,
            self.acts,
            self.node_grads,
            self.grads,
            Grad::Set(dx),
            batch,
            &mut |_, _, _| {},
        );
        &self.dx[..M::IN * batch]
    }

    /// The mean loss over any number of samples, `B` at a time, in inference mode.
    pub fn loss(&mut self, model: &M, x: &[f32], y: &[Target<M>]) -> f32 {
        let per = <M::Loss as Loss>::targets_per_sample(M::OUT);
        let (mut total, mut seen) = (0.0f64, 0usize);
        for (xs, ys) in x.chunks(B * M::IN).zip(y.chunks(B * per)) {
            let batch = xs.len() / M::IN;
            let out = self.predict(model, xs);
            total += f64::from(<M::Loss as Loss>::loss(out, ys, M::OUT)) * batch as f64;
            seen += batch;
        }
        (total / seen.max(1) as f64) as f32
    }
}
