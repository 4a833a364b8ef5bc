//! Keras 3 optimizer cases: `keras.optimizers.<Class>(**args)` with an optional
//! `keras.optimizers.schedules` learning rate, mapped onto `fusegraph::optim::keras`.

use crate::args::Args;
use crate::plan::{Plan, Route, WithRule};
use crate::state::Framework;
use fusegraph::optim::keras;
use fusegraph::optim::{Config, Decay, Ema, NormClip, Schedule, WeightDecay};
use serde_json::Value;

/// Arguments every Keras optimizer takes (`BaseOptimizer`) that the harness maps. The others
/// (`loss_scale_factor`, `gradient_accumulation_steps`) skip the case unless left at `null`.
const COMMON: &[&str] = &[
    "name",
    "learning_rate",
    "weight_decay",
    "clipnorm",
    "clipvalue",
    "global_clipnorm",
    "use_ema",
    "ema_momentum",
    "ema_overwrite_frequency",
];

/// Keras names the SGD velocity and the RMSprop momentum buffer `momentum`, which the rules
/// cannot (it is also their hyper-parameter's name).
const SGD: &[(&str, &str)] = &[("velocity", "momentum")];
/// See [`SGD`].
const RMS: &[(&str, &str)] = &[("momentum_buffer", "momentum")];
/// See [`SGD`].
const MUON: &[(&str, &str)] = &[("momentum_buffer", "momentum")];

/// Maps a Keras case's `optimizer` object onto a rule and a [`Config`], and runs `with` on
/// them.
pub(crate) fn map<W: WithRule>(optimizer: &Value, with: W) -> Result<W::Output, String> {
    let class = optimizer["class"].as_str().unwrap_or_default();
    let name = class.strip_prefix("keras.optimizers.").unwrap_or(class);
    let own: &[&str] = match name {
        "SGD" => &["momentum", "nesterov"],
        "Adagrad" => &["initial_accumulator_value", "epsilon"],
        "RMSprop" => &["rho", "momentum", "epsilon", "centered"],
        "Adam" | "AdamW" => &["beta_1", "beta_2", "epsilon", "amsgrad"],
        "Adamax" | "Nadam" => &["beta_1", "beta_2", "epsilon"],
        "Adadelta" => &["rho", "epsilon"],
        "Lion" => &["beta_1", "beta_2"],
        "Lamb" => &["beta_1", "beta_2", "epsilon"],
        // `relative_step` changes nothing with a constant rate: `min(lr, 1 / sqrt(t))` either
        // way.
        "Adafactor" => &[
            "beta_2_decay",
            "epsilon_1",
            "epsilon_2",
            "clip_threshold",
            "relative_step",
        ],
        "Muon" => &[
            "adam_beta_1",
            "adam_beta_2",
            "epsilon",
            "exclude_layers",
            "exclude_embeddings",
            "muon_a",
            "muon_b",
            "muon_c",
            "adam_lr_ratio",
            "momentum",
            "ns_steps",
            "nesterov",
            "adam_weight_decay",
            "rms_rate",
        ],
        "Ftrl" => &[
            "learning_rate_power",
            "initial_accumulator_value",
            "l1_regularization_strength",
            "l2_regularization_strength",
            "l2_shrinkage_regularization_strength",
            "beta",
        ],
        _ => return Err(format!("unsupported optimizer class `{class}`")),
    };
    let args = Args::new(optimizer.get("args"), optimizer.get("defaults"))?;
    args.check_supported(&[COMMON, own].concat())?;

    let mut config = Config::default();
    if let Some(c) = args.float("clipnorm")? {
        config = config.clip_norm(NormClip::PerTensor(c));
    }
    if let Some(c) = args.float("global_clipnorm")? {
        config = config.clip_norm(NormClip::Global(c));
    }
    if let Some(v) = args.float("clipvalue")? {
        config = config.clip_value(v);
    }
    if args.flag("use_ema")? {
        config = config.ema(Ema {
            momentum: args.float("ema_momentum")?.unwrap_or(0.99),
            overwrite_every: args.count("ema_overwrite_frequency")?.unwrap_or(0),
        });
    }
    match optimizer.get("schedule") {
        None | Some(Value::Null) => {}
        Some(s) => config = config.schedule(schedule(s)?),
    }
    let weight_decay = match args.float("weight_decay")? {
        Some(wd) if wd != 0.0 => WeightDecay::Decoupled(wd),
        _ => WeightDecay::None,
    };
    let v = args.variant()?;
    let plan = Plan {
        args,
        config,
        weight_decay,
        framework: Framework::Keras,
        routes: Vec::new(),
    };
    match name {
        "SGD" if !v.momentum => plan.run(keras::Sgd::default(), with),
        "SGD" if v.nesterov => plan.run_renamed(keras::SgdNesterov::default(), SGD, with),
        "SGD" => plan.run_renamed(keras::SgdMomentum::default(), SGD, with),
        "Adagrad" => plan.run(keras::Adagrad::default(), with),
        "RMSprop" => match (v.centered, v.momentum) {
            (false, false) => plan.run(keras::RmsProp::default(), with),
            (false, true) => plan.run_renamed(keras::RmsPropMomentum::default(), RMS, with),
            (true, false) => plan.run(keras::RmsPropCentered::default(), with),
            (true, true) => plan.run_renamed(keras::RmsPropCenteredMomentum::default(), RMS, with),
        },
        // AdamW with amsgrad: the AMSGrad rule, its decoupled decay in the Config.
        "Adam" | "AdamW" if v.amsgrad => plan.run(keras::AdamAmsgrad::default(), with),
        "Adam" => plan.run(keras::Adam::default(), with),
        "AdamW" => plan.run(keras::AdamW::default(), with),
        "Adamax" => plan.run(keras::Adamax::default(), with),
        "Nadam" => plan.run(keras::Nadam::default(), with),
        "Adadelta" => plan.run(keras::Adadelta::default(), with),
        "Lion" => plan.run(keras::Lion::default(), with),
        "Lamb" => plan.run(keras::Lamb::default(), with),
        "Adafactor" => plan.run(keras::Adafactor::default(), with),
        "Muon" => {
            let routes = excluded(plan.args.get("exclude_layers"), optimizer)?;
            Plan { routes, ..plan }.run_renamed(keras::Muon::default(), MUON, with)
        }
        _ => plan.run(keras::Ftrl::default(), with),
    }
}

