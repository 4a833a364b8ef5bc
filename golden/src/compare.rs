//! The comparison of `check.py` (shipped beside the golden files), in Rust: per element
//! `|got - ref| <= atol + rtol * |ref|` (numpy.isclose), every numeric leaf of `expected`
//! required except under the optional keys, tensors `{"shape", "data"}` (or a bare flat list).

use crate::tensor::is_tensor;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::fmt;

/// Keys whose leaves are compared when present and skipped when absent.
pub const OPTIONAL_KEYS: &[&str] = &[
    "saved_state",
    "scalars",
    "initial_scalars",
    "final_optimizer_scalars",
    "lr",
];

/// The element that used most of its tolerance.
#[derive(Clone, Debug, PartialEq)]
pub struct Worst {
    /// `|got - ref| / (atol + rtol * |ref|)`: above 1 fails.
    pub ratio: f64,
    /// Where it is, as `check.py` writes it (`steps[3].params.p0[7]`).
    pub path: String,
    /// The reference value.
    pub reference: f64,
    /// The value compared with it.
    pub got: f64,
}

/// The comparison of one reference case.
#[derive(Clone, Debug, PartialEq)]
pub struct CaseResult {
    /// Case id.
    pub id: String,
    /// No value out of tolerance, nothing missing or misshapen, and at least one value compared.
    pub passed: bool,
    /// Number of values compared.
    pub values: usize,
    /// Number of values out of tolerance (or not numbers, or in a misshapen part).
    pub bad: usize,
    /// Largest `|got - ref|`.
    pub max_abs: f64,
    /// Largest `|got - ref| / |ref|` over `ref != 0`.
    pub max_rel: f64,
    /// The element with the largest tolerance ratio.
    pub worst: Option<Worst>,
    /// Required paths absent from `got` (with their number of values).
    pub missing: Vec<String>,
    /// Shape, type and length mismatches, and a case absent from `got`.
    pub structure: Vec<String>,
}

impl fmt::Display for CaseResult {
    /// One line as `check.py` prints it: id, status, values, max abs, max rel, worst element.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let status = if self.passed { "PASS" } else { "FAIL" };
        write!(
            f,
            "{:50} {status:7} {:8} {:10.3e} {:10.3e}",
            self.id, self.values, self.max_abs, self.max_rel
        )?;
        if let Some(w) = self.worst.as_ref().filter(|_| self.max_abs > 0.0) {
            write!(
                f,
                "  {}: ref={:e} got={:e} ({:.3}x tol)",
                w.path, w.reference, w.got, w.ratio
            )?;
        }
        if !self.missing.is_empty() {
            write!(
                f,
                "  [missing: {} paths, first {}]",
                self.missing.len(),
                self.missing[0]
            )?;
        }
        for s in self.structure.iter().take(3) {
            write!(f, "  [structure: {s}]")?;
        }
        Ok(())
    }
}

/// Compares every case of the golden document `reference` with the case of the same id in
/// `got` (`{"cases": [{"id", "got"}]}`; a case carrying `expected` instead of `got` is
/// accepted), in reference order, at `rtol` and `atol`, or at the case's own `tolerance`
/// (`{"rtol", "atol"}`) where it is looser, as `check.py` judges it. A case absent from `got`
/// fails.
pub fn compare(reference: &Value, got: &Value, rtol: f64, atol: f64) -> Vec<CaseResult> {
    let cases = |doc: &Value| -> Vec<Value> {
        doc.get("cases")
            .and_then(Value::as_array)
            .map(|c| c.iter().filter(|c| c["id"].is_string()).cloned().collect())
            .unwrap_or_default()
    };
    let got_cases: HashMap<String, Value> = cases(got)
        .into_iter()
        .map(|c| (c["id"].as_str().unwrap_or_default().to_owned(), c))
        .collect();
    cases(reference)
        .iter()
        .map(|case| {
            let id = case["id"].as_str().unwrap_or_default().to_owned();
            let (rtol, atol) = case_tolerance(case, rtol, atol);
            let mut st = Stats::new(rtol, atol);
            match got_cases.get(&id) {
                None => st.structure.push("case not in got".into()),
                Some(g) => {
                    let empty = json!({});
                    let g = g
                        .get("got")
                        .or_else(|| g.get("expected"))
                        .filter(|v| !v.is_null())
                        .unwrap_or(&empty);
                    st.compare(&case["expected"], Some(g), "", false);
                }
            }
            st.finish(id)
        })
        .collect()
}

/// Running totals of one case.
struct Stats {
    rtol: f64,
    atol: f64,
    values: usize,
    bad: usize,
    max_abs: f64,
    max_rel: f64,
    worst: Option<Worst>,
    missing: Vec<String>,
    structure: Vec<String>,
}

impl Stats {
    fn new(rtol: f64, atol: f64) -> Self {
        Stats {
            rtol,
            atol,
            values: 0,
            bad: 0,
            max_abs: 0.0,
            max_rel: 0.0,
            worst: None,
            missing: Vec::new(),
            structure: Vec::new(),
        }
    }

