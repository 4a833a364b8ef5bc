//! What a model case records, step by step, from either path: [`Dynamic`] (a [`Machine`] over
//! a flat parameter buffer and an [`Optimizer`], as `TrainStep::run` uses them) or [`Typed`]
//! (a `#[fusegraph::model]` type and its `TrainStep`).

use super::machine::Machine;
use super::{Batch, ModelCase, ModelInput};
use crate::state::Conventions;
use crate::tensor::to_json;
use fusegraph::layers::Lengths;
use fusegraph::loss::Loss;
use fusegraph::optim::{Optimizer, Rule};
use fusegraph::train::{InputValue, Inputs};
use fusegraph::{Model, TrainStep};
use serde_json::{json, Value};

/// A model with its optimizer, as a case drives it.
pub(crate) trait Trainee {
    /// The optimizer's rule.
    type Rule: Rule;
    /// The loss of a batch and its gradients ([`grads`](Self::grads)), without an update.
    fn gradients(&mut self, batch: &Batch) -> f32;
    /// The gradients of the last [`gradients`](Self::gradients) or [`step`](Self::step), of
    /// the trainable tensors ([`ModelCase::trainable`]).
    fn grads(&self) -> &[f32];
    /// One training step; returns the loss before the update.
    fn step(&mut self, batch: &Batch) -> f32;
    /// The parameters, frozen ones included.
    fn params(&self) -> &[f32];
    /// The model's output for a batch of samples of `lengths`.
    fn predict(&mut self, x: &ModelInput, lengths: Lengths<'_>) -> &[f32];
    /// d sum(output) / d x for a batch; `None` for token ids, which have none.
    fn input_gradient(&mut self, x: &ModelInput, lengths: Lengths<'_>) -> Option<&[f32]>;
    /// d sum(output) / d (the first tensor, a token model's embedding table) for a batch;
    /// `None` when that tensor is frozen and the trainee computes no gradient for it.
    fn embedding_gradient(&mut self, x: &ModelInput, lengths: Lengths<'_>) -> Option<&[f32]>;
    /// The optimizer, over the trainable tensors.
    fn optimizer(&self) -> &Optimizer<Self::Rule>;
}

/// Trains `t` through the steps of `case` and returns the `got` object: `loss_step0` and
/// `grads_step0` (of the trainable tensors) on the first batch, then per step the loss, the
/// weights after it (every tensor, frozen ones included), and the probe outputs and input
/// gradients (also before the first step; for token ids, the gradient of the embedding table
/// on the probe before the first step instead), and the final optimizer state (of the
/// trainable tensors) written by `conventions`. The probe is measured with its lengths, each
/// batch trained with its own.
pub(crate) fn record<T: Trainee>(
    t: &mut T,
    case: &ModelCase,
    conventions: Conventions,
) -> Result<Value, String> {
    let (layout, trainable) = (&case.net.layout, &case.trainable.layout);
    let (probe, probe_shape) = (&case.probe, &case.probe_shape);
    let probe_lengths = case.probe_lengths();
    let out_shape: Vec<usize> = probe_shape[..1]
        .iter()
        .chain(&case.net.output_shape)
        .copied()
        .collect();
    let embedding_grad = if case.net.tokens {
        let g = t
            .embedding_gradient(probe, probe_lengths)
            .ok_or("the embedding table is frozen: the model has no gradient for it")?;
        Some(to_json(&layout.shapes[0], g))
    } else {
        None
    };
    let (mut probe_outputs, mut input_grads) = (Vec::new(), Vec::new());
    let mut measure = |t: &mut T| {
        probe_outputs.push(to_json(&out_shape, t.predict(probe, probe_lengths)));
        if let Some(dx) = t.input_gradient(probe, probe_lengths) {
            input_grads.push(to_json(probe_shape, dx));
        }
    };
    measure(t);
    let loss_step0 = t.gradients(&case.batches[0]);
    let grads_step0 = trainable.tensors(t.grads());
    let (mut losses, mut weights) = (Vec::new(), Vec::new());
    for batch in &case.batches {
        losses.push(f64::from(t.step(batch)));
        weights.push(layout.tensors(t.params()));
        measure(t);
    }
    let mut got = json!({
        "loss_step0": f64::from(loss_step0),
        "grads_step0": grads_step0,
        "losses": losses,
        "weights": weights,
        "probe_outputs": probe_outputs,
        "final_optimizer_state": conventions.state(t.optimizer(), trainable)?,
        "final_optimizer_scalars": conventions.scalars(t.optimizer()),
    });
    match embedding_grad {
        Some(g) => got["embedding_grad_step0"] = g,
        None => got["input_grads"] = input_grads.into(),
    }
    Ok(got)
}

/// The model built at run time: its buffers, its own flat parameter buffer and the optimizer
/// over the trainable tensors (one tensor segment per weight). The machine computes the
/// gradient of every tensor; those of the trainable tensors are gathered for the optimizer,
/// which updates a gathered copy of their values, written back after each step.
pub(crate) struct Dynamic<'n, R: Rule> {
    /// Buffers and passes.
    machine: Machine<'n>,
    /// The case: its layers and which tensors train.
    case: &'n ModelCase,
    /// The parameters, in the case's weight order.
    params: Vec<f32>,
    /// The gradients of the trainable tensors.
    grads: Vec<f32>,
    /// The values of the trainable tensors, as the optimizer updates them.
    trained: Vec<f32>,
    /// The optimizer, over the trainable tensors.
    optimizer: Optimizer<R>,
}

impl<'n, R: Rule> Dynamic<'n, R> {
    /// The model of `case` at its initial weights, trained by `optimizer` (laid out as the
    /// case's trainable tensors).
    pub fn new(case: &'n ModelCase, optimizer: Optimizer<R>) -> Self {
        let n = case.trainable.layout.len();
        Dynamic {
            machine: Machine::new(&case.net, case.max_batch()),
            case,
            params: case.params.clone(),
            grads: vec![0.0; n],
            trained: vec![0.0; n],
            optimizer,
        }
    }

    /// Updates the trainable tensors from the gradients in [`grads`](Trainee::grads).
    fn update(&mut self) {
        let (all, trainable) = (&self.case.net.layout, &self.case.trainable);
        trainable.gather(all, &self.params, &mut self.trained);
        self.optimizer.step(&mut self.trained, &self.grads);
        trainable.scatter(all, &self.trained, &mut self.params);
    }
}

impl<R: Rule> Trainee for Dynamic<'_, R> {
    type Rule = R;

    fn gradients(&mut self, batch: &Batch) -> f32 {
        let loss =
            (self.machine).loss_and_backward(&self.params, &batch.x, batch.lengths(), &batch.y);
        let all = &self.case.net.layout;
        (self.case.trainable).gather(all, self.machine.grads(), &mut self.grads);
        loss
    }

    fn grads(&self) -> &[f32] {
        &self.grads
    }

    fn step(&mut self, batch: &Batch) -> f32 {
        let loss = self.gradients(batch);
        self.update();
        loss
    }

    fn params(&self) -> &[f32] {
        &self.params
    }

    fn predict(&mut self, x: &ModelInput, lengths: Lengths<'_>) -> &[f32] {
        self.machine.predict(&self.params, x, lengths)
    }

    fn input_gradient(&mut self, x: &ModelInput, lengths: Lengths<'_>) -> Option<&[f32]> {
        let features = matches!(x, ModelInput::Values(_));
        features.then(|| self.machine.input_gradient(&self.params, x, lengths))
    }

    fn embedding_gradient(&mut self, x: &ModelInput, lengths: Lengths<'_>) -> Option<&[f32]> {
        let table = self.case.net.layout.ranges[0].clone();
        Some(&self.machine.output_gradients(&self.params, x, lengths)[table])
    }

    fn optimizer(&self) -> &Optimizer<R> {
        &self.optimizer
    }
}

/// How a case's inputs reach a typed model: as they are, features or token ids.
pub trait CaseInput: InputValue {
    /// The case's inputs as the model's, if they are of its type.
    fn of_case(x: &ModelInput) -> Option<&[Self]>;
    /// d sum(output) / d x, if the input has a gradient.
    fn input_gradient<'s, M: Model<Input = Self>, R: Rule, const B: usize>(
        step: &'s mut TrainStep<M, R, B>,
        model: &M,
        x: &dyn Inputs<Self>,
    ) -> Option<&'s [f32]>;
}

