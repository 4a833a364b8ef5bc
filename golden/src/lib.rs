//! Runs fusegraph against the golden Keras 3, PyTorch and optax reference files (schema:
//! `tests/data/reference/README.md`) and compares the results as the files' own `check.py`
//! does.
//!
//! [`run_file`] reads any golden document of that schema. Every case's `optimizer` is mapped
//! from its `class`, `args` over `defaults`, the Keras `schedule`, the PyTorch `scheduler` and
//! `clip` onto a rule of [`fusegraph::optim::keras`], [`fusegraph::optim::torch`] or
//! [`fusegraph::optim::optax`] (optax's masks routing parameters to the rule's branches) and a
//! [`fusegraph::optim::Config`], by one mapping for every kind of case:
//!
//! - optimizer cases (`optimizer_trajectory`, `optimizer_save_load`) run the steps with the
//!   given gradients;
//! - model cases (`model_training`) build the sequential model of `model.layers` at run time
//!   (Dense, also per position of a sequence, Conv2D, Conv1D, GlobalAveragePooling1D,
//!   Flatten, GRU and LSTM; softmax cross-entropy, over every position too, or MSE), run with
//!   the runtime's layer functions ([`fusegraph::layers::dense_forward`],
//!   [`fusegraph::layers::conv_forward`], [`fusegraph::layers::rnn_forward`]...) and trained on
//!   the given batches. [`run_typed_case`] runs the same case on a
//!   `#[fusegraph::model]` type instead. The tensors of `model.frozen_weights` are frozen as
//!   PyTorch's `requires_grad=False` freezes them: the optimizer (its state, weight decay and
//!   clipping norm) covers the trainable tensors only, and `grads_step0` and
//!   `final_optimizer_state` list those; a typed model must freeze the same tensors.
//!
//! The result is written in the shape of the case's `expected`. A case the harness cannot map
//! (an argument, layer, activation or loss fusegraph does not support) is skipped with the
//! reason.
//!
//! ```no_run
//! let text = std::fs::read_to_string("tests/data/reference/models_keras.json").unwrap();
//! let reference: serde_json::Value = serde_json::from_str(&text).unwrap();
//! let report = fusegraph_golden::run_file(&reference);
//! for result in fusegraph_golden::compare(&reference, &report.got, 1e-5, 1e-6) {
//!     println!("{result}");
//! }
//! ```

mod args;
mod compare;
mod inputs;
mod keras;
mod model;
mod optax;
mod plan;
mod run;
mod state;
mod tensor;
mod torch;

pub use compare::{compare, CaseResult, Worst, OPTIONAL_KEYS};
pub use model::{CaseInput, ModelInput};

use fusegraph::optim::Rule;
use fusegraph::Model;
use inputs::Inputs;
use plan::map_optimizer;
use run::Trajectory;
use serde_json::{json, Value};

/// What [`run_file`] produced.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// `{"cases": [{"id", "got"}]}`, one entry per case that ran, for `check.py` or
    /// [`compare()`].
    pub got: Value,
    /// The cases that did not run.
    pub skipped: Vec<Skipped>,
}

/// A case that did not run, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    /// Case id.
    pub id: String,
    /// Why: an unsupported class, argument, schedule, layer, activation or loss (named), or
    /// malformed input.
    pub reason: String,
}

/// Runs every case of a golden document.
pub fn run_file(doc: &Value) -> Report {
    let mut got = Vec::new();
    let mut skipped = Vec::new();
    for (i, case) in doc["cases"].as_array().into_iter().flatten().enumerate() {
        let id = case["id"]
            .as_str()
            .map_or_else(|| format!("cases[{i}]"), String::from);
        match run_case(case) {
            Ok(g) => got.push(json!({ "id": id, "got": g })),
            Err(reason) => skipped.push(Skipped { id, reason }),
        }
    }
    Report {
        got: json!({ "cases": got }),
        skipped,
    }
}

/// Runs one case and returns its `got` object, or why it cannot run.
pub fn run_case(case: &Value) -> Result<Value, String> {
    let save_load = match case["kind"].as_str().unwrap_or_default() {
        "optimizer_trajectory" => false,
        "optimizer_save_load" => true,
        "model_training" => return model::run(case),
        other => return Err(format!("unknown case kind `{other}`")),
    };
    let inputs = Inputs::parse(&case["inputs"], save_load)?;
    map_optimizer(case, Trajectory(&inputs))
}

/// Runs a model case (`model_training`) on `model`, a `#[fusegraph::model]` type with the
/// case's shapes (its tensors in the case's weight order, its loss the case's), trained by a
/// `TrainStep<M, R, B>` with its weights replaced by the case's initial weights.
///
/// `R` must be the rule the case's optimizer maps to; its hyper-parameters and
/// [`Config`](fusegraph::optim::Config) come from the case. The `got` object is recorded as
/// [`run_case`] records the model it builds at run time, so the two can be compared bit for
/// bit.
///
/// # Errors
/// When the case is not a model case the harness can read, the model's shapes or loss differ
/// from the case's, a batch exceeds `B`, or the case's optimizer maps to another rule.
pub fn run_typed_case<M, R, const B: usize>(case: &Value, model: M) -> Result<Value, String>
where
    M: Model,
    M::Input: CaseInput,
    M::Loss: 'static,
    R: Rule + 'static,
{
    if case["kind"] != "model_training" {
        return Err(format!(
            "case kind {} is not `model_training`",
            case["kind"]
        ));
    }
    model::run_typed::<M, R, B>(case, model)
}
