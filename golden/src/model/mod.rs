//! Model cases (`model_training`): a sequential model, its initial weights, one batch per step
//! and a probe batch, trained with the case's optimizer; the result mirrors the case's
//! `expected` (losses, gradients, weights, probe outputs and input gradients, final optimizer
//! state).
//!
//! Two paths run a case. [`run`] builds the model at run time from `model.layers` (a
//! [`Net`] run by a [`Machine`] with the runtime's layer functions); [`run_typed`] trains a
//! `#[fusegraph::model]` type with `TrainStep`. Both map the optimizer as the optimizer cases
//! do and are recorded by the same [`record`], so they can be compared bit for bit.

mod layers;
mod machine;
mod train;
mod trainable;

use crate::plan::{map_optimizer, Route, WithRule};
use crate::state::Conventions;
use crate::tensor::{tensor_of, Tensor};
use fusegraph::layers::Lengths;
use fusegraph::loss::{Loss, Mse, SoftmaxCrossEntropy, IGNORE};
use fusegraph::optim::{Config, Rule};
use fusegraph::{Model, TrainStep};
use layers::Net;
use serde_json::Value;
use std::any::{Any, TypeId};
use std::marker::PhantomData;
pub use train::CaseInput;
use train::{record, Dynamic, Typed};
use trainable::Trainable;

/// The loss of a case, with the targets of one batch.
#[derive(Debug)]
pub(crate) enum Targets {
    /// `softmax_cross_entropy`: one class index per sample.
    SoftmaxCrossEntropy(Vec<u32>),
    /// `mse`: one value per output.
    Mse(Vec<f32>),
    /// `sequence_cross_entropy`: one class index per position of a `[seq, classes]` output.
    SequenceCrossEntropy {
        /// `[batch, seq]` class indices.
        labels: Vec<u32>,
        /// Classes at each position.
        classes: usize,
    },
}

impl Targets {
    /// The targets as the slice a loss with target type `T` reads, if `T` is theirs.
    fn as_slice<T: 'static>(&self) -> Option<&[T]> {
        let v: &dyn Any = match self {
            Targets::SoftmaxCrossEntropy(c) => c,
            Targets::Mse(v) => v,
            Targets::SequenceCrossEntropy { labels, .. } => labels,
        };
        v.downcast_ref::<Vec<T>>().map(Vec::as_slice)
    }

    /// Whether `L` is this loss, for a model of `outputs` values per sample. A sequence loss
    /// is recognized by what it reads (its number of classes is a type parameter): one class
    /// index per position of `classes` classes, as `SequenceCrossEntropy` reads them.
    fn is<L: Loss + 'static>(&self, outputs: usize) -> bool {
        match self {
            Targets::SoftmaxCrossEntropy(_) => {
                TypeId::of::<L>() == TypeId::of::<SoftmaxCrossEntropy>()
            }
            Targets::Mse(_) => TypeId::of::<L>() == TypeId::of::<Mse>(),
            Targets::SequenceCrossEntropy { classes, .. } => {
                let positions = outputs / classes;
                TypeId::of::<L::Target>() == TypeId::of::<u32>()
                    && L::targets_per_sample(outputs) == positions
                    && L::classes(outputs) == Some(*classes)
            }
        }
    }
}

/// A batch of a model case's inputs, `[samples] + input_shape` row-major, as the model reads
/// them.
#[derive(Debug)]
pub enum ModelInput {
    /// `f32` features.
    Values(Vec<f32>),
    /// Token ids (`"input_dtype": "int (token ids)"`), read from the file as integers.
    Ids(Vec<u32>),
}

impl ModelInput {
    /// The tensor `v` (named `what` in messages) as `net` reads it, and its samples.
    fn parse(net: &Net, v: &Value, what: &str) -> Result<(ModelInput, usize), String> {
        let x = Tensor::parse(v, what)?;
        let size = samples(net, &x, what)?;
        if !net.tokens {
            return Ok((ModelInput::Values(x.data), size));
        }
        let ids = v["data"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|id| id.as_u64().and_then(|id| u32::try_from(id).ok()))
            .collect::<Option<Vec<u32>>>()
            .ok_or_else(|| format!("{what} holds something other than token ids"))?;
        Ok((ModelInput::Ids(ids), size))
    }

    /// Values (or ids) in the batch.
    pub(crate) fn len(&self) -> usize {
        match self {
            ModelInput::Values(v) => v.len(),
            ModelInput::Ids(ids) => ids.len(),
        }
    }
}