impl CaseInput for f32 {
    fn of_case(x: &ModelInput) -> Option<&[f32]> {
        match x {
            ModelInput::Values(x) => Some(x),
            ModelInput::Ids(_) => None,
        }
    }
    fn input_gradient<'s, M: Model<Input = f32>, R: Rule, const B: usize>(
        step: &'s mut TrainStep<M, R, B>,
        model: &M,
        x: &dyn Inputs<f32>,
    ) -> Option<&'s [f32]> {
        Some(step.input_gradient(model, x))
    }
}

impl CaseInput for u32 {
    fn of_case(x: &ModelInput) -> Option<&[u32]> {
        match x {
            ModelInput::Values(_) => None,
            ModelInput::Ids(ids) => Some(ids),
        }
    }
    fn input_gradient<'s, M: Model<Input = u32>, R: Rule, const B: usize>(
        _step: &'s mut TrainStep<M, R, B>,
        _model: &M,
        _x: &dyn Inputs<u32>,
    ) -> Option<&'s [f32]> {
        None
    }
}

/// A `#[fusegraph::model]` type and its train step.
pub(crate) struct Typed<M: Model, R: Rule, const B: usize> {
    /// The model.
    pub model: M,
    /// Its train step.
    pub step: TrainStep<M, R, B>,
}

