//! What every framework mapping ends in: a built-in rule whose hyper-parameters are filled from
//! the case's arguments, a [`Config`], and how weight decay applies; and [`WithRule`], what
//! then runs with them (an optimizer trajectory, a model's training).

use crate::args::Args;
use crate::state::{Conventions, Framework};
use crate::{keras, optax, torch};
use fusegraph::optim::{Config, Rule, WeightDecay};
use serde_json::Value;

/// Maps the `optimizer` of `case` (of its `framework`) and runs `with` on the rule.
pub(crate) fn map_optimizer<W: WithRule>(case: &Value, with: W) -> Result<W::Output, String> {
    let optimizer = &case["optimizer"];
    match case["framework"].as_str().unwrap_or_default() {
        "keras" => keras::map(optimizer, with),
        "torch" => torch::map(optimizer, with),
        "optax" => optax::map(optimizer, with),
        other => Err(format!("unknown framework `{other}`")),
    }
}

/// What runs once a case's optimizer is mapped. The rule's type is only known inside the
/// mapping, so the mapping calls [`run`](Self::run) with it.
pub(crate) trait WithRule {
    /// What the run gives.
    type Output;

    /// Runs with `rule` (every hyper-parameter set), `config`, the parameters `routes` sends
    /// to a branch of the rule by name, and the framework's `conventions` for writing the
    /// optimizer's state.
    fn run<R: Rule + 'static>(
        self,
        rule: R,
        config: Config,
        routes: &[Route],
        conventions: Conventions,
    ) -> Result<Self::Output, String>;
}

/// A parameter routed by name to a branch of the rule (an optax mask entry that is `false`):
/// `(parameter name, branch)`. The other parameters take the branch their shape picks.
pub(crate) type Route = (String, &'static str);

/// A case mapped onto fusegraph, short of the rule type (which the framework module picks).
pub(crate) struct Plan<'a> {
    /// The optimizer's constructor arguments (over its defaults).
    pub args: Args<'a>,
    /// Clipping, EMA, schedule, `maximize`: everything but weight decay.
    pub config: Config,
    /// The framework's weight decay for this case, `WeightDecay::None` without one.
    /// `Decoupled` goes into the rule when the rule has a `weight_decay` hyper-parameter
    /// (Keras and PyTorch AdamW), else into the [`Config`].
    pub weight_decay: WeightDecay,
    /// Naming of hyper-parameters and output conventions.
    pub framework: Framework,
    /// Parameters routed by name to a branch of the rule.
    pub routes: Vec<Route>,
}

impl Plan<'_> {
    /// Fills every hyper-parameter of `rule` from the arguments and runs `with` on it.
    pub fn run<R: Rule + 'static, W: WithRule>(
        &self,
        rule: R,
        with: W,
    ) -> Result<W::Output, String> {
        self.run_renamed(rule, &[], with)
    }

    /// [`run`](Self::run) for a rule whose slots are named otherwise than the framework's
    /// state: `renames` holds `(slot, framework name)` pairs.
    pub fn run_renamed<R: Rule + 'static, W: WithRule>(
        &self,
        mut rule: R,
        renames: &'static [(&'static str, &'static str)],
        with: W,
    ) -> Result<W::Output, String> {
        for &hyper in R::HYPER {
            if hyper == "weight_decay" {
                continue;
            }
            if let Some(v) = self.hyper(hyper)? {
                set(&mut rule, hyper, v)?;
            }
        }
        let has_decay = R::HYPER.contains(&"weight_decay");
        let mut config = self.config;
        match self.weight_decay {
            WeightDecay::Decoupled(wd) if has_decay => set(&mut rule, "weight_decay", wd)?,
            wd => {
                if has_decay {
                    set(&mut rule, "weight_decay", 0.0)?;
                }
                config = config.weight_decay(wd);
            }
        }
        let conventions = Conventions {
            framework: self.framework,
            renames,
        };
        with.run(rule, config, &self.routes, conventions)
    }

    /// The argument behind hyper-parameter `hyper`: Keras' and optax's `learning_rate` is
    /// `lr`; PyTorch `betas` are `beta1` and `beta2`; optax `ns_coeffs` are `ns_a`, `ns_b`
    /// and `ns_c`; every other name is the argument's own.
    fn hyper(&self, hyper: &str) -> Result<Option<f32>, String> {
        match (self.framework, hyper) {
            (Framework::Keras, "lr") => self.args.float("learning_rate"),
            // Keras Muon's `rms_rate=None` scales the step by `lr` alone.
            (Framework::Keras, "rms_rate") => Ok(Some(self.args.float(hyper)?.unwrap_or(0.0))),
            (Framework::Torch { .. }, "beta1") => self.args.element("betas", 0),
            (Framework::Torch { .. }, "beta2") => self.args.element("betas", 1),
            // Adafactor's `eps = (eps1, eps2)`, `eps1` None being the rule's 0.
            (Framework::Torch { .. }, "eps1") => self.optional_element("eps", 0),
            (Framework::Torch { .. }, "eps2") => self.optional_element("eps", 1),
            (Framework::Torch { .. }, "ns_a") => self.args.element("ns_coefficients", 0),
            (Framework::Torch { .. }, "ns_b") => self.args.element("ns_coefficients", 1),
            (Framework::Torch { .. }, "ns_c") => self.args.element("ns_coefficients", 2),
            (Framework::Optax { .. }, "lr") => self.args.float("learning_rate"),
            (Framework::Optax { .. }, "adam_lr") => self.args.float("adam_learning_rate"),
            (Framework::Optax { .. }, "ns_a") => self.args.element("ns_coeffs", 0),
            (Framework::Optax { .. }, "ns_b") => self.args.element("ns_coeffs", 1),
            (Framework::Optax { .. }, "ns_c") => self.args.element("ns_coeffs", 2),
            _ => self.args.float(hyper),
        }
    }

    /// Element `index` of a list argument, 0 where it is `None`.
    fn optional_element(&self, name: &str, index: usize) -> Result<Option<f32>, String> {
        match self.args.get(name).and_then(|v| v.get(index)) {
            Some(Value::Null) => Ok(Some(0.0)),
            _ => self.args.element(name, index),
        }
    }
}

/// Sets a hyper-parameter the rule declares.
fn set<R: Rule>(rule: &mut R, hyper: &str, v: f32) -> Result<(), String> {
    if rule.set_hyper(hyper, v) {
        Ok(())
    } else {
        Err(format!("{} refused hyper-parameter `{hyper}`", R::NAME))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// For mappings that must fail before running anything.
    pub(crate) struct Unreachable;

    impl WithRule for Unreachable {
        type Output = ();
        fn run<R: Rule + 'static>(
            self,
            _: R,
            _: Config,
            _: &[Route],
            _: Conventions,
        ) -> Result<(), String> {
            panic!("the mapping was expected to fail, but it ran {}", R::NAME)
        }
    }
}
