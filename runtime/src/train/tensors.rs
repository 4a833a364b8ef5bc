//! A model's tensors in its buffers: where each lies in the parameter buffer and, when it
//! trains, in the buffers of the trainable tensors (gradients, optimizer slots).

use crate::layers::{Init, Tensor, Torch};
use core::ops::Range;

/// One tensor of a model, in its flat parameter (or state) buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NamedTensor {
    /// The layer's field name (`fc1`).
    pub layer: &'static str,
    /// The tensor within the layer, with its shape and initializer.
    pub tensor: Tensor,
    /// How PyTorch names and lays it out.
    pub torch: Torch,
    /// Offset of its first value in the flat parameter (or state) buffer.
    pub offset: usize,
    /// Offset of its gradient, optimizer slots and EMA in the buffers of the trainable
    /// tensors ([`Model::TRAINABLE`](super::Model::TRAINABLE) values, the trainable tensors one
    /// after the other);
    /// `None` for a frozen tensor (`#[frozen]`) and a state tensor.
    pub grad: Option<usize>,
}

impl NamedTensor {
    /// A placeholder, for building tables in constants.
    #[doc(hidden)]
    pub const EMPTY: NamedTensor = NamedTensor {
        layer: "",
        tensor: Tensor {
            name: "",
            shape: &[],
            fans: (0, 0),
            init: Init::Zeros,
        },
        torch: Torch {
            name: "",
            axes: &[],
        },
        offset: 0,
        grad: None,
    };

    /// Where its gradient lies in the buffers of the trainable tensors, and where its values
    /// lie in the parameter buffer; `None` when it is frozen.
    pub fn trainable_ranges(&self) -> Option<(Range<usize>, Range<usize>)> {
        let (at, n) = (self.grad?, self.tensor.len());
        Some((self.offset..self.offset + n, at..at + n))
    }
}

/// The runs of consecutive trainable tensors among `tensors` (a model's, in buffer order):
/// for each, its range of the parameter buffer and of the buffers of the trainable tensors.
/// A model without frozen tensors is one run, the same range in both.
pub fn trainable_runs(
    tensors: &[NamedTensor],
) -> impl Iterator<Item = (Range<usize>, Range<usize>)> + '_ {
    let mut ranges = tensors
        .iter()
        .filter_map(NamedTensor::trainable_ranges)
        .peekable();
    core::iter::from_fn(move || {
        let (mut params, mut grads) = ranges.next()?;
        while let Some((p, g)) =
            ranges.next_if(|(p, g)| p.start == params.end && g.start == grads.end)
        {
            params.end = p.end;
            grads.end = g.end;
        }
        Some((params, grads))
    })
}
