//! The `inputs` of an optimizer case: parameter tensors in `param_order`, one gradient set per
//! step, and the save point of a save/load case, laid out as fusegraph takes them (every tensor
//! concatenated into one flat buffer).

use crate::tensor::{tensor_of, Layout};
use serde_json::Value;

/// The parsed inputs of one optimizer case.
pub(crate) struct Inputs {
    /// The parameters, in the order they are handed to the optimizer.
    pub layout: Layout,
    /// Initial parameters, concatenated.
    pub params: Vec<f32>,
    /// Gradients of step `t` at index `t - 1`, concatenated like the parameters.
    pub grads: Vec<Vec<f32>>,
    /// Save/load cases: the optimizer is saved and restored after this many steps.
    pub save_after: Option<usize>,
}

impl Inputs {
    /// Reads a case's `inputs`; `save_load` requires `save_after_step`.
    pub fn parse(inputs: &Value, save_load: bool) -> Result<Inputs, String> {
        let names: Vec<String> = inputs
            .get("param_order")
            .and_then(Value::as_array)
            .ok_or("inputs.param_order is missing")?
            .iter()
            .map(|n| n.as_str().map(String::from))
            .collect::<Option<_>>()
            .ok_or("inputs.param_order holds something other than names")?;
        let params = inputs
            .get("params")
            .and_then(Value::as_object)
            .ok_or("inputs.params is missing")?;
        let mut layout = Layout::default();
        let mut flat = Vec::new();
        for name in names {
            let t = tensor_of(params, &name, "inputs.params")?;
            flat.extend_from_slice(&t.data);
            layout.push(name, t.shape);
        }
        let grads = inputs
            .get("grads")
            .and_then(Value::as_array)
            .ok_or("inputs.grads is missing")?
            .iter()
            .enumerate()
            .map(|(i, step)| {
                let step = step
                    .as_object()
                    .ok_or_else(|| format!("inputs.grads[{i}] is not an object"))?;
                let mut g = Vec::with_capacity(flat.len());
                for (name, shape) in layout.names.iter().zip(&layout.shapes) {
                    let t = tensor_of(step, name, &format!("inputs.grads[{i}]"))?;
                    if &t.shape != shape {
                        return Err(format!(
                            "inputs.grads[{i}].{name} has shape {:?}, the parameter {shape:?}",
                            t.shape
                        ));
                    }
                    g.extend_from_slice(&t.data);
                }
                Ok(g)
            })
            .collect::<Result<Vec<_>, String>>()?;
        if let Some(n) = inputs.get("num_steps").and_then(Value::as_u64) {
            if usize::try_from(n) != Ok(grads.len()) {
                return Err(format!(
                    "inputs.num_steps is {n} but inputs.grads has {} steps",
                    grads.len()
                ));
            }
        }
        let save_after = if save_load {
            let k = inputs
                .get("save_after_step")
                .and_then(Value::as_u64)
                .and_then(|k| usize::try_from(k).ok())
                .ok_or("inputs.save_after_step is missing in a save/load case")?;
            if k == 0 || k > grads.len() {
                return Err(format!(
                    "inputs.save_after_step = {k} is outside 1..={}",
                    grads.len()
                ));
            }
            Some(k)
        } else {
            None
        };
        Ok(Inputs {
            layout,
            params: flat,
            grads,
            save_after,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn inputs() -> Value {
        json!({
            "param_order": ["b", "a"],
            "params": {"a": {"shape": [2], "data": [1.0, 2.0]},
                       "b": {"shape": [1, 1], "data": [3.0]}},
            "grads": [{"a": {"shape": [2], "data": [0.1, 0.2]},
                       "b": {"shape": [1, 1], "data": [0.3]}}],
            "num_steps": 1,
            "save_after_step": 1
        })
    }

    #[test]
    fn concatenates_in_param_order() {
        let i = Inputs::parse(&inputs(), true).unwrap();
        assert_eq!(i.params, [3.0, 1.0, 2.0]);
        assert_eq!(i.grads, [vec![0.3, 0.1, 0.2]]);
        assert_eq!(i.layout.names, ["b", "a"]);
        assert_eq!(i.layout.ranges, [0..1, 1..3]);
        assert_eq!(i.save_after, Some(1));
        assert_eq!(Inputs::parse(&inputs(), false).unwrap().save_after, None);
    }

    #[test]
    fn gradient_shape_must_match() {
        let mut v = inputs();
        v["grads"][0]["a"] = json!({"shape": [1, 2], "data": [0.1, 0.2]});
        let e = Inputs::parse(&v, false).err().unwrap();
        assert!(e.contains("grads[0].a"), "{e}");
    }
}
