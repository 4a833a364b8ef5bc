//! Runs one fusegraph [`Optimizer`] through an optimizer case's steps and writes the `got`
//! object that mirrors the case's `expected`: `initial_state`, `initial_scalars` and, per step,
//! `step`, `lr`, `params`, `state`, `scalars` and, for a rule with the view `eval_params`, the
//! parameters at which to evaluate; state is named as the framework names it.

use crate::inputs::Inputs;
use crate::plan::{Route, WithRule};
use crate::state::{Conventions, Framework};
use fusegraph::optim::{Config, Optimizer, Rule, Shape};
use serde_json::{json, Map, Value};

/// An optimizer case's run: the steps of `inputs`, with the rule its optimizer maps to.
pub(crate) struct Trajectory<'a>(pub &'a Inputs);

impl WithRule for Trajectory<'_> {
    type Output = Value;

    fn run<R: Rule + 'static>(
        self,
        rule: R,
        config: Config,
        routes: &[Route],
        conventions: Conventions,
    ) -> Result<Value, String> {
        run(rule, config, routes, conventions, self.0)
    }
}

/// Runs `rule` with `config` over the steps of `inputs` and returns the `got` object, with the
/// state written by `conventions`.
///
/// In a save/load case the optimizer's state is serialized after step `save_after` and the
/// remaining steps run on a new optimizer restored from that copy, with the parameters copied
/// into a new buffer.
fn run<R: Rule>(
    rule: R,
    config: Config,
    routes: &[Route],
    conventions: Conventions,
    inputs: &Inputs,
) -> Result<Value, String> {
    let layout = &inputs.layout;
    let shapes = layout.rule_shapes();
    let routes = layout.routes(routes)?;
    let mut opt = placed(rule, &shapes, &routes, config)?;
    let mut params = inputs.params.clone();
    opt.start_from(&params);
    let eval = R::VIEWS.iter().position(|v| *v == "eval_params");
    let mut viewed = vec![0.0; params.len()];
    let initial_state = match conventions.framework {
        Framework::Torch {
            state_at_build: false,
            ..
        } => json!({}),
        _ => conventions.state(&opt, layout)?,
    };
    let mut steps = Vec::with_capacity(inputs.grads.len());
    let initial_scalars = conventions.scalars(&opt);
    for (i, grads) in inputs.grads.iter().enumerate() {
        let t = i + 1;
        let lr = opt.current_learning_rate();
        opt.step(&mut params, grads);
        let mut step = Map::new();
        step.insert("step".into(), t.into());
        if let Some(lr) = lr.filter(|_| conventions.records_lr()) {
            step.insert("lr".into(), f64::from(lr).into());
        }
        step.insert("params".into(), layout.tensors(&params));
        if let Some(view) = eval {
            opt.view(view, &params, &mut viewed);
            step.insert("eval_params".into(), layout.tensors(&viewed));
        }
        step.insert("state".into(), conventions.state(&opt, layout)?);
        step.insert("scalars".into(), conventions.scalars(&opt));
        steps.push(Value::Object(step));
        if inputs.save_after == Some(t) {
            let saved = save(&opt);
            opt = restore(&saved, placed(rule, &shapes, &routes, config)?)?;
            params = params.clone();
        }
    }
    Ok(json!({
        "initial_state": initial_state,
        "initial_scalars": initial_scalars,
        "steps": steps,
    }))
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

/// An optimizer with `rule` and `config` for tensors of `shapes`, some routed to a branch of
/// the rule: `(tensor, branch)`.
fn placed<R: Rule>(
    rule: R,
    shapes: &[Shape],
    routes: &[(usize, &str)],
    config: Config,
) -> Result<Optimizer<R>, String> {
    Optimizer::with_routes(rule, shapes, routes, config).map_err(|e| format!("routes: {e}"))
}

/// `fresh`, a new optimizer, restored from the text written by [`save`].
fn restore<R: Rule>(saved: &str, mut fresh: Optimizer<R>) -> Result<Optimizer<R>, String> {
    let doc: Value =
        serde_json::from_str(saved).map_err(|e| format!("saved optimizer state: {e}"))?;
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
        let fresh = Optimizer::with_config(rule, &lens, config);
        let back = restore(&save(&opt), fresh).unwrap();
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
        let fresh = Optimizer::with_config(rule, &[2, 2], Config::default());
        let e = restore(&save(&opt), fresh).err().unwrap();
        assert!(e.contains("arrays"), "{e}");
    }
}
