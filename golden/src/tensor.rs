//! Tensors as the golden files write them: `{"shape": [d0, d1, ...], "data": [...]}`, with
//! `data` the row-major flattening and a scalar written as `"shape": []` with one value.

use crate::plan::Route;
use serde_json::{json, Map, Value};
use std::ops::Range;

/// A float32 tensor read from a golden file.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Tensor {
    /// Dimensions; empty for a scalar.
    pub shape: Vec<usize>,
    /// Row-major values.
    pub data: Vec<f32>,
}

impl Tensor {
    /// Reads `{"shape", "data"}`; `what` names the tensor in error messages.
    pub fn parse(v: &Value, what: &str) -> Result<Tensor, String> {
        let shape = v
            .get("shape")
            .and_then(Value::as_array)
            .ok_or_else(|| format!("{what}: not a tensor (no `shape` list)"))?
            .iter()
            .map(|d| d.as_u64().and_then(|d| usize::try_from(d).ok()))
            .collect::<Option<Vec<usize>>>()
            .ok_or_else(|| format!("{what}: `shape` holds something other than sizes"))?;
        let data = v
            .get("data")
            .and_then(Value::as_array)
            .ok_or_else(|| format!("{what}: not a tensor (no `data` list)"))?
            .iter()
            // The files hold exact float32 values in float64 form: the cast gives back the bits.
            .map(|x| x.as_f64().map(|x| x as f32))
            .collect::<Option<Vec<f32>>>()
            .ok_or_else(|| format!("{what}: `data` holds something other than numbers"))?;
        let len: usize = shape.iter().product();
        if len != data.len() {
            return Err(format!(
                "{what}: shape {shape:?} needs {len} values, `data` has {}",
                data.len()
            ));
        }
        Ok(Tensor { shape, data })
    }
}

/// The tensor `name` of the object `within` (named `what` in messages).
pub(crate) fn tensor_of(
    within: &Map<String, Value>,
    name: &str,
    what: &str,
) -> Result<Tensor, String> {
    let v = within
        .get(name)
        .ok_or_else(|| format!("{what} has no tensor `{name}`"))?;
    Tensor::parse(v, &format!("{what}.{name}"))
}

/// Named tensors laid end to end in one flat buffer, in order: the parameters of a case (and
/// with them, their gradients and optimizer slots).
#[derive(Debug, Default)]
pub(crate) struct Layout {
    /// Tensor names, in buffer order.
    pub names: Vec<String>,
    /// Shape of each tensor.
    pub shapes: Vec<Vec<usize>>,
    /// Where each tensor lies in the flat buffer.
    pub ranges: Vec<Range<usize>>,
}

impl Layout {
    /// Appends a tensor after the others.
    pub fn push(&mut self, name: String, shape: Vec<usize>) {
        let start = self.len();
        self.ranges
            .push(start..start + shape.iter().product::<usize>());
        self.names.push(name);
        self.shapes.push(shape);
    }

    /// Values in the flat buffer.
    pub fn len(&self) -> usize {
        self.ranges.last().map_or(0, |r| r.end)
    }

    /// Number of values of each tensor.
    pub fn lens(&self) -> Vec<usize> {
        self.ranges.iter().map(|r| r.len()).collect()
    }

    /// The routes by name as `(tensor index, branch)`; a name that is not a tensor's fails.
    pub fn routes<'r>(&self, routes: &'r [Route]) -> Result<Vec<(usize, &'r str)>, String> {
        routes
            .iter()
            .map(
                |(name, branch)| match self.names.iter().position(|n| n == name) {
                    Some(k) => Ok((k, *branch)),
                    None => Err(format!("a route names `{name}`, which is not a parameter")),
                },
            )
            .collect()
    }

    /// Each tensor's shape as a rule sees it.
    pub fn rule_shapes(&self) -> Vec<fusegraph::optim::Shape> {
        self.shapes
            .iter()
            .map(|s| fusegraph::optim::Shape::of(s))
            .collect()
    }

    /// `{name: f(index)}` over the tensors for which `f` gives a value, in order.
    pub fn per_param_some(
        &self,
        mut f: impl FnMut(usize) -> Result<Option<Value>, String>,
    ) -> Result<Value, String> {
        let mut out = Map::new();
        for (i, name) in self.names.iter().enumerate() {
            if let Some(v) = f(i)? {
                out.insert(name.clone(), v);
            }
        }
        Ok(Value::Object(out))
    }

    /// `{name: f(index)}` over the tensors, in order.
    pub fn per_param(
        &self,
        mut f: impl FnMut(usize) -> Result<Value, String>,
    ) -> Result<Value, String> {
        let mut out = Map::new();
        for (i, name) in self.names.iter().enumerate() {
            out.insert(name.clone(), f(i)?);
        }
        Ok(Value::Object(out))
    }

    /// `{name: tensor}` of a flat buffer laid out as `self`.
    pub fn tensors(&self, flat: &[f32]) -> Value {
        let mut out = Map::new();
        for ((name, shape), r) in self.names.iter().zip(&self.shapes).zip(&self.ranges) {
            out.insert(name.clone(), to_json(shape, &flat[r.clone()]));
        }
        Value::Object(out)
    }
}

/// `true` for an object with `shape` and `data` (what `check.py` takes for a tensor).
pub(crate) fn is_tensor(v: &Value) -> bool {
    v.get("shape").is_some() && v.get("data").is_some()
}

/// Writes `data` with `shape` as a golden tensor; every `f32` becomes its exact `f64` value.
pub(crate) fn to_json(shape: &[usize], data: &[f32]) -> Value {
    let data: Vec<Value> = data.iter().map(|&x| Value::from(f64::from(x))).collect();
    json!({ "shape": shape, "data": data })
}

/// A scalar tensor (`"shape": []`), as PyTorch's per-parameter `step` and `mu_product`.
pub(crate) fn scalar_json(x: f32) -> Value {
    to_json(&[], &[x])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_exact_f32() {
        let data = [0.1f32, -1e-30, 1e4, f32::MIN_POSITIVE, 3.4e38];
        let v = to_json(&[5], &data);
        let text = serde_json::to_string(&v).unwrap();
        let back = Tensor::parse(&serde_json::from_str(&text).unwrap(), "t").unwrap();
        assert_eq!(back.shape, [5]);
        let bits = |d: &[f32]| d.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&back.data), bits(&data));
    }

    #[test]
    fn scalar_has_empty_shape_and_one_value() {
        let t = Tensor::parse(&scalar_json(2.0), "s").unwrap();
        assert!(t.shape.is_empty());
        assert_eq!(t.data, [2.0]);
    }

    #[test]
    fn layout_lays_tensors_end_to_end() {
        let mut l = Layout::default();
        l.push("w".into(), vec![2, 3]);
        l.push("b".into(), vec![3]);
        l.push("s".into(), vec![]);
        assert_eq!(l.ranges, [0..6, 6..9, 9..10]);
        assert_eq!((l.len(), l.lens()), (10, vec![6, 3, 1]));
        let flat: Vec<f32> = (0..10).map(|i| i as f32).collect();
        let t = l.tensors(&flat);
        assert_eq!(t["b"], to_json(&[3], &[6.0, 7.0, 8.0]));
        assert_eq!(t["s"], scalar_json(9.0));
    }

    #[test]
    fn rejects_a_length_mismatch() {
        let v = json!({"shape": [2, 2], "data": [1.0, 2.0, 3.0]});
        let e = Tensor::parse(&v, "p0").unwrap_err();
        assert!(e.contains("p0") && e.contains("4 values"), "{e}");
    }
}