/// Keras Muon's `exclude_layers`: the parameters whose variable path (`variable_paths`) a
/// pattern finds (`re.search`), routed to the AdamW branch. A pattern is mapped when it is a
/// literal, optionally anchored with `^` or `$`.
fn excluded(patterns: Option<&Value>, optimizer: &Value) -> Result<Vec<Route>, String> {
    let Some(patterns) = patterns else {
        return Ok(Vec::new());
    };
    let patterns = patterns
        .as_array()
        .ok_or_else(|| format!("`exclude_layers` = {patterns} is not a list"))?;
    if patterns.is_empty() {
        return Ok(Vec::new());
    }
    let paths = optimizer["variable_paths"]
        .as_object()
        .ok_or("`exclude_layers` without `variable_paths` to match them against")?;
    let mut routes = Vec::new();
    for (param, path) in paths {
        let path = path.as_str().ok_or("a variable path is not a string")?;
        for pattern in patterns {
            let pattern = pattern
                .as_str()
                .ok_or("an `exclude_layers` entry is not a string")?;
            if searches(pattern, path)? {
                routes.push((param.clone(), "adamw"));
                break;
            }
        }
    }
    Ok(routes)
}

/// `re.search(pattern, text)` for a literal pattern, optionally anchored by `^` and `$`.
fn searches(pattern: &str, text: &str) -> Result<bool, String> {
    let (start, rest) = match pattern.strip_prefix('^') {
        Some(rest) => (true, rest),
        None => (false, pattern),
    };
    let (end, literal) = match rest.strip_suffix('$') {
        Some(literal) => (true, literal),
        None => (false, rest),
    };
    if literal.contains(|c: char| ".^$*+?()[]{}|\\".contains(c)) {
        return Err(format!(
            "the `exclude_layers` pattern `{pattern}` is not a literal"
        ));
    }
    Ok(match (start, end) {
        (true, true) => text == literal,
        (true, false) => text.starts_with(literal),
        (false, true) => text.ends_with(literal),
        (false, false) => text.contains(literal),
    })
}

