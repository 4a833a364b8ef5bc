//! Names and layouts: which value of a model or train step goes under which name of the file,
//! in which shape and element type, and the signature of a model's layout.

use super::CheckpointError;
use crate::layers::{torch_dim, torch_index};
use crate::loss::Loss;
use crate::optim::{Optimizer, OptimizerPart, Rule, Shape, SlotShape, Storage, UpdateMode};
use crate::train::{layout_hash, Describe, Model, NamedTensor, StatePart, BATCH_COUNTER};
use safetensors::Dtype;
use std::collections::BTreeSet;
use std::format;
use std::string::{String, ToString};
use std::vec;
use std::vec::Vec;

/// Prefix of the optimizer's tensors.
pub(crate) const OPTIMIZER: &str = "optimizer.";
/// Prefix of the train step's own values.
pub(crate) const TRAIN: &str = "train.";
/// The number of completed steps, an `I64` scalar.
pub(crate) const STEP: &str = "train.step";
/// The dropout seed's 64 bits, an `I64` scalar.
pub(crate) const SEED: &str = "train.seed";

/// Where the values of one tensor of the file come from (and go to).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// One tensor of a part laid out as the model's parameters (the parameters, a slot, the
    /// EMA) or as its state: the values of `tensor` in it.
    Tensor {
        /// The part.
        part: StatePart,
        /// The tensor's shapes.
        tensor: &'static NamedTensor,
        /// Where its values start in the part.
        at: usize,
    },
    /// Values of a part in their own layout: a row or column statistic of a tensor-wise
    /// rule's slot, `len` values from `at`.
    Values {
        /// The part.
        part: StatePart,
        /// Where the values start in the part.
        at: usize,
        /// How many.
        len: usize,
    },
    /// The whole of a part of one value: a carried scalar, the step counter, the seed.
    Scalar(StatePart),
    /// A BatchNorm's `num_batches_tracked`, the optimizer's step count (not read back).
    Counter,
}

/// One tensor of the file: its name, element type, shape (PyTorch's layout) and source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub name: String,
    pub dtype: Dtype,
    pub shape: Vec<usize>,
    pub source: Source,
}

impl Entry {
    fn scalar(name: String, dtype: Dtype, source: Source) -> Self {
        Entry {
            name,
            dtype,
            shape: vec![],
            source,
        }
    }
}

/// The shape of a tensor stored as `shape`, in PyTorch's order `axes` (empty: the same).
pub(crate) fn torch_shape(shape: &[usize], axes: &[usize]) -> Vec<usize> {
    (0..shape.len())
        .map(|k| torch_dim(shape, axes, k))
        .collect()
}

/// Calls `f(i, j)` for every value: `i` its index in PyTorch's layout, `j` its index in the
/// stored layout `shape` (in order), where PyTorch's axis `k` is stored axis `axes[k]`.
pub(crate) fn for_each_permuted(shape: &[usize], axes: &[usize], mut f: impl FnMut(usize, usize)) {
    let n: usize = shape.iter().product();
    (0..n).for_each(|j| f(torch_index(shape, axes, j), j));
}

/// `layer.name`, the PyTorch name of a tensor of layer `layer`.
fn key(layer: &str, name: &str) -> String {
    format!("{layer}.{name}")
}

/// The tensors of a model: parameters, state and BatchNorm counters, named as PyTorch's
/// `state_dict` names them.
pub(crate) fn model_entries<M: Model>() -> Vec<Entry> {
    entries::<M>(StatePart::MODEL, &[], &[])
}

/// The tensors of a model and its train step of rule `R`, each part of
/// [`Step::state_parts`](crate::train::Step::state_parts) in turn: the model's, then each slot
/// of each parameter (`optimizer.<slot>.<tensor>`), the EMA (`optimizer.ema.<tensor>`) when it
/// is kept, each carried scalar (`optimizer.<name>`), the step counter and the dropout seed.
/// A tensor-wise rule's slots are laid out by `optimizer`'s tensors: each tensor's piece where
/// its branch keeps one, a row or column statistic in its own shape
/// ([`SlotShape`](crate::optim::SlotShape), rows and columns as the model stores the tensor).
pub(crate) fn train_entries<M: Model, R: Rule, U: UpdateMode, S: Storage>(
    parts: impl Iterator<Item = StatePart>,
    optimizer: &Optimizer<R, U, S>,
) -> Vec<Entry> {
    let mut out = Vec::new();
    for part in parts {
        match part {
            StatePart::Optimizer(OptimizerPart::Slot(j)) if R::TENSOR_WISE => {
                shaped_slot::<M, R, U, S>(&mut out, j, optimizer)
            }
            _ => out.extend(entries::<M>([part], R::SLOTS, R::CARRIED)),
        }
    }
    out
}

