//! Flattening an image into a vector.

use super::{buffers, Backward, Ctx, Forward, Layer, Tensor};

/// Flattens `N` values per sample: the identity on data, which is already row-major (an NHWC
/// image flattens in `(h, w, c)` order, as Keras' `Flatten` does with channels last).
///
/// It exists so that a model spells out where an image becomes a vector; the values are
/// copied.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flatten<const N: usize>;

impl<const N: usize> Flatten<N> {
    /// The layer (it holds no data).
    pub const fn new() -> Self {
        Flatten
    }
}

impl<const N: usize> Layer for Flatten<N> {
    fn describe(out: &mut dyn core::fmt::Write) -> core::fmt::Result {
        write!(out, "Flatten<{N}>")
    }

    const IN: usize = N;
    const OUT: usize = N;
    const PARAMS: usize = 0;
    const STATE: usize = 0;
    const SAVED: usize = 0;
    const TENSORS: &'static [Tensor] = &[];
    const FREEZABLE: bool = true;

    fn forward(_ctx: &mut Ctx<'_>, io: Forward<'_>) {
        buffers::forward::<Self>(&io);
        let Forward { x, y, .. } = io;
        y.copy_from_slice(x);
    }

    fn backward(_ctx: &mut Ctx<'_>, io: Backward<'_>) {
        buffers::backward::<Self>(&io);
        io.dx.give(io.dy);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::gradcheck::Check;

    #[test]
    fn is_the_identity() {
        Check::new(3).run::<Flatten<13>>(&|_, x, _| x.to_vec());
        assert_eq!(Flatten::<4>::new(), Flatten::<4>);
    }
}
