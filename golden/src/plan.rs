//! What every framework mapping ends in: a built-in rule whose hyper-parameters are filled from
//! the case's arguments, a [`Config`], and how weight decay applies.

use crate::args::Args;
use crate::inputs::Inputs;
use crate::run::{run, Framework};
use fusegraph::optim::{Config, Rule, WeightDecay};
use serde_json::Value;

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
}

impl Plan<'_> {
    /// Fills every hyper-parameter of `rule` from the arguments and runs the case with it.
    pub fn run<R: Rule>(&self, rule: R, inputs: &Inputs) -> Result<Value, String> {
        self.run_renamed(rule, &[], inputs)
    }

    /// [`run`](Self::run) for a rule whose slots are named otherwise than the framework's
    /// state: `renames` holds `(slot, framework name)` pairs.
    pub fn run_renamed<R: Rule>(
        &self,
        mut rule: R,
        renames: &[(&str, &str)],
        inputs: &Inputs,
    ) -> Result<Value, String> {
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
        run(rule, config, self.framework, renames, inputs)
    }

    /// The argument behind hyper-parameter `hyper`: Keras `learning_rate` is `lr`; PyTorch
    /// `betas` are `beta1` and `beta2`; every other name is the argument's own.
    fn hyper(&self, hyper: &str) -> Result<Option<f32>, String> {
        match (self.framework, hyper) {
            (Framework::Keras, "lr") => self.args.float("learning_rate"),
            (Framework::Torch { .. }, "beta1") => self.args.element("betas", 0),
            (Framework::Torch { .. }, "beta2") => self.args.element("betas", 1),
            _ => self.args.float(hyper),
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