/// Appends the entries of slot `j` of a tensor-wise rule: for each trainable tensor whose
/// branch keeps the slot, its piece of the slot.
fn shaped_slot<M: Model, R: Rule, U: UpdateMode, S: Storage>(
    out: &mut Vec<Entry>,
    j: usize,
    optimizer: &Optimizer<R, U, S>,
) {
    let part = StatePart::Optimizer(OptimizerPart::Slot(j));
    let shape = SlotShape::of::<R>(j);
    for (i, t) in M::TRAINABLE_TENSORS.iter().enumerate() {
        let Some(range) = optimizer.slot_range(j, i).filter(|r| !r.is_empty()) else {
            continue;
        };
        let name = format!("{OPTIMIZER}{}.{}", R::SLOTS[j], key(t.layer, t.torch.name));
        let dims = Shape::of(t.tensor.shape);
        let (shape, source) = match shape {
            SlotShape::Element => (
                torch_shape(t.tensor.shape, t.torch.axes),
                Source::Tensor {
                    part,
                    tensor: t,
                    at: range.start,
                },
            ),
            statistic => (
                statistic_dims(statistic, dims),
                Source::Values {
                    part,
                    at: range.start,
                    len: range.len(),
                },
            ),
        };
        out.push(Entry {
            name,
            dtype: Dtype::F32,
            shape,
            source,
        });
    }
}

/// The dimensions of a row or column statistic of a tensor of shape `dims`.
fn statistic_dims(shape: SlotShape, dims: Shape) -> Vec<usize> {
    match shape {
        SlotShape::Element => vec![dims.rows, dims.cols],
        SlotShape::Rows => vec![dims.rows],
        SlotShape::RowsByOne => vec![dims.rows, 1],
        SlotShape::Cols => vec![dims.cols],
        SlotShape::OneByCols => vec![1, dims.cols],
    }
}

/// The tensors of `parts` of a model and a train step whose rule has `slots` and `carried`.
fn entries<M: Model>(
    parts: impl IntoIterator<Item = StatePart>,
    slots: &[&str],
    carried: &[&str],
) -> Vec<Entry> {
    let mut out = Vec::new();
    for part in parts {
        match part {
            StatePart::Params => tensors(&mut out, "", M::TENSORS, part),
            StatePart::ModelState => {
                tensors(&mut out, "", M::STATE_TENSORS, part);
                out.extend(M::BATCH_COUNTERS.iter().map(|layer| {
                    Entry::scalar(key(layer, BATCH_COUNTER), Dtype::I64, Source::Counter)
                }));
            }
            StatePart::Optimizer(OptimizerPart::Slot(j)) => {
                tensors(
                    &mut out,
                    &format!("{OPTIMIZER}{}.", slots[j]),
                    M::TRAINABLE_TENSORS,
                    part,
                );
            }
            StatePart::Optimizer(OptimizerPart::Ema) => {
                let prefix = format!("{OPTIMIZER}ema.");
                tensors(&mut out, &prefix, M::TRAINABLE_TENSORS, part);
            }
            StatePart::Optimizer(OptimizerPart::Carried(i)) => out.push(Entry::scalar(
                format!("{OPTIMIZER}{}", carried[i]),
                Dtype::F32,
                Source::Scalar(part),
            )),
            StatePart::Optimizer(OptimizerPart::Iterations) => {
                out.push(Entry::scalar(STEP.into(), Dtype::I64, Source::Scalar(part)));
            }
            StatePart::Seed => {
                out.push(Entry::scalar(SEED.into(), Dtype::I64, Source::Scalar(part)))
            }
        }
    }
    out
}

/// Appends an entry for each of `tensors` of `part`, named `<prefix><layer>.<name>` as
/// PyTorch names it, in PyTorch's shape.
fn tensors(out: &mut Vec<Entry>, prefix: &str, tensors: &'static [NamedTensor], part: StatePart) {
    out.extend(tensors.iter().map(|t| Entry {
        name: format!("{prefix}{}", key(t.layer, t.torch.name)),
        dtype: Dtype::F32,
        shape: torch_shape(t.tensor.shape, t.torch.axes),
        source: Source::Tensor {
            part,
            tensor: t,
            at: start_in(part, t),
        },
    }));
}

/// Where tensor `t` starts in `part`: at its offset in the parameters or the state, at its
/// gradient's in the optimizer's parts, which hold the trainable tensors only.
fn start_in(part: StatePart, t: &NamedTensor) -> usize {
    match (part, t.grad) {
        (StatePart::Optimizer(_), Some(at)) => at,
        _ => t.offset,
    }
}