/// One training batch.
pub(crate) struct Batch {
    /// Inputs.
    pub x: ModelInput,
    /// Targets.
    pub y: Targets,
    /// Samples.
    pub size: usize,
    /// The real steps of each sample, in a variable-length case.
    pub lengths: Option<Vec<u32>>,
}

impl Batch {
    /// The batch's lengths as the layers see them.
    pub(crate) fn lengths(&self) -> Lengths<'_> {
        lengths_of(&self.lengths)
    }
}

/// `lengths` as the layers see them: every step real without them.
fn lengths_of(lengths: &Option<Vec<u32>>) -> Lengths<'_> {
    lengths.as_deref().map_or(Lengths::FULL, Lengths::new)
}

/// A parsed model case.
pub(crate) struct ModelCase {
    /// The model.
    pub net: Net,
    /// Initial parameters, laid out as `net.layout`.
    pub params: Vec<f32>,
    /// The parameters that train (the others are frozen).
    pub trainable: Trainable,
    /// The batch of each step.
    pub batches: Vec<Batch>,
    /// The probe batch.
    pub probe: ModelInput,
    /// Its shape, `[samples] + input_shape`.
    pub probe_shape: Vec<usize>,
    /// The real steps of each probe sample, in a variable-length case.
    pub probe_lengths: Option<Vec<u32>>,
}

impl ModelCase {
    /// Reads a case's `model` and `inputs`.
    pub fn parse(case: &Value) -> Result<ModelCase, String> {
        let model = &case["model"];
        let net = Net::parse(model)?;
        let order: Vec<&str> = model["weight_order"]
            .as_array()
            .ok_or("model.weight_order is missing")?
            .iter()
            .map(|n| {
                n.as_str()
                    .ok_or("model.weight_order holds something other than names")
            })
            .collect::<Result<_, _>>()?;
        if order != net.layout.names {
            return Err(format!(
                "model.weight_order is {order:?}; the layers give {:?}",
                net.layout.names
            ));
        }
        let trainable = Trainable::parse(model, &net.layout)?;
        let inputs = &case["inputs"];
        let weights = inputs["initial_weights"]
            .as_object()
            .ok_or("inputs.initial_weights is missing")?;
        let mut params = Vec::with_capacity(net.layout.len());
        for (name, shape) in net.layout.names.iter().zip(&net.layout.shapes) {
            let t = tensor_of(weights, name, "inputs.initial_weights")?;
            if &t.shape != shape {
                return Err(format!(
                    "inputs.initial_weights.{name} has shape {:?}, the layer {shape:?}",
                    t.shape
                ));
            }
            params.extend_from_slice(&t.data);
        }
        let loss = match &model["loss"] {
            Value::String(s) => s.as_str(),
            other => other["name"].as_str().ok_or("model.loss has no name")?,
        };
        let padding = Padding::parse(model, inputs)?;
        let batches = inputs["batches"]
            .as_array()
            .filter(|b| !b.is_empty())
            .ok_or("inputs.batches is missing or empty")?
            .iter()
            .enumerate()
            .map(|(i, b)| batch(&net, loss, padding, b, &format!("inputs.batches[{i}]")))
            .collect::<Result<Vec<Batch>, String>>()?;
        if let Some(n) = inputs["num_steps"].as_u64() {
            if usize::try_from(n) != Ok(batches.len()) {
                return Err(format!(
                    "inputs.num_steps is {n} but inputs.batches has {} batches",
                    batches.len()
                ));
            }
        }
        let (probe, probe_samples) = ModelInput::parse(&net, &inputs["probe_x"], "inputs.probe_x")?;
        let probe_lengths = padding.lengths(
            &net,
            (&probe, probe_samples),
            &inputs["probe_lengths"],
            "inputs.probe_lengths",
        )?;
        let probe_shape = [probe_samples]
            .iter()
            .chain(&net.input_shape)
            .copied()
            .collect();
        Ok(ModelCase {
            net,
            params,
            trainable,
            batches,
            probe,
            probe_shape,
            probe_lengths,
        })
    }

    /// The probe's lengths as the layers see them.
    pub(crate) fn probe_lengths(&self) -> Lengths<'_> {
        lengths_of(&self.probe_lengths)
    }

    /// The most samples in one batch (the probe's included).
    fn max_batch(&self) -> usize {
        let most = self.batches.iter().map(|b| b.size).max().unwrap_or(0);
        most.max(self.probe_shape[0])
    }
}