impl<M: Model, R: Rule, const B: usize> Typed<M, R, B> {
    /// The targets of `batch` as the model's loss reads them.
    fn targets(batch: &Batch) -> &[<M::Loss as Loss>::Target] {
        batch
            .y
            .as_slice()
            .expect("run_typed checked that the case's loss is the model's")
    }
}

impl<M: Model, R: Rule, const B: usize> Typed<M, R, B>
where
    M::Input: CaseInput,
{
    /// The inputs `x` of samples of `lengths` as the model reads them.
    fn inputs<'a>(x: &'a ModelInput, lengths: Lengths<'a>) -> CaseBatch<'a, M::Input> {
        CaseBatch {
            values: M::Input::of_case(x)
                .expect("run_typed checked that the case's inputs are the model's"),
            lengths,
        }
    }
}

/// The inputs of a case's batch and the lengths of its samples, as a train step's methods
/// take them (the values alone give [`Lengths::FULL`], `Padded` the lengths it holds).
struct CaseBatch<'a, V> {
    /// The values (or ids), sample after sample.
    values: &'a [V],
    /// The real steps of each sample.
    lengths: Lengths<'a>,
}

impl<V> Inputs<V> for CaseBatch<'_, V> {
    fn values(&self) -> &[V] {
        self.values
    }
    fn lengths(&self) -> Lengths<'_> {
        self.lengths
    }
}

impl<M: Model, R: Rule, const B: usize> Trainee for Typed<M, R, B>
where
    M::Input: CaseInput,
{
    type Rule = R;

    fn gradients(&mut self, batch: &Batch) -> f32 {
        let (y, x) = (
            Self::targets(batch),
            Self::inputs(&batch.x, batch.lengths()),
        );
        self.step.gradients(&mut self.model, &x, y)
    }

    fn grads(&self) -> &[f32] {
        self.step.grads()
    }

    fn step(&mut self, batch: &Batch) -> f32 {
        let (y, x) = (
            Self::targets(batch),
            Self::inputs(&batch.x, batch.lengths()),
        );
        self.step.run(&mut self.model, &x, y)
    }

    fn params(&self) -> &[f32] {
        self.model.params()
    }

    fn predict(&mut self, x: &ModelInput, lengths: Lengths<'_>) -> &[f32] {
        self.step.predict(&self.model, &Self::inputs(x, lengths))
    }

    fn input_gradient(&mut self, x: &ModelInput, lengths: Lengths<'_>) -> Option<&[f32]> {
        M::Input::input_gradient(&mut self.step, &self.model, &Self::inputs(x, lengths))
    }

    fn embedding_gradient(&mut self, x: &ModelInput, lengths: Lengths<'_>) -> Option<&[f32]> {
        // The step's gradients are laid out as the trainable tensors: the table is first
        // there when it trains.
        let table = M::TENSORS.first()?.trainable_ranges()?.1;
        let x = Self::inputs(x, lengths);
        Some(&self.step.output_gradients(&self.model, &x)[table])
    }

    fn optimizer(&self) -> &Optimizer<R> {
        self.step.optimizer()
    }
}

#[cfg(test)]
mod tests {
    //! Bugs planted in the handling of frozen tensors must fail the comparison with the
    //! PyTorch trajectory of `torch.frozen_mlp_backbone.sgd_momentum_wd_clip` (a frozen
    //! backbone, SGD with momentum, L2 weight decay and global-norm clipping), and a control
    //! that only moves the frozen tensors' bookkeeping must pass.

    use super::super::Exactly;
    use super::*;
    use crate::plan::map_optimizer;
    use fusegraph::optim::torch;
    use std::marker::PhantomData;
    use std::ops::Range;

    /// What the planted trainee gets wrong.
    #[derive(Clone, Copy, PartialEq, Eq)]
    enum Bug {
        /// Nothing: the frozen tensors get a zero gradient, and their values are put back
        /// after each update.
        None,
        /// The frozen tensors are handed to the optimizer with a zero gradient: decayed.
        Decayed,
        /// The frozen tensors' gradients count in the clipping norm (their values are put
        /// back).
        InClipNorm,
    }