    fn finish(self, id: String) -> CaseResult {
        CaseResult {
            passed: self.bad == 0
                && self.structure.is_empty()
                && self.missing.is_empty()
                && self.values > 0,
            id,
            values: self.values,
            bad: self.bad,
            max_abs: self.max_abs,
            max_rel: self.max_rel,
            worst: self.worst,
            missing: self.missing,
            structure: self.structure,
        }
    }

    /// One value: `reference` from the golden file, `got` whatever stands at its place.
    fn number(&mut self, path: String, reference: f64, got: &Value) {
        self.values += 1;
        let Some(g) = as_number(got) else {
            self.bad += 1;
            self.structure
                .push(format!("{path}: got {got}, expected a number"));
            return;
        };
        let mut d = (g - reference).abs();
        if !d.is_finite() {
            d = f64::INFINITY;
        }
        self.max_abs = self.max_abs.max(d);
        if reference != 0.0 {
            self.max_rel = self.max_rel.max(d / reference.abs());
        }
        let lim = self.atol + self.rtol * reference.abs();
        let ratio = if lim > 0.0 {
            d / lim
        } else if d == 0.0 {
            0.0
        } else {
            f64::INFINITY
        };
        if d > lim {
            self.bad += 1;
        }
        if self.worst.as_ref().is_none_or(|w| ratio > w.ratio) {
            self.worst = Some(Worst {
                ratio,
                path,
                reference,
                got: g,
            });
        }
    }

    /// Compares `reference` with `got` (`None` when absent or `null`) at `path`.
    fn compare(&mut self, reference: &Value, got: Option<&Value>, path: &str, optional: bool) {
        let Some(got) = got.filter(|g| !g.is_null()) else {
            let n = count_leaves(reference);
            if n > 0 && !optional {
                self.missing.push(format!("{path} ({n} values)"));
            }
            return;
        };
        if is_tensor(reference) {
            self.tensor(reference, got, path);
            return;
        }
        match reference {
            Value::Object(r) => {
                let Value::Object(g) = got else {
                    self.structure.push(format!("{path}: expected an object"));
                    self.bad += count_leaves(reference).max(1);
                    return;
                };
                for (k, v) in r {
                    let sub = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    self.compare(
                        v,
                        g.get(k),
                        &sub,
                        optional || OPTIONAL_KEYS.contains(&k.as_str()),
                    );
                }
            }
            Value::Array(r) => match got {
                Value::Array(g) if g.len() == r.len() => {
                    for (i, (r, g)) in r.iter().zip(g).enumerate() {
                        self.compare(r, Some(g), &format!("{path}[{i}]"), optional);
                    }
                }
                _ => {
                    let len = match got {
                        Value::Array(g) => g.len().to_string(),
                        other => type_name(other).into(),
                    };
                    self.structure
                        .push(format!("{path}: list length {len} != {}", r.len()));
                    self.bad += count_leaves(reference).max(1);
                }
            },
            Value::Number(_) => self.number(path.into(), as_number(reference).unwrap_or(0.0), got),
            // Strings, booleans and null are not compared.
            _ => {}
        }
    }

    /// A reference tensor against a tensor or a bare flat list.
    fn tensor(&mut self, reference: &Value, got: &Value, path: &str) {
        let empty = Vec::new();
        let r_data = reference["data"].as_array().unwrap_or(&empty);
        let (g_shape, g_data) = match got {
            Value::Array(data) => (&reference["shape"], data),
            g if is_tensor(g) => match g["data"].as_array() {
                Some(data) => (&g["shape"], data),
                None => {
                    self.structure.push(format!("{path}: `data` is not a list"));
                    self.bad += r_data.len();
                    return;
                }
            },
            _ => {
                self.structure.push(format!("{path}: expected a tensor"));
                self.bad += r_data.len();
                return;
            }
        };
        if !same_shape(g_shape, &reference["shape"]) || g_data.len() != r_data.len() {
            self.structure.push(format!(
                "{path}: shape {g_shape} (len {}) != {}",
                g_data.len(),
                reference["shape"]
            ));
            self.bad += r_data.len();
            return;
        }
        for (i, (r, g)) in r_data.iter().zip(g_data).enumerate() {
            self.number(format!("{path}[{i}]"), as_number(r).unwrap_or(0.0), g);
        }
    }
}

/// A JSON number (not a boolean) as `f64`.
fn as_number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        _ => None,
    }
}

/// Shapes compared by value (`2` equals `2.0`, as in Python).
fn same_shape(a: &Value, b: &Value) -> bool {
    match (a.as_array(), b.as_array()) {
        (Some(a), Some(b)) => {
            a.len() == b.len()
                && a.iter()
                    .zip(b)
                    .all(|(x, y)| as_number(x).is_some() && as_number(x) == as_number(y))
        }
        _ => false,
    }
}

