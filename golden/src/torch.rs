//! PyTorch optimizer cases: `torch.optim.<Class>(params, **args)`, an optional
//! `torch.optim.lr_scheduler` stepped after every step, and optional gradient clipping by the
//! caller, mapped onto `fusegraph::optim::torch`.

use crate::args::Args;
use crate::plan::{Plan, WithRule};
use crate::state::Framework;
use fusegraph::optim::torch;
use fusegraph::optim::{Config, NormClip, Schedule, WeightDecay};
use serde_json::Value;

/// Arguments of every class the harness maps. `foreach`, `fused` and `differentiable` choose an
/// implementation of the same arithmetic; `capturable` (bias corrections as float32 tensors)
/// skips the case unless `false`.
const COMMON: &[&str] = &[
    "lr",
    "weight_decay",
    "maximize",
    "foreach",
    "fused",
    "differentiable",
];

/// Maps a PyTorch case's `optimizer` object onto a rule and a [`Config`], and runs `with` on
/// them.
pub(crate) fn map<W: WithRule>(optimizer: &Value, with: W) -> Result<W::Output, String> {
    let class = optimizer["class"].as_str().unwrap_or_default();
    let name = class.strip_prefix("torch.optim.").unwrap_or(class);
    let own: &[&str] = match name {
        "SGD" => &["momentum", "dampening", "nesterov"],
        "Adam" => &["betas", "eps", "amsgrad", "decoupled_weight_decay"],
        "NAdam" => &["betas", "eps", "momentum_decay", "decoupled_weight_decay"],
        "RAdam" => &["betas", "eps", "decoupled_weight_decay"],
        "AdamW" => &["betas", "eps", "amsgrad"],
        "Adagrad" => &["lr_decay", "initial_accumulator_value", "eps"],
        "RMSprop" => &["alpha", "eps", "momentum", "centered"],
        "Adamax" => &["betas", "eps"],
        "Adadelta" => &["rho", "eps"],
        "Adafactor" => &["beta2_decay", "eps", "d"],
        "Muon" => &[
            "momentum",
            "nesterov",
            "ns_coefficients",
            "eps",
            "ns_steps",
            "adjust_lr_fn",
        ],
        _ => return Err(format!("unsupported optimizer class `{class}`")),
    };
    let args = Args::new(optimizer.get("args"), optimizer.get("defaults"))?;
    args.check_supported(&[COMMON, own].concat())?;

    let mut config = Config::default().maximize(args.flag("maximize")?);
    match optimizer.get("clip") {
        None | Some(Value::Null) => {}
        Some(clip) => config = clip_config(config, clip)?,
    }
    let lr = args.float("lr")?.ok_or("no `lr` argument or default")?;
    match optimizer.get("scheduler") {
        None | Some(Value::Null) => {}
        Some(s) => config = config.schedule(scheduler(s, lr)?),
    }
    let weight_decay = match args.float("weight_decay")? {
        Some(wd) if wd != 0.0 => {
            if matches!(name, "AdamW" | "Adafactor" | "Muon")
                || args.flag("decoupled_weight_decay")?
            {
                WeightDecay::Decoupled(wd)
            } else {
                WeightDecay::L2(wd)
            }
        }
        _ => WeightDecay::None,
    };
    let v = args.variant()?;
    let plan = Plan {
        framework: Framework::Torch {
            step_counter: name != "SGD",
            state_at_build: name == "Adagrad",
        },
        args,
        config,
        weight_decay,
        routes: Vec::new(),
    };
    match name {
        "SGD" if !v.momentum => plan.run(torch::Sgd::default(), with),
        "SGD" if v.nesterov => plan.run(torch::SgdNesterov::default(), with),
        "SGD" => plan.run(torch::SgdMomentum::default(), with),
        // AdamW with amsgrad: the AMSGrad rule, its decoupled decay in the Config.
        "Adam" | "AdamW" if v.amsgrad => plan.run(torch::AdamAmsgrad::default(), with),
        "Adam" => plan.run(torch::Adam::default(), with),
        "AdamW" => plan.run(torch::AdamW::default(), with),
        "NAdam" => plan.run(torch::NAdam::default(), with),
        "RAdam" => plan.run(torch::RAdam::default(), with),
        "Adagrad" => plan.run(torch::Adagrad::default(), with),
        "RMSprop" => match (v.centered, v.momentum) {
            (false, false) => plan.run(torch::RmsProp::default(), with),
            (false, true) => plan.run(torch::RmsPropMomentum::default(), with),
            (true, false) => plan.run(torch::RmsPropCentered::default(), with),
            (true, true) => plan.run(torch::RmsPropCenteredMomentum::default(), with),
        },
        "Adamax" => plan.run(torch::Adamax::default(), with),
        "Adafactor" => plan.run(torch::Adafactor::default(), with),
        "Muon" => {
            let rms = match plan.args.get("adjust_lr_fn").and_then(Value::as_str) {
                None | Some("original") => 0.0,
                Some("match_rms_adamw") => 1.0,
                Some(other) => {
                    return Err(format!("Muon's `adjust_lr_fn` \"{other}\" is not mapped"))
                }
            };
            plan.run(torch::Muon::default().with_match_rms_adamw(rms), with)
        }
        _ => plan.run(torch::Adadelta::default(), with),
    }
}