/// Samples in `x`, whose shape must be `[samples] + input_shape`.
fn samples(net: &Net, x: &Tensor, what: &str) -> Result<usize, String> {
    match x.shape.split_first() {
        Some((&n, rest)) if rest == net.input_shape => Ok(n),
        _ => Err(format!(
            "{what} has shape {:?}, expected [batch] + {:?}",
            x.shape, net.input_shape
        )),
    }
}

/// Whether a case's samples have lengths (`model.variable_length`), and the token id at
/// their padded steps (`inputs.pad_id`, for token ids).
#[derive(Clone, Copy)]
struct Padding {
    /// The case has lengths.
    variable: bool,
    /// The id at padded steps, if stated.
    pad_id: Option<u32>,
}

impl Padding {
    /// Reads `model.variable_length` and `inputs.pad_id`.
    fn parse(model: &Value, inputs: &Value) -> Result<Padding, String> {
        let pad_id = match &inputs["pad_id"] {
            Value::Null => None,
            v => Some(
                v.as_u64()
                    .and_then(|id| u32::try_from(id).ok())
                    .ok_or_else(|| format!("inputs.pad_id = {v} is not a token id"))?,
            ),
        };
        Ok(Padding {
            variable: model["variable_length"] == true,
            pad_id,
        })
    }

    /// The lengths `v` (named `what`) of the `samples` samples of `x`, in a variable-length
    /// case (`None` in another): one each, from 1 to the sequence length, with the padding
    /// id at the padded steps of token ids.
    fn lengths(
        self,
        net: &Net,
        (x, samples): (&ModelInput, usize),
        v: &Value,
        what: &str,
    ) -> Result<Option<Vec<u32>>, String> {
        if !self.variable {
            return Ok(None);
        }
        let steps = net.input_shape.first().copied().unwrap_or(0);
        let t = Tensor::parse(v, what)?;
        let lengths = t
            .data
            .iter()
            .map(|&l| (l >= 1.0 && l.fract() == 0.0 && l as usize <= steps).then_some(l as u32))
            .collect::<Option<Vec<u32>>>()
            .filter(|l| l.len() == samples)
            .ok_or_else(|| {
                format!("{what} is not {samples} lengths from 1 to the {steps} steps")
            })?;
        if let (ModelInput::Ids(ids), Some(pad)) = (x, self.pad_id) {
            let padded = |(i, &id): (usize, &u32)| {
                let real = i % steps < lengths[i / steps] as usize;
                !real && id != pad
            };
            if let Some((i, id)) = ids.iter().enumerate().find(|&p| padded(p)) {
                return Err(format!(
                    "{what}: sample {} holds id {id} at padded step {}, not the pad_id {pad}",
                    i / steps,
                    i % steps
                ));
            }
        }
        Ok(Some(lengths))
    }
}

/// One entry of `inputs.batches`, for the loss named `loss`.
fn batch(net: &Net, loss: &str, padding: Padding, b: &Value, what: &str) -> Result<Batch, String> {
    let (x, size) = ModelInput::parse(net, &b["x"], &format!("{what}.x"))?;
    let lengths = padding.lengths(net, (&x, size), &b["lengths"], &format!("{what}.lengths"))?;
    let y = Tensor::parse(&b["y"], &format!("{what}.y"))?;
    let y = match loss {
        "softmax_cross_entropy" => {
            let classes = net.outputs();
            if net.output_shape.len() != 1 || y.shape != [size] {
                return Err(format!(
                    "{what}: cross-entropy over outputs {:?} with targets of shape {:?}",
                    net.output_shape, y.shape
                ));
            }
            let class = |v: f32| {
                (v >= 0.0 && v.fract() == 0.0 && (v as usize) < classes).then_some(v as u32)
            };
            let c = y
                .data
                .iter()
                .map(|&v| class(v))
                .collect::<Option<Vec<u32>>>();
            Targets::SoftmaxCrossEntropy(c.ok_or_else(|| {
                format!("{what}.y holds something other than classes below {classes}")
            })?)
        }
        "sequence_cross_entropy" | "masked_sequence_cross_entropy" => {
            sequence_labels(net, &y, size, what)?
        }
        "mse" => {
            if y.shape.first() != Some(&size) || y.data.len() != size * net.outputs() {
                return Err(format!(
                    "{what}: targets of shape {:?} for outputs {:?}",
                    y.shape, net.output_shape
                ));
            }
            Targets::Mse(y.data)
        }
        other => return Err(format!("unsupported loss `{other}`")),
    };
    Ok(Batch {
        x,
        y,
        size,
        lengths,
    })
}

