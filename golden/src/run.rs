//! Runs one fusegraph [`Optimizer`] through a case's steps and writes the `got` object that
//! mirrors the case's `expected`: `initial_state`, `initial_scalars` and, per step, `step`,
//! `lr`, `params`, `state` and `scalars`, with state named as the framework names it.

use crate::inputs::Inputs;
use crate::tensor::{scalar_json, to_json};
use fusegraph::optim::{Config, Optimizer, Rule};
use serde_json::{json, Map, Value};

/// Which framework's conventions the output follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Framework {
    /// Keras 3: state exists once the optimizer is built; an optimizer-level `iterations`
    /// counter and carried scalars (Nadam `u_product`) are `scalars`; the EMA is slot `average`.
    Keras,
    /// PyTorch: carried scalars (NAdam `mu_product`) and, if `step_counter`, the step count are
    /// per-parameter scalar tensors in the state; `scalars` is empty.
    Torch {
        /// The class keeps a per-parameter `step` tensor (every class but SGD).
        step_counter: bool,
        /// The class creates its state in the constructor (Adagrad) instead of at the first
        /// step, so `initial_state` is not empty.
        state_at_build: bool,
    },
}

/// Runs `rule` with `config` over the steps of `inputs` and returns the `got` object. Slots
/// are written under their own names except those renamed by `(slot, name)` pairs in `renames`.
///
/// In a save/load case the optimizer's state is serialized after step `save_after` and the
/// remaining steps run on a new optimizer restored from that copy, with the parameters copied
/// into a new buffer.
pub(crate) fn run<R: Rule>(
    rule: R,
    config: Config,
    framework: Framework,
    renames: &[(&str, &str)],
    inputs: &Inputs,
) -> Result<Value, String> {
    let out = Output {
        framework,
        renames,
        inputs,
    };
    let lens = inputs.lens();
    let mut opt = Optimizer::with_config(rule, &lens, config);
    let mut params = inputs.params.clone();
    let initial_state = match framework {
        Framework::Torch {
            state_at_build: false,
            ..
        } => json!({}),
        _ => out.state(&opt)?,
    };
    let mut steps = Vec::with_capacity(inputs.grads.len());
    let initial_scalars = out.scalars(&opt);
    for (i, grads) in inputs.grads.iter().enumerate() {
        let t = i + 1;
        let lr = opt.current_learning_rate();
        opt.step(&mut params, grads);
        let mut step = Map::new();
        step.insert("step".into(), t.into());
        if let Some(lr) = lr {
            step.insert("lr".into(), f64::from(lr).into());
        }
        let p = inputs.per_param(|k| {
            Ok(to_json(
                &inputs.shapes[k],
                &params[inputs.ranges[k].clone()],
            ))
        })?;
        step.insert("params".into(), p);
        step.insert("state".into(), out.state(&opt)?);
        step.insert("scalars".into(), out.scalars(&opt));
        steps.push(Value::Object(step));
        if inputs.save_after == Some(t) {
            let saved = save(&opt);
            opt = restore(&saved, rule, config, &lens)?;
            params = params.clone();
        }
    }
    Ok(json!({
        "initial_state": initial_state,
        "initial_scalars": initial_scalars,
        "steps": steps,
    }))
}

/// How state and scalars are written.
struct Output<'a> {
    framework: Framework,
    renames: &'a [(&'a str, &'a str)],
    inputs: &'a Inputs,
}

