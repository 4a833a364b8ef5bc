//! Length checks of the buffers a model hands to a layer: a wrong length is a bug in the
//! caller (who sizes every buffer once from the layer's constants), caught before any work.

use super::{Backward, Forward, Grad, Layer};
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

/// Checks the buffers of [`Layer::forward`] (or of a token layer's, over ids).
pub(crate) fn forward<L: Layer>(io: &Forward<'_, impl Sized>) {
    let l = type_name::<L>();
    expect(l, "params", io.params.len(), L::PARAMS);
    expect(l, "state", io.state.len(), L::STATE);
    expect(l, "x", io.x.len(), io.batch * L::IN);
    expect(l, "y", io.y.len(), io.batch * L::OUT);
    expect(l, "saved", io.saved.len(), io.batch * L::SAVED);
}

/// Checks the buffers of [`Layer::backward`] (or of a token layer's, over ids).
pub(crate) fn backward<L: Layer>(io: &Backward<'_, impl Sized>) {
    let l = type_name::<L>();
    expect(l, "params", io.params.len(), L::PARAMS);
    assert!(
        io.frozen.part(0, L::TENSORS.len()) == io.frozen && (L::FREEZABLE || !io.frozen.any()),
        "{l}: frozen mask {:#b} for a layer of {} tensors that {} freezing",
        io.frozen.0,
        L::TENSORS.len(),
        if L::FREEZABLE {
            "allows"
        } else {
            "does not allow"
        }
    );
    let trainable = match io.frozen.any() {
        true => io.frozen.trainable_len(L::TENSORS),
        false => L::PARAMS,
    };
    expect(l, "dparams", io.dparams.len(), trainable);
    expect(l, "x", io.x.len(), io.batch * L::IN);
    expect(l, "y", io.y.len(), io.batch * L::OUT);
    expect(l, "dy", io.dy.len(), io.batch * L::OUT);
    expect(l, "saved", io.saved.len(), io.batch * L::SAVED);
    if let Grad::Set(d) | Grad::Add(d) = &io.dx {
        expect(l, "dx", d.len(), io.batch * L::IN);
    }
}
