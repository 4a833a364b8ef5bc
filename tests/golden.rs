//! Built-in optimizers against the golden trajectories of Keras 3 and PyTorch.
//!
//! Source: `tests/data/reference/` (copied unchanged from the shared reference set; TensorFlow
//! 2.21.0 / Keras 3.15.1, PyTorch 2.15.0, float32 on CPU; schema and generation in its
//! README.md). Tolerance: the reference's default, `|got - ref| <= 1e-6 + 1e-5 * |ref|` on
//! every value (numpy.isclose, as `check.py` does), for every case, with no case skipped.

use fusegraph_golden::{compare, run_file, CaseResult, Report};
use serde_json::{json, Value};

const RTOL: f64 = 1e-5;
const ATOL: f64 = 1e-6;

fn reference(file: &str) -> Value {
    let path = format!("{}/tests/data/reference/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Runs every case of `file`, prints one line per case and asserts that none was skipped and
/// all pass.
fn check_file(file: &str) {
    let doc = reference(file);
    let Report { got, skipped } = run_file(&doc);
    let results = compare(&doc, &got, RTOL, ATOL);
    // One block per file, so that tests running in parallel do not interleave their lines.
    let mut out = format!("{file}: |got-ref| <= {ATOL:e} + {RTOL:e}*|ref|\n");
    for r in &results {
        out += &format!("{r}\n");
    }
    if let Some((ratio, id)) = results
        .iter()
        .filter_map(|r| Some((r.worst.as_ref()?.ratio, &r.id)))
        .max_by(|a, b| a.0.total_cmp(&b.0))
    {
        out += &format!("{file}: worst tolerance ratio {ratio:.3} ({id})\n");
    }
    print!("{out}");
    let failed: Vec<&CaseResult> = results.iter().filter(|r| !r.passed).collect();
    assert!(
        skipped.is_empty(),
        "{file}: skipped cases: {:#?}",
        skipped
            .iter()
            .map(|s| format!("{}: {}", s.id, s.reason))
            .collect::<Vec<_>>()
    );
    assert!(
        failed.is_empty(),
        "{file}: {} of {} cases fail:\n{}",
        failed.len(),
        results.len(),
        failed
            .iter()
            .map(|r| r.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn keras_optimizers_match() {
    check_file("optimizers_keras.json");
}

#[test]
fn torch_optimizers_match() {
    check_file("optimizers_torch.json");
}

/// The reference's own `expected` objects as a `got` document: a comparison that must pass
/// exactly, so the tests below see only the change they make.
fn expected_as_got(doc: &Value) -> Value {
    let cases: Vec<Value> = doc["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| json!({"id": c["id"], "got": c["expected"]}))
        .collect();
    json!({ "cases": cases })
}

/// The first value of magnitude at least 0.1 under `v`, mutably.
fn first_large(v: &mut Value) -> Option<&mut Value> {
    match v {
        Value::Object(m) => m.values_mut().find_map(first_large),
        Value::Array(a) => a.iter_mut().find_map(first_large),
        Value::Number(n) => (n.as_f64()?.abs() >= 0.1).then_some(v),
        _ => None,
    }
}

#[test]
fn comparison_passes_the_reference_itself() {
    for file in ["optimizers_keras.json", "optimizers_torch.json"] {
        let doc = reference(file);
        for r in compare(&doc, &expected_as_got(&doc), RTOL, ATOL) {
            assert!(r.passed && r.max_abs == 0.0 && r.values > 0, "{r}");
        }
    }
}

#[test]
fn comparison_fails_on_a_value_off_by_1e4_relative() {
    let doc = reference("optimizers_keras.json");
    let mut got = expected_as_got(&doc);
    let id = got["cases"][1]["id"].clone();
    let params = &mut got["cases"][1]["got"]["steps"][3]["params"];
    let x = first_large(params).expect("a parameter of magnitude >= 0.1");
    *x = Value::from(x.as_f64().unwrap() * (1.0 + 1e-4));
    let results = compare(&doc, &got, RTOL, ATOL);
    for r in &results {
        if r.id == id {
            assert!(!r.passed && r.bad == 1, "{r}");
            let w = r.worst.as_ref().unwrap();
            assert!(w.path.starts_with("steps[3].params."), "{r}");
            assert!(w.ratio > 5.0, "{r}");
        } else {
            assert!(r.passed, "{r}");
        }
    }
}

#[test]
fn comparison_fails_on_a_missing_value() {
    let doc = reference("optimizers_torch.json");
    let mut got = expected_as_got(&doc);
    let case = got["cases"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|c| c["id"] == "torch.adam.plain")
        .unwrap();
    let state = case["got"]["steps"][2]["state"].as_object_mut().unwrap();
    assert!(state.remove("exp_avg_sq").is_some());
    let results = compare(&doc, &got, RTOL, ATOL);
    let r = results.iter().find(|r| r.id == "torch.adam.plain").unwrap();
    assert!(!r.passed, "{r}");
    assert_eq!(r.missing.len(), 1, "{r}");
    assert!(r.missing[0].starts_with("steps[2].state.exp_avg_sq"), "{r}");
    assert!(results
        .iter()
        .filter(|r| r.id != "torch.adam.plain")
        .all(|r| r.passed));
}