/// Number of numeric leaves (a tensor counts its values).
fn count_leaves(v: &Value) -> usize {
    if is_tensor(v) {
        return v["data"].as_array().map_or(0, Vec::len);
    }
    match v {
        Value::Object(m) => m.values().map(count_leaves).sum(),
        Value::Array(a) => a.iter().map(count_leaves).sum(),
        Value::Number(_) => 1,
        _ => 0,
    }
}

/// A short name of a JSON type, for messages.
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
    }
}

/// The tolerance a reference case is judged at: `rtol` and `atol`, each loosened to the
/// case's own `tolerance` where it has a looser one (as `check.py`: a case may only loosen
/// them, for a framework that computes in lower precision, as `torch.optim.Muon` does in
/// bfloat16).
pub(crate) fn case_tolerance(case: &Value, rtol: f64, atol: f64) -> (f64, f64) {
    let own = |key: &str| case["tolerance"][key].as_f64().unwrap_or(0.0);
    (rtol.max(own("rtol")), atol.max(own("atol")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_case_may_loosen_its_tolerance_and_not_tighten_it() {
        let loose = json!({"id": "c", "tolerance": {"rtol": 1e-5, "atol": 0.003}});
        assert_eq!(case_tolerance(&loose, 1e-5, 1e-6), (1e-5, 0.003));
        let tight = json!({"id": "c", "tolerance": {"rtol": 1e-9, "atol": 1e-9}});
        assert_eq!(case_tolerance(&tight, 1e-5, 1e-6), (1e-5, 1e-6));
        assert_eq!(
            case_tolerance(&json!({"id": "c"}), 1e-5, 1e-6),
            (1e-5, 1e-6)
        );
        // An error of 0.002 fails at the default tolerance and passes at the case's.
        let doc = |tolerance: Value| json!({"cases": [{"id": "c", "tolerance": tolerance, "expected": {"x": [1.0]}}]});
        let g = got(json!({"x": [1.002]}));
        assert!(!compare(&doc(json!(null)), &g, 1e-5, 1e-6)[0].passed);
        assert!(compare(&doc(json!({"atol": 0.003})), &g, 1e-5, 1e-6)[0].passed);
    }

    fn reference(expected: Value) -> Value {
        json!({"cases": [{"id": "c", "expected": expected}]})
    }
    fn got(g: Value) -> Value {
        json!({"cases": [{"id": "c", "got": g}]})
    }
    fn one(expected: Value, g: Value) -> CaseResult {
        compare(&reference(expected), &got(g), 1e-5, 1e-6).remove(0)
    }

    #[test]
    fn isclose_semantics() {
        let e = json!({"x": {"shape": [2], "data": [1.0, 0.0]}});
        let r = one(
            e.clone(),
            json!({"x": {"shape": [2], "data": [1.0 + 1.05e-5, 1e-6]}}),
        );
        assert!(r.passed, "{r}");
        assert_eq!(r.values, 2);
        let r = one(e, json!({"x": [1.0 + 1.2e-5, 0.0]}));
        assert!(!r.passed);
        assert_eq!(r.bad, 1);
        let w = r.worst.unwrap();
        assert_eq!(w.path, "x[0]");
        assert!((w.ratio - 1.2e-5 / 1.1e-5).abs() < 1e-6, "{}", w.ratio);
    }

    #[test]
    fn optional_keys_and_missing_leaves() {
        let e = json!({"steps": [{"step": 1, "lr": 0.1, "scalars": {"iterations": 1},
                                  "params": {"p": {"shape": [], "data": [2.0]}}}],
                       "name": "ignored"});
        let r = one(
            e.clone(),
            json!({"steps": [{"step": 1, "params": {"p": [2.0]}}]}),
        );
        assert!(r.passed, "{r}");
        let r = one(
            e.clone(),
            json!({"steps": [{"step": 1, "lr": 0.2, "params": {"p": [2.0]}}]}),
        );
        assert!(!r.passed, "optional values are compared when present");
        let r = one(e.clone(), json!({"steps": [{"step": 1}]}));
        assert_eq!(r.missing, ["steps[0].params (1 values)"]);
        assert!(!r.passed);
        let r = one(e, json!({"steps": []}));
        assert!(!r.passed && !r.structure.is_empty());
    }

    #[test]
    fn shape_mismatch_and_absent_case_fail() {
        let e = json!({"x": {"shape": [2, 1], "data": [1.0, 2.0]}});
        let r = one(e.clone(), json!({"x": {"shape": [2], "data": [1.0, 2.0]}}));
        assert!(!r.passed && r.bad == 2);
        let r = compare(&reference(e), &json!({"cases": []}), 1e-5, 1e-6).remove(0);
        assert!(!r.passed);
        assert_eq!(r.structure, ["case not in got"]);
    }

    #[test]
    fn nothing_compared_fails() {
        let r = one(json!({"initial_state": {}}), json!({"initial_state": {}}));
        assert!(!r.passed);
    }
}
