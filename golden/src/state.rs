//! How each framework names and keeps optimizer state, to write fusegraph's [`Optimizer`] in
//! the shape of a case's `expected` state and scalars.

use crate::tensor::{scalar_json, to_json, Layout};
use fusegraph::optim::{Optimizer, Rule, SlotShape};
use serde_json::{Map, Value};

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
    /// optax: state is a pytree, slots keyed by parameter under their path (`mu`,
    /// `muon.mu`); its shape-() leaves (counts, carried scalars) are `scalars` by path.
    Optax {
        /// The paths of the transformations' step counts (`[0].count`), each the number of
        /// steps taken.
        counts: &'static [&'static str],
        /// Whether `steps[i].lr` is the rule's learning rate (schedule-free records the rate
        /// of its base step instead, and the output leaves it out).
        records_lr: bool,
    },
}

/// The framework of a case, and the names it gives the rule's slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Conventions {
    /// The framework.
    pub framework: Framework,
    /// `(slot, framework name)` for the slots the framework names otherwise (Keras calls the
    /// SGD velocity `momentum`); the other slots keep their names.
    pub renames: &'static [(&'static str, &'static str)],
}

impl Conventions {
    /// `{slot: {param: tensor}}`: every slot of the rule, plus the EMA (Keras `average`) or
    /// the per-parameter scalars (PyTorch `step` and carried scalars), over the parameters of
    /// `layout`.
    pub fn state<R: Rule>(&self, opt: &Optimizer<R>, layout: &Layout) -> Result<Value, String> {
        let mut out = Map::new();
        for (j, &slot) in R::SLOTS.iter().enumerate() {
            let per_param = layout.per_param_some(|k| {
                let data = opt
                    .slot_tensor(slot, k)
                    .ok_or_else(|| format!("{}: no slot `{slot}` for tensor {k}", R::NAME))?;
                let shape = slot_dims(SlotShape::of::<R>(j), &layout.shapes[k]);
                Ok((!data.is_empty()).then(|| to_json(&shape, data)))
            })?;
            if per_param.as_object().is_some_and(|m| m.is_empty()) && !layout.names.is_empty() {
                continue;
            }
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
                    let average = layout.per_param(|k| {
                        let data = ema
                            .get(layout.ranges[k].clone())
                            .ok_or_else(|| format!("EMA buffer too short for tensor {k}"))?;
                        Ok(to_json(&layout.shapes[k], data))
                    })?;
                    out.insert("average".into(), average);
                }
            }
            Framework::Optax { .. } => {}
            Framework::Torch { step_counter, .. } => {
                if step_counter {
                    let t = opt.iterations() as f32;
                    out.insert("step".into(), layout.per_param(|_| Ok(scalar_json(t)))?);
                }
                for &name in R::CARRIED {
                    let v = opt
                        .carried(name)
                        .ok_or_else(|| format!("{}: no carried scalar `{name}`", R::NAME))?;
                    out.insert(name.into(), layout.per_param(|_| Ok(scalar_json(v)))?);
                }
            }
        }
        Ok(Value::Object(out))
    }

    /// Whether the learning rate of each step is written (`steps[i].lr`).
    pub fn records_lr(&self) -> bool {
        !matches!(
            self.framework,
            Framework::Optax {
                records_lr: false,
                ..
            }
        )
    }

    /// Keras: `{"iterations": t}` and every carried scalar; optax: its step counts and every
    /// carried scalar; PyTorch: `{}`.
    pub fn scalars<R: Rule>(&self, opt: &Optimizer<R>) -> Value {
        let mut out = Map::new();
        let counts: &[&str] = match self.framework {
            Framework::Keras => &["iterations"],
            Framework::Optax { counts, .. } => counts,
            Framework::Torch { .. } => return Value::Object(out),
        };
        for &count in counts {
            out.insert(count.into(), opt.iterations().into());
        }
        for &name in R::CARRIED {
            if let Some(v) = opt.carried(name) {
                out.insert(name.into(), f64::from(v).into());
            }
        }
        Value::Object(out)
    }
}

/// The dimensions a framework gives a slot shaped `shape` of a tensor of dimensions `dims`.
fn slot_dims(shape: SlotShape, dims: &[usize]) -> Vec<usize> {
    let (lead, last) = match dims.split_last() {
        Some((&last, lead)) => (lead.to_vec(), last),
        None => (Vec::new(), 1),
    };
    match shape {
        SlotShape::Element => dims.to_vec(),
        SlotShape::Rows => lead,
        SlotShape::RowsByOne => [lead, vec![1]].concat(),
        SlotShape::Cols => vec![last],
        SlotShape::OneByCols => vec![1, last],
    }
}
