//! A model's tensors in its buffers: where each lies in the parameter buffer and, when it
//! trains, in the buffers of the trainable tensors (gradients, optimizer slots).

use super::Model;
use crate::hash::Fnv;
use crate::layers::{Init, Tensor, Torch};
use core::ops::Range;

/// The name of a layer's counter of batches (BatchNorm's), as PyTorch names it.
pub const BATCH_COUNTER: &str = "num_batches_tracked";

/// A hash of a model's layout: 64-bit FNV-1a over the layer name, tensor name and shape of
/// every parameter and state tensor and the layers with a [batch counter](BATCH_COUNTER). The
/// same model type always has the same one, on every platform; a checkpoint records it as its
/// signature, and the processes of a data-parallel job compare theirs.
pub fn layout_hash<M: Model>() -> u64 {
    let mut h = Fnv::new();
    for (kind, tensors) in [("param", M::TENSORS), ("state", M::STATE_TENSORS)] {
        for t in tensors {
            h.str(kind);
            h.str(t.layer);
            h.str(t.tensor.name);
            h.u64(t.tensor.shape.len() as u64);
            t.tensor.shape.iter().for_each(|&d| h.u64(d as u64));
        }
    }
    for layer in M::BATCH_COUNTERS {
        h.str(BATCH_COUNTER);
        h.str(layer);
    }
    h.finish()
}

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