/// A `keras.optimizers.schedules` learning rate: `{"cls": ..., "args": {...}}`.
fn schedule(s: &Value) -> Result<Schedule, String> {
    let cls = s["cls"].as_str().unwrap_or_default();
    let args = Args::new(s.get("args"), None)?;
    let own: &[&str] = match cls {
        "ExponentialDecay" | "InverseTimeDecay" => &["decay_rate", "staircase"],
        "CosineDecay" => &["alpha", "warmup_target", "warmup_steps"],
        _ => return Err(format!("unsupported learning-rate schedule `{cls}`")),
    };
    args.check_supported(&[&["name", "initial_learning_rate", "decay_steps"], own].concat())
        .map_err(|e| format!("{cls}: {e}"))?;
    let initial = args
        .float("initial_learning_rate")?
        .ok_or_else(|| format!("{cls} without `initial_learning_rate`"))?;
    let steps = args
        .count("decay_steps")?
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("{cls} without a positive `decay_steps`"))?;
    let rate = || {
        args.float("decay_rate")?
            .ok_or_else(|| format!("{cls} without `decay_rate`"))
    };
    Ok(match cls {
        "ExponentialDecay" => Schedule::new(
            initial,
            Decay::Exponential {
                steps,
                rate: rate()?,
                staircase: args.flag("staircase")?,
            },
        ),
        "InverseTimeDecay" => {
            Schedule::inverse_time(initial, steps, rate()?, args.flag("staircase")?)
        }
        // Keras ignores the warm-up unless `warmup_target` is set; then it rises linearly from
        // `initial_learning_rate` to `warmup_target` and decays from there.
        _ => {
            let alpha = args.float("alpha")?.unwrap_or(0.0);
            match args.float("warmup_target")? {
                None => Schedule::cosine(initial, steps, alpha),
                Some(target) => Schedule::cosine(target, steps, alpha)
                    .with_warmup(args.count("warmup_steps")?.unwrap_or(0), initial),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::tests::Unreachable;
    use serde_json::json;

    #[test]
    fn schedules_map_their_arguments() {
        let s = schedule(&json!({"cls": "ExponentialDecay", "args": {
            "initial_learning_rate": 0.05, "decay_steps": 4, "decay_rate": 0.5, "staircase": true}}))
        .unwrap();
        assert_eq!(s.at(3), 0.05);
        assert_eq!(s.at(4), 0.025);
        let s = schedule(&json!({"cls": "InverseTimeDecay", "args": {
            "initial_learning_rate": 0.1, "decay_steps": 1, "decay_rate": 0.5}}))
        .unwrap();
        assert_eq!(s.at(2), 0.05);
        let s = schedule(&json!({"cls": "CosineDecay", "args": {
            "initial_learning_rate": 0.0, "decay_steps": 10, "warmup_target": 1.0,
            "warmup_steps": 4}}))
        .unwrap();
        assert_eq!(s.at(2), 0.5);
        assert_eq!(s.at(4), 1.0);
    }

    #[test]
    fn exclude_layers_route_the_paths_a_literal_pattern_finds() {
        let optimizer = json!({"variable_paths": {"p0": "dense/kernel", "p1": "embed/embeddings", "p2": "out/kernel"}});
        let patterns = json!(["embed", "^out/"]);
        let routes = excluded(Some(&patterns), &optimizer).unwrap();
        let names: Vec<&str> = routes.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["p1", "p2"]);
        assert!(routes.iter().all(|(_, b)| *b == "adamw"));
        assert!(searches("kernel$", "dense/kernel").unwrap());
        assert!(!searches("^kernel", "dense/kernel").unwrap());
        assert!(searches("dense.*", "dense/kernel").is_err());
    }

    #[test]
    fn unknown_schedule_and_arguments_are_named() {
        let e = schedule(&json!({"cls": "PolynomialDecay", "args": {}})).unwrap_err();
        assert!(e.contains("PolynomialDecay"), "{e}");
        let opt = json!({"class": "keras.optimizers.Adam",
                         "args": {"learning_rate": 0.1, "loss_scale_factor": 128.0},
                         "defaults": {"loss_scale_factor": null}});
        let e = map(&opt, Unreachable).unwrap_err();
        assert!(e.contains("`loss_scale_factor`"), "{e}");
    }
}
