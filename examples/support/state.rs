//! [`state_hash`]: one number for the whole training state of a step with Adam, to compare
//! runs bit for bit. Included with `#[path = "support/state.rs"] mod state;`.

use fusegraph::optim::keras::Adam;
use fusegraph::prelude::*;

/// FNV-1a over the bits of the parameters, Adam's slots and the step counter.
pub fn state_hash<M: Model, const B: usize>(model: &M, step: &TrainStep<M, Adam, B>) -> u64 {
    let opt = step.optimizer();
    let slots = Adam::SLOTS
        .iter()
        .flat_map(|s| opt.slot(s).unwrap_or_default());
    let words = model
        .params()
        .iter()
        .chain(slots)
        .map(|v| u64::from(v.to_bits()))
        .chain([opt.iterations()]);
    words.fold(0xcbf2_9ce4_8422_2325, |h, w| {
        w.to_le_bytes()
            .iter()
            .fold(h, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
    })
}