/// The caller's clipping before each step: `{"clip_grad_norm": max_norm}` (over all
/// parameters, with PyTorch's `+ 1e-6`) or `{"clip_grad_value": v}`.
fn clip_config(mut config: Config, clip: &Value) -> Result<Config, String> {
    let clip = clip
        .as_object()
        .ok_or_else(|| format!("`clip` is not an object: {clip}"))?;
    for (kind, v) in clip {
        let v = v
            .as_f64()
            .ok_or_else(|| format!("clip `{kind}` = {v} is not a number"))? as f32;
        config = match kind.as_str() {
            "clip_grad_norm" => config.clip_norm(NormClip::GlobalTorch(v)),
            "clip_grad_value" => config.clip_value(v),
            _ => return Err(format!("unsupported clipping `{kind}`")),
        };
    }
    Ok(config)
}

/// A `torch.optim.lr_scheduler` (`{"cls": ..., "args": {...}}`) over base rate `lr` (step `t`
/// uses the rate after `t - 1` scheduler steps).
fn scheduler(s: &Value, lr: f32) -> Result<Schedule, String> {
    let cls = s["cls"].as_str().unwrap_or_default();
    let args = Args::new(s.get("args"), None)?;
    let own: &[&str] = match cls {
        "StepLR" => &["step_size", "gamma"],
        "ExponentialLR" => &["gamma"],
        "CosineAnnealingLR" => &["T_max", "eta_min"],
        _ => return Err(format!("unsupported lr_scheduler `{cls}`")),
    };
    args.check_supported(&[&["last_epoch", "verbose"], own].concat())
        .map_err(|e| format!("{cls}: {e}"))?;
    if args.number("last_epoch")?.is_some_and(|e| e != -1.0) {
        return Err(format!(
            "{cls}: unsupported argument `last_epoch` (resuming)"
        ));
    }
    let gamma = || Ok::<f32, String>(args.float("gamma")?.unwrap_or(0.1));
    let positive = |name: &str| {
        args.count(name)?
            .filter(|&n| n > 0)
            .ok_or_else(|| format!("{cls} without a positive `{name}`"))
    };
    Ok(match cls {
        "StepLR" => Schedule::step(lr, positive("step_size")?, gamma()?),
        "ExponentialLR" => Schedule::exponential(lr, 1, gamma()?),
        _ => {
            let t_max = positive("T_max")?;
            let eta_min = args.float("eta_min")?.unwrap_or(0.0);
            Schedule::cosine_annealing(lr, t_max, eta_min)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::tests::Unreachable;
    use serde_json::json;

    #[test]
    fn schedulers_map_their_arguments() {
        let s = scheduler(
            &json!({"cls": "StepLR", "args": {"step_size": 3, "gamma": 0.5}}),
            0.1,
        )
        .unwrap();
        assert_eq!([s.at(2), s.at(3), s.at(6)], [0.1, 0.05, 0.025]);
        let s = scheduler(
            &json!({"cls": "ExponentialLR", "args": {"gamma": 0.5}}),
            1.0,
        )
        .unwrap();
        assert_eq!(s.at(2), 0.25);
        let s = scheduler(
            &json!({"cls": "CosineAnnealingLR", "args": {"T_max": 4, "eta_min": 0.01}}),
            0.1,
        )
        .unwrap();
        assert!((s.at(4) - 0.01).abs() < 1e-8);
        // Past T_max the rate rises again, as PyTorch's does.
        let s = scheduler(
            &json!({"cls": "CosineAnnealingLR", "args": {"T_max": 4}}),
            0.1,
        )
        .unwrap();
        assert_eq!([s.at(4), s.at(8)], [0.0, 0.1]);
        assert!((s.at(6) - 0.05).abs() < 1e-8);
    }

    #[test]
    fn clipping_and_unsupported_arguments() {
        let c = clip_config(Config::default(), &json!({"clip_grad_norm": 1.5})).unwrap();
        assert_eq!(c.clip_norm, Some(NormClip::GlobalTorch(1.5)));
        let c = clip_config(Config::default(), &json!({"clip_grad_value": 0.5})).unwrap();
        assert_eq!(c.clip_value, Some(0.5));
        let opt = json!({"class": "torch.optim.Adam",
                         "args": {"lr": 0.1, "capturable": true},
                         "defaults": {"capturable": false}});
        let e = map(&opt, Unreachable).unwrap_err();
        assert!(e.contains("`capturable`"), "{e}");
    }
}