/// PyTorch's `ignore_index`: a target of -100 is left out of the loss.
const IGNORE_INDEX: f32 = -100.0;

/// The `[batch, seq]` class indices of a `sequence_cross_entropy` batch, for a model whose
/// output is `[seq, classes]`; -100 ([`IGNORE_INDEX`], the target of a padded step) is
/// [`IGNORE`].
fn sequence_labels(net: &Net, y: &Tensor, size: usize, what: &str) -> Result<Targets, String> {
    let &[seq, classes] = &net.output_shape[..] else {
        return Err(format!(
            "{what}: a sequence cross-entropy over outputs {:?}, not [seq, classes]",
            net.output_shape
        ));
    };
    if y.shape != [size, seq] {
        return Err(format!(
            "{what}: targets of shape {:?} for {size} sequences of {seq} positions",
            y.shape
        ));
    }
    let class = |v: f32| {
        let ignored = v == IGNORE_INDEX;
        let class = v >= 0.0 && v.fract() == 0.0 && (v as usize) < classes;
        (ignored || class).then_some(if ignored { IGNORE } else { v as u32 })
    };
    let labels = y
        .data
        .iter()
        .map(|&v| class(v))
        .collect::<Option<Vec<u32>>>()
        .ok_or_else(|| format!("{what}.y holds something other than classes below {classes}"))?;
    Ok(Targets::SequenceCrossEntropy { labels, classes })
}

/// Runs a model case on a model built at run time from its layers.
pub(crate) fn run(case: &Value) -> Result<Value, String> {
    let parsed = ModelCase::parse(case)?;
    map_optimizer(case, DynamicRun(&parsed))
}

/// A model case's run on the model its layers describe, with the rule its optimizer maps to.
struct DynamicRun<'a>(&'a ModelCase);

impl WithRule for DynamicRun<'_> {
    type Output = Value;

    fn run<R: Rule + 'static>(
        self,
        rule: R,
        config: Config,
        routes: &[Route],
        conventions: Conventions,
    ) -> Result<Value, String> {
        no_routes(routes)?;
        let case = self.0;
        let optimizer =
            fusegraph::optim::Optimizer::with_config(rule, &case.trainable.layout.lens(), config);
        let mut trainee = Dynamic::new(case, optimizer);
        record(&mut trainee, case, conventions)
    }
}

/// The rule, `Config` and conventions a case's optimizer maps to, when the rule is `R`.
struct Exactly<R>(PhantomData<R>);

impl<R: Rule + 'static> WithRule for Exactly<R> {
    type Output = (R, Config, Conventions);

    fn run<Q: Rule + 'static>(
        self,
        rule: Q,
        config: Config,
        routes: &[Route],
        conventions: Conventions,
    ) -> Result<Self::Output, String> {
        no_routes(routes)?;
        let rule: &dyn Any = &rule;
        match rule.downcast_ref::<R>() {
            Some(&r) => Ok((r, config, conventions)),
            None => Err(format!(
                "the case's optimizer maps to {}, not {}",
                Q::NAME,
                R::NAME
            )),
        }
    }
}

/// Fails for parameters routed by name: a model's optimizer places its tensors by length.
fn no_routes(routes: &[Route]) -> Result<(), String> {
    match routes.first() {
        None => Ok(()),
        Some((name, branch)) => Err(format!(
            "a model case routes `{name}` to branch `{branch}`: routes are not mapped for models"
        )),
    }
}

/// Runs a model case on `model`, a `#[fusegraph::model]` type, trained by a
/// `TrainStep<M, R, B>`.
pub(crate) fn run_typed<M, R, const B: usize>(case: &Value, mut model: M) -> Result<Value, String>
where
    M: Model,
    M::Input: CaseInput,
    M::Loss: 'static,
    R: Rule + 'static,
{
    let parsed = ModelCase::parse(case)?;
    let net = &parsed.net;
    let shapes: Vec<&[usize]> = M::TENSORS.iter().map(|t| t.tensor.shape).collect();
    if (M::IN, M::OUT) != (net.inputs(), net.outputs()) || shapes != net.layout.shapes {
        return Err(format!(
            "the model takes {} values to {} with tensors {shapes:?}; the case {} to {} with {:?}",
            M::IN,
            M::OUT,
            net.inputs(),
            net.outputs(),
            net.layout.shapes
        ));
    }
    same_frozen_tensors::<M>(&parsed)?;
    if !parsed.batches[0].y.is::<M::Loss>(M::OUT) {
        return Err(format!(
            "the model trains with {}; the case with {:?}",
            std::any::type_name::<M::Loss>(),
            parsed.batches[0].y
        ));
    }
    if M::Input::of_case(&parsed.probe).is_none() {
        return Err(format!(
            "the model reads {}; the case's model {}",
            std::any::type_name::<M::Input>(),
            if net.tokens { "token ids" } else { "features" }
        ));
    }
    if parsed.max_batch() > B {
        return Err(format!(
            "batches of {} samples; the train step takes {B}",
            parsed.max_batch()
        ));
    }
    let (rule, config, conventions) = map_optimizer(case, Exactly::<R>(PhantomData))?;
    model.params_mut().copy_from_slice(&parsed.params);
    let step = TrainStep::<M, R, B>::with_config(&model, rule, config);
    record(&mut Typed { model, step }, &parsed, conventions)
}

