//! optax cases: `optax.<function>(**args)` (`optax.lamb`, `optax.lars`, `optax.contrib.muon`,
//! `optax.contrib.schedule_free_adamw`), mapped onto `fusegraph::optim::optax`. A mask entry that is `false` routes its parameter to
//! the branch of the rule without the masked transformation.

use crate::args::Args;
use crate::plan::{Plan, Route, WithRule};
use crate::state::Framework;
use fusegraph::optim::optax;
use fusegraph::optim::{Config, WeightDecay};
use serde_json::{Map, Value};

/// optax's state paths of the slots the rules name with `_`.
const MUON: &[(&str, &str)] = &[
    ("muon_mu", "muon.mu"),
    ("adam_mu", "adam.mu"),
    ("adam_nu", "adam.nu"),
];

/// Maps an optax case's `optimizer` object onto a rule, and runs `with` on it.
pub(crate) fn map<W: WithRule>(optimizer: &Value, with: W) -> Result<W::Output, String> {
    let class = optimizer["class"].as_str().unwrap_or_default();
    let own: &[&str] = match class {
        "optax.lamb" => &["b1", "b2", "eps", "eps_root", "mask"],
        "optax.lars" => &[
            "weight_decay_mask",
            "trust_coefficient",
            "eps",
            "trust_ratio_mask",
            "momentum",
            "nesterov",
        ],
        "optax.contrib.muon" => &[
            "ns_coeffs",
            "ns_steps",
            "beta",
            "eps",
            "nesterov",
            "adam_b1",
            "adam_b2",
            "adam_eps_root",
            "adam_weight_decay",
            "adam_learning_rate",
            "consistent_rms",
            "adaptive",
        ],
        "optax.contrib.schedule_free_adamw" => {
            &["warmup_steps", "b1", "b2", "eps", "weight_lr_power"]
        }
        _ => return Err(format!("unsupported optimizer class `{class}`")),
    };
    let args = Args::new(optimizer.get("args"), optimizer.get("defaults"))?;
    args.check_supported(&[&["learning_rate", "weight_decay"], own].concat())?;
    let weight_decay = match args.float("weight_decay")? {
        Some(wd) if wd != 0.0 => WeightDecay::Decoupled(wd),
        _ => WeightDecay::None,
    };
    let counts: &'static [&'static str] = match class {
        "optax.lamb" => &["[0].count"],
        "optax.contrib.muon" => &[
            "inner_states['adam'].inner_state[0].count",
            "inner_states['muon'].inner_state[0].count",
        ],
        "optax.contrib.schedule_free_adamw" => &[
            "base_optimizer_state[0].count",
            "base_optimizer_state[2].count",
        ],
        _ => &[],
    };
    let routes = match class {
        "optax.lamb" => mask_routes(mask(args.get("mask"))?, "undecayed"),
        "optax.lars" => lars_routes(
            mask(args.get("weight_decay_mask"))?,
            mask(args.get("trust_ratio_mask"))?,
        )?,
        _ => Vec::new(),
    };
    let plan = Plan {
        args,
        config: Config::default(),
        weight_decay,
        framework: Framework::Optax {
            counts,
            // Schedule-free records the rate of its base step, `s(t - 1)`, not `lr`.
            records_lr: class != "optax.contrib.schedule_free_adamw",
        },
        routes,
    };
    match class {
        "optax.lamb" => plan.run(optax::Lamb::default(), with),
        "optax.lars" => plan.run(optax::Lars::default(), with),
        "optax.contrib.schedule_free_adamw" => plan.run(optax::ScheduleFreeAdamw::default(), with),
        _ => plan.run_renamed(optax::Muon::default(), MUON, with),
    }
}

/// An optax mask: `None` (absent, `null`, `true`: every parameter), or `{param: bool}`.
type Mask<'a> = Option<&'a Map<String, Value>>;

/// Reads a mask argument; `false` for every parameter is not mapped.
fn mask(v: Option<&Value>) -> Result<Mask<'_>, String> {
    match v {
        None | Some(Value::Bool(true)) => Ok(None),
        Some(Value::Object(m)) => match m.iter().find(|(_, b)| !b.is_boolean()) {
            Some((name, b)) => Err(format!("mask entry `{name}` = {b} is not a boolean")),
            None => Ok(Some(m)),
        },
        Some(other) => Err(format!(
            "mask {other} is not mapped (a {{param: bool}} object is)"
        )),
    }
}

/// Whether `mask` applies its transformation to parameter `name`.
fn applies(mask: Mask, name: &str) -> bool {
    mask.and_then(|m| m.get(name)).and_then(Value::as_bool) != Some(false)
}

/// The parameters whose entry in `mask` is `false`, routed to `branch`.
fn mask_routes(mask: Mask, branch: &'static str) -> Vec<Route> {
    mask.into_iter()
        .flat_map(|m| m.keys())
        .filter(|name| !applies(mask, name))
        .map(|name| (name.clone(), branch))
        .collect()
}

/// LARS routes each parameter by its two masks to the branch without what they leave out.
fn lars_routes(decay: Mask, trust: Mask) -> Result<Vec<Route>, String> {
    let mut names: Vec<&String> = decay
        .into_iter()
        .chain(trust)
        .flat_map(|m| m.keys())
        .collect();
    names.sort();
    names.dedup();
    Ok(names
        .into_iter()
        .filter_map(|name| {
            let branch = match (applies(decay, name), applies(trust, name)) {
                (true, true) => return None,
                (true, false) => "decay_only",
                (false, true) => "trust_only",
                (false, false) => "plain",
            };
            Some((name.clone(), branch))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lars_masks_route_each_parameter_to_what_they_leave() {
        let decay = json!({"a": false, "b": true, "c": false, "d": true});
        let trust = json!({"a": false, "b": false, "c": true});
        let routes = lars_routes(mask(Some(&decay)).unwrap(), mask(Some(&trust)).unwrap());
        let routes = routes.unwrap();
        let expected = [("a", "plain"), ("b", "decay_only"), ("c", "trust_only")];
        assert_eq!(routes.len(), expected.len(), "{routes:?}");
        for ((name, branch), (want_name, want_branch)) in routes.iter().zip(expected) {
            assert_eq!((name.as_str(), *branch), (want_name, want_branch));
        }
    }

    #[test]
    fn a_mask_is_an_object_of_booleans_or_true() {
        assert!(mask(Some(&json!(true))).unwrap().is_none());
        assert!(mask(Some(&json!(false))).is_err());
        assert!(mask(Some(&json!({"p0": 1}))).is_err());
        let lamb = json!({"p0": false, "p1": true});
        let routes = mask_routes(mask(Some(&lamb)).unwrap(), "undecayed");
        assert_eq!(routes, vec![("p0".to_string(), "undecayed")]);
    }
}