impl Output<'_> {
    /// `{slot: {param: tensor}}`: every slot of the rule, plus the EMA (Keras `average`) or
    /// the per-parameter scalars (PyTorch `step` and carried scalars).
    fn state<R: Rule>(&self, opt: &Optimizer<R>) -> Result<Value, String> {
        let inputs = self.inputs;
        let mut out = Map::new();
        for &slot in R::SLOTS {
            let per_param = inputs.per_param(|k| {
                let data = opt
                    .slot_tensor(slot, k)
                    .ok_or_else(|| format!("{}: no slot `{slot}` for tensor {k}", R::NAME))?;
                Ok(to_json(&inputs.shapes[k], data))
            })?;
            let name = self
                .renames
                .iter()
                .find(|(from, _)| *from == slot)
                .map_or(slot, |(_, to)| *to);
            out.insert(name.into(), per_param);
        }
        match self.framework {
            Framework::Keras => {
                if let Some(ema) = opt.ema() {
                    let average = inputs.per_param(|k| {
                        let data = ema
                            .get(inputs.ranges[k].clone())
                            .ok_or_else(|| format!("EMA buffer too short for tensor {k}"))?;
                        Ok(to_json(&inputs.shapes[k], data))
                    })?;
                    out.insert("average".into(), average);
                }
            }
            Framework::Torch { step_counter, .. } => {
                if step_counter {
                    let t = opt.iterations() as f32;
                    out.insert("step".into(), inputs.per_param(|_| Ok(scalar_json(t)))?);
                }
                for &name in R::CARRIED {
                    let v = opt
                        .carried(name)
                        .ok_or_else(|| format!("{}: no carried scalar `{name}`", R::NAME))?;
                    out.insert(name.into(), inputs.per_param(|_| Ok(scalar_json(v)))?);
                }
            }
        }
        Ok(Value::Object(out))
    }

    /// Keras: `{"iterations": t}` and every carried scalar; PyTorch: `{}`.
    fn scalars<R: Rule>(&self, opt: &Optimizer<R>) -> Value {
        let mut out = Map::new();
        if self.framework == Framework::Keras {
            out.insert("iterations".into(), opt.iterations().into());
            for &name in R::CARRIED {
                if let Some(v) = opt.carried(name) {
                    out.insert(name.into(), f64::from(v).into());
                }
            }
        }
        Value::Object(out)
    }
}

/// The optimizer's state (`get_weights`, with `weight_names`) as JSON text.
fn save<R: Rule>(opt: &Optimizer<R>) -> String {
    let weights: Vec<Vec<f64>> = opt
        .get_weights()
        .iter()
        .map(|w| w.iter().map(|&x| f64::from(x)).collect())
        .collect();
    json!({ "names": opt.weight_names(), "weights": weights }).to_string()
}

/// A new optimizer with `rule` and `config`, restored from the text written by [`save`].
fn restore<R: Rule>(
    saved: &str,
    rule: R,
    config: Config,
    lens: &[usize],
) -> Result<Optimizer<R>, String> {
    let doc: Value =
        serde_json::from_str(saved).map_err(|e| format!("saved optimizer state: {e}"))?;
    let mut fresh = Optimizer::with_config(rule, lens, config);
    let names = fresh.weight_names();
    if doc["names"] != json!(names) {
        return Err(format!(
            "saved state has arrays {}, the new optimizer {names:?}",
            doc["names"]
        ));
    }
    let weights = doc["weights"]
        .as_array()
        .ok_or("saved state has no `weights` list")?
        .iter()
        .map(|w| {
            w.as_array()?
                .iter()
                .map(|x| x.as_f64().map(|x| x as f32))
                .collect::<Option<Vec<f32>>>()
        })
        .collect::<Option<Vec<Vec<f32>>>>()
        .ok_or("saved state holds something other than arrays of numbers")?;
    fresh
        .set_weights(&weights)
        .map_err(|e| format!("set_weights: {e}"))?;
    Ok(fresh)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fusegraph::optim::{keras, Ema};

    #[test]
    fn save_and_restore_are_bit_exact() {
        let lens = [3, 2];
        let config = Config::default().ema(Ema {
            momentum: 0.9,
            overwrite_every: 0,
        });
        let rule = keras::Nadam::default();
        let mut opt = Optimizer::with_config(rule, &lens, config);
        let mut p = vec![0.3, -1.7, 1e-30, 1e4, 0.1];
        for g in [[0.1, 0.2, -0.3, 1e-3, 7.0], [0.5, -0.25, 0.3, 1e-2, -7.0]] {
            opt.step(&mut p, &g);
        }
        let back = restore(&save(&opt), rule, config, &lens).unwrap();
        let bits = |o: &Optimizer<keras::Nadam>| {
            o.get_weights()
                .iter()
                .map(|w| w.iter().map(|x| x.to_bits()).collect::<Vec<_>>())
                .collect::<Vec<_>>()
        };
        assert_eq!(bits(&back), bits(&opt));
        assert_eq!(back.iterations(), 2);
        assert_eq!(back.carried("u_product"), opt.carried("u_product"));
    }

    #[test]
    fn restore_rejects_another_layout() {
        let rule = keras::Adam::default();
        let opt = Optimizer::with_config(rule, &[4], Config::default());
        let e = restore(&save(&opt), rule, Config::default(), &[2, 2])
            .err()
            .unwrap();
        assert!(e.contains("arrays"), "{e}");
    }
}
