//! Runs fusegraph's built-in optimizers against the golden Keras 3 and PyTorch reference files
//! (schema: `tests/data/reference/README.md`) and compares the results as the files' own
//! `check.py` does.
//!
//! [`run_file`] reads any golden document of that schema. Every optimizer case
//! (`optimizer_trajectory`, `optimizer_save_load`) is mapped from its `optimizer.class`,
//! `optimizer.args` over `optimizer.defaults`, the Keras `schedule`, the PyTorch `scheduler`
//! and `clip` onto a rule of [`fusegraph::optim::keras`] or [`fusegraph::optim::torch`] and a
//! [`fusegraph::optim::Config`]; the steps are run with the given gradients, and the result is
//! written in the shape of the case's `expected`. A case the harness cannot map (an argument
//! fusegraph does not support, a model case) is skipped with the reason.
//!
//! ```no_run
//! let text = std::fs::read_to_string("tests/data/reference/optimizers_keras.json").unwrap();
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
mod plan;
mod run;
mod tensor;
mod torch;

pub use compare::{compare, CaseResult, Worst, OPTIONAL_KEYS};

use inputs::Inputs;
use serde_json::{json, Value};

/// What [`run_file`] produced.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// `{"cases": [{"id", "got"}]}`, one entry per case that ran, for `check.py` or
    /// [`compare`].
    pub got: Value,
    /// The cases that did not run.
    pub skipped: Vec<Skipped>,
}

/// A case that did not run, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    /// Case id.
    pub id: String,
    /// Why: an unsupported class, argument or schedule (named), a model case, or malformed
    /// input.
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
    let kind = case["kind"].as_str().unwrap_or_default();
    let save_load = match kind {
        "optimizer_trajectory" => false,
        "optimizer_save_load" => true,
        "model_training" => {
            return Err("model_training cases are not run by the optimizer harness".into())
        }
        other => return Err(format!("unknown case kind `{other}`")),
    };
    let inputs = Inputs::parse(&case["inputs"], save_load)?;
    let optimizer = &case["optimizer"];
    match case["framework"].as_str().unwrap_or_default() {
        "keras" => keras::run(optimizer, &inputs),
        "torch" => torch::run(optimizer, &inputs),
        other => Err(format!("unknown framework `{other}`")),
    }
}
