//! The contract between `optimizer!` and the runtime.

use crate::lane::Lane;

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

    /// The learning rate, the hyper-parameter named `lr`; `None` for a rule without one. A
    /// schedule ([`Config::schedule`](super::Config::schedule)) sets it each step.
    fn learning_rate(&self) -> Option<f32>;
    /// The learning rate, writable: the field of `lr`; `None` for a rule without one.
    fn learning_rate_mut(&mut self) -> Option<&mut f32>;
}

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
