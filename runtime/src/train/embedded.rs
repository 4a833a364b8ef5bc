//! Training without an allocator: [`EmbeddedStep`] is the step core over one arena the caller
//! owns (a `static`, or an array on the stack), sized by a constant; by default it updates each
//! layer during the backward pass ([`Fused`]) so that no full gradient buffer exists.

use super::model::{optimizer_work, Model, ModelTensors};
use super::step::{grads_len, Buffers, Step, DEFAULT_SEED};
use crate::optim::{
    slots_len, Arena, Config, Fused, NoOverrides, Optimizer, Rule, UpdateMode, UpdatePart,
};
use core::fmt;
use core::marker::PhantomData;

/// A train step of model `M` with rule `R` for batches of at most `B` samples whose buffers
/// (gradients, activations, workspace, optimizer slots) are slices of one arena of
/// [`FLOATS`](Step::FLOATS) values that the caller owns: no allocator is needed. With
/// `U = `[`Fused`] (the default) each layer is updated as soon as its gradient is known, and
/// the gradient buffer only holds the largest layer's.
///
/// ```
/// use fusegraph_runtime::optim::Fused;
/// use fusegraph_runtime::train::{EmbeddedStep, Model};
/// # fn demo<M: Model, R: fusegraph_runtime::optim::Rule>(model: &mut M, rule: R, x: &[M::Input], y: &[<M::Loss as fusegraph_runtime::loss::Loss>::Target], arena: &mut [f32]) {
/// let mut step = EmbeddedStep::<M, R, 8, Fused>::new(model, rule, arena).unwrap();
/// let loss = step.run(model, x, y);
/// # let _ = loss; }
/// ```
pub type EmbeddedStep<'a, M, R, const B: usize, U = Fused> =
    Step<M, R, B, U, Arena<'a, ModelTensors<M>>>;

/// An arena or a configuration that an [`EmbeddedStep`] cannot train with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArenaError {
    /// The arena has the wrong length.
    Length {
        /// The values the step needs ([`EmbeddedStep::FLOATS`](Step::FLOATS)).
        needed: usize,
        /// The values given.
        given: usize,
    },
    /// The configuration keeps an EMA of the weights, which needs a buffer as large as the
    /// parameters that the arena does not hold.
    Ema,
    /// The configuration needs a part of the update that the step's update set
    /// ([`UpdateMode::Updates`]) leaves out.
    Excluded(UpdatePart),
}

impl fmt::Display for ArenaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArenaError::Length { needed, given } => {
                write!(f, "the arena has {given} values, the step needs {needed}")
            }
            ArenaError::Ema => write!(
                f,
                "an EMA of the weights needs a buffer as large as the parameters, which the arena does not hold"
            ),
            ArenaError::Excluded(part) => write!(
                f,
                "the configuration needs {part}, which the step's update set leaves out: name a set that has it in the update mode (`Fused<Updates<..>>`) or leave it out of the configuration"
            ),
        }
    }
}

impl core::error::Error for ArenaError {}

/// Takes the first `n` values of `rest`, zeroed.
fn carve<'a>(rest: &mut &'a mut [f32], n: usize) -> &'a mut [f32] {
    let (head, tail) = core::mem::take(rest).split_at_mut(n);
    *rest = tail;
    head.fill(0.0);
    head
}

impl<'a, M: Model, R: Rule, const B: usize, U: UpdateMode> EmbeddedStep<'a, M, R, B, U> {
    /// Values of the arena: everything in [`BYTES`](Step::BYTES) but the model's own
    /// parameters and state.
    pub const FLOATS: usize = (Self::BYTES.total() - Self::BYTES.params - Self::BYTES.frozen) / 4;

    /// A step for `model` keeping its buffers in `arena`, which must hold exactly
    /// [`FLOATS`](Self::FLOATS) values. A step of `B = 0` does not compile.
    pub fn new(model: &M, rule: R, arena: &'a mut [f32]) -> Result<Self, ArenaError> {
        let () = Self::SOME_SAMPLES;
        Self::with_config(model, rule, Config::new(), arena)
    }

    /// A step with clipping, weight decay or a schedule (not an EMA, whose buffer the arena
    /// does not hold); a configuration that needs a part of the update that `U`'s update set
    /// leaves out is refused ([`ArenaError::Excluded`]).
    ///
    /// # Panics
    /// If `config` has a schedule and the rule no learning rate
    /// ([`Rule::learning_rate`]) for it to set.
    pub fn with_config(
        model: &M,
        rule: R,
        config: Config<U>,
        arena: &'a mut [f32],
    ) -> Result<Self, ArenaError> {
        let () = Self::SOME_SAMPLES;
        if arena.len() != Self::FLOATS {
            return Err(ArenaError::Length {
                needed: Self::FLOATS,
                given: arena.len(),
            });
        }
        if config.ema.is_some() {
            return Err(ArenaError::Ema);
        }
        if let Some(part) = config.excluded_part() {
            return Err(ArenaError::Excluded(part));
        }
        debug_assert_eq!(model.params().len(), M::PARAMS);
        let mut rest = arena;
        // A tensor-wise rule's row and column statistics keep fewer values than the bound
        // the arena is sized by; the slots take what they keep.
        let slots = carve(&mut rest, R::SLOTS.len() * M::TRAINABLE);
        let slots = &mut slots[..slots_len::<R>(&ModelTensors::<M>::new())];
        let work = carve(&mut rest, optimizer_work::<M, R>());
        let bufs = Buffers {
            grads: carve(&mut rest, grads_len::<M, U>()),
            acts: carve(&mut rest, M::ACTIVATIONS * B),
            node_grads: carve(&mut rest, M::NODE_GRADS * B),
            dx: carve(&mut rest, M::IN * B),
            scratch: carve(&mut rest, M::SCRATCH_PER_SAMPLE * B),
            state: carve(&mut rest, M::STATE),
            gemm: {
                rest.fill(0.0);
                rest
            },
        };
        let optimizer = Optimizer::from_parts(
            rule,
            config,
            ModelTensors::new(),
            NoOverrides::new(),
            slots,
            &mut [][..],
            work,
        );
        Ok(Step {
            bufs,
            optimizer,
            seed: DEFAULT_SEED,
            first_sample: 0,
            model: PhantomData,
        })
    }
}
