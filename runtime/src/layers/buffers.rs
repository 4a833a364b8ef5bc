//! Length checks of the buffers a model hands to a layer: a wrong length is a bug in the
//! caller (who sizes every buffer once from the layer's constants), caught before any work.

use super::{Grad, Layer};
use core::any::type_name;

/// Panics, naming `layer` and the buffer `what`, unless `len == expected`. Inlined, so that a
/// second check of the same length folds into the first.
#[inline]
pub(crate) fn expect(layer: &str, what: &str, len: usize, expected: usize) {
    assert!(
        len == expected,
        "{layer}: `{what}` holds {len} values, expected {expected}"
    );
}

/// Checks the buffers of [`Layer::forward`].
pub(crate) fn forward<L: Layer>(
    params: &[f32],
    state: &[f32],
    x: &[f32],
    y: &[f32],
    saved: &[f32],
    batch: usize,
) {
    let l = type_name::<L>();
    expect(l, "params", params.len(), L::PARAMS);
    expect(l, "state", state.len(), L::STATE);
    expect(l, "x", x.len(), batch * L::IN);
    expect(l, "y", y.len(), batch * L::OUT);
    expect(l, "saved", saved.len(), batch * L::SAVED);
}

/// Checks the buffers of [`Layer::backward`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn backward<L: Layer>(
    params: &[f32],
    x: &[f32],
    y: &[f32],
    saved: &[f32],
    dy: &[f32],
    dx: &Grad<'_>,
    dparams: &[f32],
    batch: usize,
) {
    let l = type_name::<L>();
    expect(l, "params", params.len(), L::PARAMS);
    expect(l, "dparams", dparams.len(), L::PARAMS);
    expect(l, "x", x.len(), batch * L::IN);
    expect(l, "y", y.len(), batch * L::OUT);
    expect(l, "dy", dy.len(), batch * L::OUT);
    expect(l, "saved", saved.len(), batch * L::SAVED);
    if let Grad::Set(d) | Grad::Add(d) = dx {
        expect(l, "dx", d.len(), batch * L::IN);
    }
}