    /// Every tensor trains in `inner`; `frozen` are the ranges of the case's frozen ones.
    struct Planted<'n, R: Rule> {
        inner: Dynamic<'n, R>,
        frozen: &'n [Range<usize>],
        initial: Vec<f32>,
        bug: Bug,
    }

    impl<R: Rule> Trainee for Planted<'_, R> {
        type Rule = R;
        fn gradients(&mut self, batch: &Batch) -> f32 {
            let loss = self.inner.gradients(batch);
            if self.bug != Bug::InClipNorm {
                self.frozen
                    .iter()
                    .for_each(|r| self.inner.grads[r.clone()].fill(0.0));
            }
            loss
        }
        fn grads(&self) -> &[f32] {
            self.inner.grads()
        }
        fn step(&mut self, batch: &Batch) -> f32 {
            let loss = self.gradients(batch);
            self.inner.update();
            if self.bug != Bug::Decayed {
                for r in self.frozen {
                    self.inner.params[r.clone()].copy_from_slice(&self.initial[r.clone()]);
                }
            }
            loss
        }
        fn params(&self) -> &[f32] {
            self.inner.params()
        }
        fn predict(&mut self, x: &ModelInput, lengths: Lengths<'_>) -> &[f32] {
            self.inner.predict(x, lengths)
        }
        fn input_gradient(&mut self, x: &ModelInput, lengths: Lengths<'_>) -> Option<&[f32]> {
            self.inner.input_gradient(x, lengths)
        }
        fn embedding_gradient(&mut self, x: &ModelInput, lengths: Lengths<'_>) -> Option<&[f32]> {
            self.inner.embedding_gradient(x, lengths)
        }
        fn optimizer(&self) -> &Optimizer<R> {
            self.inner.optimizer()
        }
    }

    fn frozen_mlp() -> Value {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/data/reference/models_torch_sequence2.json"
        );
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let id = "torch.frozen_mlp_backbone.sgd_momentum_wd_clip";
        let cases = doc["cases"].as_array().unwrap();
        cases.iter().find(|c| c["id"] == id).unwrap().clone()
    }

    /// Whether `case` run with `bug` matches the reference, and its weights after step 1.
    fn passes_with(bug: Bug) -> (bool, Value) {
        let case = frozen_mlp();
        let parsed = ModelCase::parse(&case).unwrap();
        let layout = &parsed.net.layout;
        let frozen: Vec<Range<usize>> = (0..layout.names.len())
            .filter(|&i| !parsed.trainable.trains(i))
            .map(|i| layout.ranges[i].clone())
            .collect();
        assert_eq!(frozen, [0..60, 60..70, 70..150, 150..158]);
        let mut unfrozen = case.clone();
        unfrozen["model"]["frozen_weights"] = json!([]);
        unfrozen["model"]["trainable_weights"] = case["model"]["weight_order"].clone();
        let all_train = ModelCase::parse(&unfrozen).unwrap();
        let (rule, config, conventions) =
            map_optimizer(&case, Exactly::<torch::SgdMomentum>(PhantomData)).unwrap();
        let lens = all_train.trainable.layout.lens();
        let mut t = Planted {
            inner: Dynamic::new(&all_train, Optimizer::with_config(rule, &lens, config)),
            frozen: &frozen,
            initial: all_train.params.clone(),
            bug,
        };
        let got = record(&mut t, &all_train, conventions).unwrap();
        let weights = got["weights"][0].clone();
        let got = json!({"cases": [{"id": case["id"], "got": got}]});
        let result = crate::compare(&json!({ "cases": [case] }), &got, 1e-5, 1e-6).remove(0);
        (result.passed, weights)
    }

    #[test]
    fn frozen_tensors_that_are_decayed_or_clipped_with_fail_the_reference() {
        let initial = frozen_mlp()["inputs"]["initial_weights"].clone();
        let (passed, weights) = passes_with(Bug::None);
        assert!(passed, "the control fails");
        assert_eq!(weights["dense_0.kernel"], initial["dense_0.kernel"]);
        let (passed, weights) = passes_with(Bug::Decayed);
        assert!(!passed, "frozen tensors decayed pass");
        assert_ne!(weights["dense_0.kernel"], initial["dense_0.kernel"]);
        let (passed, _) = passes_with(Bug::InClipNorm);
        assert!(!passed, "frozen gradients in the clipping norm pass");
    }
}