/// `Ok` when no two entries have the same name.
pub(crate) fn check_unique(entries: &[Entry]) -> Result<(), CheckpointError> {
    let mut seen = BTreeSet::new();
    for e in entries {
        if !seen.insert(e.name.as_str()) {
            return Err(CheckpointError::Clash {
                name: e.name.clone(),
            });
        }
    }
    Ok(())
}

/// The signature of a model's layout ([`layout_hash`]) as 16 hex digits. The same model type
/// always has the same one, on every platform.
pub fn signature<M: Model>() -> String {
    format!("{:016x}", layout_hash::<M>())
}

/// The kind of every layer of a model, in declaration order, then the wiring of its graph (for
/// a model declared with one) and its loss, as `name: kind` lines: `fc1: Dense 8->16 relu`,
/// `loss: softmax_cross_entropy`. A checkpoint records them and loads only into a model with
/// the same lines.
pub fn layers<M: Model>() -> String {
    let mut out = String::new();
    for part in M::LAYER_KINDS {
        line(&mut out, part.name, part.describe);
    }
    line(&mut out, "loss", <M::Loss as Loss>::describe);
    out
}

/// Appends the line `name: kind` to `out`.
fn line(out: &mut String, name: &str, describe: Describe) {
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(name);
    out.push_str(": ");
    // Writing into a `String` cannot fail.
    let _ = describe(out);
}

/// The first line where two lists of [`layers`] differ, each side as its name and kind, or
/// `None` past its last line; `None` when they are the same.
pub(crate) fn first_difference(file: &str, model: &str) -> Option<LayerPair> {
    let mut file = file.lines().map(split_line);
    let mut model = model.lines().map(split_line);
    loop {
        match (file.next(), model.next()) {
            (None, None) => return None,
            (a, b) if a != b => return Some((a, b)),
            _ => {}
        }
    }
}

/// A layer of the file and of the model, each as its name and kind.
pub(crate) type LayerPair = (Option<(String, String)>, Option<(String, String)>);

/// A `name: kind` line as its name and kind (a line without `: ` is all name).
fn split_line(line: &str) -> (String, String) {
    let (name, kind) = line.split_once(": ").unwrap_or((line, ""));
    (name.to_string(), kind.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn permuted(shape: &[usize], axes: &[usize]) -> Vec<usize> {
        let mut out = vec![usize::MAX; shape.iter().product()];
        for_each_permuted(shape, axes, |i, j| out[i] = j);
        out
    }

    #[test]
    fn dense_weight_is_transposed() {
        // Stored [in = 3, out = 2]: value (i, o) at 2 * i + o; PyTorch's [2, 3] row o, column i.
        assert_eq!(permuted(&[3, 2], &[1, 0]), [0, 2, 4, 1, 3, 5]);
        assert_eq!(torch_shape(&[3, 2], &[1, 0]), [2, 3]);
    }

    #[test]
    fn conv_weight_goes_from_hwio_to_oihw() {
        let shape = [2, 3, 4, 5];
        let axes = [3, 2, 0, 1];
        let map = permuted(&shape, &axes);
        let mut i = 0;
        for o in 0..5 {
            for c in 0..4 {
                for h in 0..2 {
                    for w in 0..3 {
                        assert_eq!(map[i], ((h * 3 + w) * 4 + c) * 5 + o);
                        i += 1;
                    }
                }
            }
        }
        assert_eq!(torch_shape(&shape, &axes), [5, 4, 2, 3]);
    }

    #[test]
    fn the_first_differing_layer_is_named_with_both_sides() {
        let pair = |name: &str, kind: &str| Some((name.to_string(), kind.to_string()));
        let model = "fc1: Dense 4->16 tanh\nloss: mse";
        assert_eq!(first_difference(model, model), None);
        assert_eq!(
            first_difference("fc1: Dense 4->24 tanh\nloss: mse", model),
            Some((
                pair("fc1", "Dense 4->24 tanh"),
                pair("fc1", "Dense 4->16 tanh")
            ))
        );
        assert_eq!(
            first_difference("fc1: Dense 4->16 tanh", model),
            Some((None, pair("loss", "mse")))
        );
        assert_eq!(
            first_difference("junk", model),
            Some((pair("junk", ""), pair("fc1", "Dense 4->16 tanh")))
        );
    }

    #[test]
    fn same_order_and_empty_shapes() {
        assert_eq!(permuted(&[4], &[]), [0, 1, 2, 3]);
        assert_eq!(permuted(&[], &[]), [0]);
        assert!(permuted(&[0, 3], &[1, 0]).is_empty());
    }
}