/// Checks that model `M` freezes the tensors the case freezes (its tensors matched to the
/// case's by position in the weight order), else names the tensors frozen in one and not the
/// other.
fn same_frozen_tensors<M: Model>(case: &ModelCase) -> Result<(), String> {
    let mut differ = Vec::new();
    for (i, t) in M::TENSORS.iter().enumerate() {
        let model_trains = t.grad.is_some();
        if model_trains != case.trainable.trains(i) {
            let (in_model, in_case) = if model_trains {
                ("trains", "freezes")
            } else {
                ("freezes", "trains")
            };
            differ.push(format!(
                "`{}` (the model {in_model} its `{}.{}`, the case {in_case} it)",
                case.net.layout.names[i], t.layer, t.tensor.name
            ));
        }
    }
    if differ.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the model's frozen tensors are not the case's: {}",
            differ.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn case(loss: &str, y: Value) -> Value {
        json!({
            "kind": "model_training",
            "framework": "keras",
            "model": {
                "input_shape": [2],
                "layers": [{"name": "d", "type": "Dense", "in": 2, "units": 3}],
                "loss": {"name": loss},
                "weight_order": ["d.kernel", "d.bias"]
            },
            "optimizer": {"class": "keras.optimizers.SGD", "args": {"learning_rate": 0.1}},
            "inputs": {
                "num_steps": 1,
                "initial_weights": {
                    "d.kernel": {"shape": [2, 3], "data": [1.0, 0.0, -1.0, 0.5, 0.5, 0.5]},
                    "d.bias": {"shape": [3], "data": [0.0, 0.1, 0.2]}
                },
                "batches": [{"x": {"shape": [2, 2], "data": [1.0, 2.0, -1.0, 0.5]}, "y": y}],
                "probe_x": {"shape": [1, 2], "data": [0.5, 0.5]}
            }
        })
    }

    #[test]
    fn runs_a_small_case_and_names_what_it_cannot_read() {
        let classes = json!({"shape": [2], "data": [2.0, 0.0]});
        let got = run(&case("softmax_cross_entropy", classes.clone())).unwrap();
        assert_eq!(got["weights"].as_array().unwrap().len(), 1);
        assert_eq!(got["probe_outputs"][0]["shape"], json!([1, 3]));
        assert_eq!(got["input_grads"][1]["shape"], json!([1, 2]));
        assert_eq!(got["final_optimizer_scalars"], json!({"iterations": 1}));
        assert_eq!(got["loss_step0"], got["losses"][0]);
        let e = run(&case("hinge", classes)).unwrap_err();
        assert!(e.contains("`hinge`"), "{e}");
        let e = run(&case(
            "softmax_cross_entropy",
            json!({"shape": [2], "data": [3.0, 0.0]}),
        ))
        .unwrap_err();
        assert!(e.contains("classes below 3"), "{e}");
        let e = run(&case("mse", json!({"shape": [2, 1], "data": [1.0, 0.0]}))).unwrap_err();
        assert!(e.contains("[2, 1]"), "{e}");
        let mut c = case(
            "mse",
            json!({"shape": [2, 3], "data": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]}),
        );
        c["model"]["weight_order"] = json!(["d.bias", "d.kernel"]);
        let e = run(&c).unwrap_err();
        assert!(e.contains("weight_order"), "{e}");
    }

    /// A GRU tagger over two positions of one feature, two classes per position.
    fn tagger(y: Value) -> Value {
        let zeros = |shape: Value, n: usize| json!({"shape": shape, "data": vec![0.0; n]});
        json!({
            "kind": "model_training",
            "framework": "torch",
            "model": {
                "input_shape": [2, 1],
                "layers": [
                    {"name": "gru", "type": "GRU", "input_size": 1, "hidden_size": 2,
                     "num_layers": 1, "returns": "sequence", "gate_order": ["r", "z", "n"]},
                    {"name": "fc", "type": "Dense", "in": 2, "units": 2}
                ],
                "loss": {"name": "sequence_cross_entropy"},
                "weight_order": ["gru.weight_ih_l0", "gru.weight_hh_l0", "gru.bias_ih_l0",
                                 "gru.bias_hh_l0", "fc.kernel", "fc.bias"]
            },
            "optimizer": {"class": "torch.optim.SGD", "args": {"lr": 0.1}},
            "inputs": {
                "num_steps": 1,
                "initial_weights": {
                    "gru.weight_ih_l0": zeros(json!([6, 1]), 6),
                    "gru.weight_hh_l0": zeros(json!([6, 2]), 12),
                    "gru.bias_ih_l0": zeros(json!([6]), 6),
                    "gru.bias_hh_l0": zeros(json!([6]), 6),
                    "fc.kernel": {"shape": [2, 2], "data": [1.0, 0.0, 0.0, 1.0]},
                    "fc.bias": {"shape": [2], "data": [0.5, 0.0]}
                },
                "batches": [{"x": {"shape": [1, 2, 1], "data": [1.0, -1.0]}, "y": y}],
                "probe_x": {"shape": [1, 2, 1], "data": [0.5, 0.5]}
            }
        })
    }

    #[test]
    fn a_sequence_case_reads_labels_per_position() {
        let got = run(&tagger(json!({"shape": [1, 2], "data": [0.0, 1.0]}))).unwrap();
        assert_eq!(got["probe_outputs"][0]["shape"], json!([1, 2, 2]));
        // Zero GRU weights give h = 0: the logits are the bias (0.5, 0) at both positions, so
        // the loss is the mean of ln(1 + e^-0.5) (class 0) and ln(1 + e^0.5) (class 1).
        let expected = ((1.0 + (-0.5f64).exp()).ln() + (1.0 + 0.5f64.exp()).ln()) / 2.0;
        let loss = got["loss_step0"].as_f64().unwrap();
        assert!((loss - expected).abs() < 1e-6, "{loss} vs {expected}");
        let e = run(&tagger(json!({"shape": [1, 2], "data": [0.0, 2.0]}))).unwrap_err();
        assert!(e.contains("classes below 2"), "{e}");
        let e = run(&tagger(json!({"shape": [2], "data": [0.0, 1.0]}))).unwrap_err();
        assert!(e.contains("2 positions"), "{e}");
        let case = ModelCase::parse(&tagger(json!({"shape": [1, 2], "data": [0.0, 1.0]}))).unwrap();
        let y = &case.batches[0].y;
        assert!(y.is::<fusegraph::loss::SequenceCrossEntropy<2>>(4));
        assert!(!y.is::<SoftmaxCrossEntropy>(4));
        assert!(!y.is::<Mse>(4));
    }

    #[test]
    fn a_target_of_minus_100_is_ignored_and_lengths_are_checked() {
        let mut case = tagger(json!({"shape": [1, 2], "data": [0.0, -100.0]}));
        let got = run(&case).unwrap();
        // The logits (0.5, 0) of position 0, class 0, alone.
        let expected = (1.0 + (-0.5f64).exp()).ln();
        let loss = got["loss_step0"].as_f64().unwrap();
        assert!((loss - expected).abs() < 1e-6, "{loss} vs {expected}");
        let parsed = ModelCase::parse(&case).unwrap();
        let Targets::SequenceCrossEntropy { labels, .. } = &parsed.batches[0].y else {
            unreachable!("a sequence loss")
        };
        assert_eq!(labels, &[0, IGNORE]);
        assert!(parsed.batches[0].lengths().is_full());
        case["model"]["variable_length"] = json!(true);
        case["inputs"]["probe_lengths"] = json!({"shape": [1], "data": [1]});
        for (lengths, fine) in [(json!([2]), true), (json!([3]), false), (json!([0]), false)] {
            case["inputs"]["batches"][0]["lengths"] = json!({"shape": [1], "data": lengths});
            match ModelCase::parse(&case) {
                Ok(c) => assert!(fine && c.batches[0].lengths().of(0, 2) == 2),
                Err(e) => assert!(!fine && e.contains("from 1 to the 2 steps"), "{e}"),
            }
        }
    }
}
