//! When a step updates the parameters: after every gradient is known ([`Full`]), or each layer
//! as soon as its own gradient is known ([`Fused`]).

/// When a train step updates the parameters; the type parameter of [`Config`](super::Config)
/// and of the train steps.
pub trait UpdateMode {
    /// Whether each layer is updated during the backward pass.
    const FUSED: bool;
}

/// Backward over every layer into a full gradient buffer, then one update: every option of
/// [`Config`](super::Config).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Full;

/// Each layer's update runs as soon as its gradient is known (after the gradient for the
/// layer below was taken from its old weights): no full gradient buffer, only one the size of
/// the largest layer. The parameters after every step are the same bits as with [`Full`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fused;

impl UpdateMode for Full {
    const FUSED: bool = false;
}

impl UpdateMode for Fused {
    const FUSED: bool = true;
}

/// Update modes in which every gradient is known before the first parameter changes: options
/// that reduce over all gradients need one.
#[diagnostic::on_unimplemented(
    message = "global-norm clipping needs every gradient before the first update, and `{Self}` updates each layer during the backward pass",
    label = "the norm over all layers is not known when the last layer is updated",
    note = "clip each tensor by its own norm (`clip_tensor_norm`), or train with the `Full` update mode"
)]
pub trait AllGradientsFirst: UpdateMode {}

impl AllGradientsFirst for Full {}
