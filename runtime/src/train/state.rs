//! The one description of a train step's state: the model's parameters and non-trainable
//! state, the optimizer's state ([`OptimizerPart`]) and the dropout seed, as a list of parts
//! with the values of each. The checkpoint format writes and reads the parts of
//! [`Step::state_parts`], and the data-parallel step broadcasts them, so that a buffer added
//! to the state is added here (or to the optimizer's description) alone.

use super::model::Model;
use super::step::Step;
use crate::optim::{OptimizerPart, Part, PartMut, Rule, Storage, UpdateMode};

/// One part of a train step's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatePart {
    /// The model's trainable parameters, laid out as [`Model::TENSORS`].
    Params,
    /// The model's non-trainable state (BatchNorm's running statistics), laid out as
    /// [`Model::STATE_TENSORS`].
    ModelState,
    /// A part of the optimizer's state.
    Optimizer(OptimizerPart),
    /// The seed of the dropout streams: one word.
    Seed,
}

impl StatePart {
    /// The model's parts, all that a model alone holds.
    pub const MODEL: [StatePart; 2] = [StatePart::Params, StatePart::ModelState];

    /// The values of this part of `model`; `None` for a part of the train step.
    pub fn of_model<M: Model>(self, model: &M) -> Option<Part<'_>> {
        match self {
            StatePart::Params => Some(Part::Floats(model.params())),
            StatePart::ModelState => Some(Part::Floats(model.state())),
            StatePart::Optimizer(_) | StatePart::Seed => None,
        }
    }

    /// The values of this part of `model`, writable; `None` for a part of the train step.
    pub fn of_model_mut<M: Model>(self, model: &mut M) -> Option<PartMut<'_>> {
        match self {
            StatePart::Params => Some(PartMut::Floats(model.params_mut())),
            StatePart::ModelState => Some(PartMut::Floats(model.split_mut().1)),
            StatePart::Optimizer(_) | StatePart::Seed => None,
        }
    }
}

impl<M: Model, R: Rule, const B: usize, U: UpdateMode, S: Storage> Step<M, R, B, U, S> {
    /// Every part of the state of `model` trained by this step, in order: the model's
    /// parameters and state, the optimizer's parts ([`Optimizer::state_parts`]), the seed.
    /// Restoring every part into a step of the same rule (hyper-parameters) and config restores
    /// the training: the next step gives the same bits.
    ///
    /// [`Optimizer::state_parts`]: crate::optim::Optimizer::state_parts
    pub fn state_parts(&self) -> impl Iterator<Item = StatePart> + 'static {
        StatePart::MODEL
            .into_iter()
            .chain(self.optimizer.state_parts().map(StatePart::Optimizer))
            .chain([StatePart::Seed])
    }

    /// The values of part `part` of `model` and this step.
    ///
    /// # Panics
    /// On an optimizer part the rule does not have.
    pub fn part<'a>(&'a self, model: &'a M, part: StatePart) -> Part<'a> {
        match part {
            StatePart::Params | StatePart::ModelState => {
                part.of_model(model).expect("a part of the model")
            }
            StatePart::Optimizer(p) => self.optimizer.part(p),
            StatePart::Seed => Part::Word(self.seed.0),
        }
    }

    /// The values of part `part` of `model` and this step, writable (to restore or receive a
    /// state).
    ///
    /// # Panics
    /// As [`part`](Self::part).
    pub fn part_mut<'a>(&'a mut self, model: &'a mut M, part: StatePart) -> PartMut<'a> {
        match part {
            StatePart::Params | StatePart::ModelState => {
                part.of_model_mut(model).expect("a part of the model")
            }
            StatePart::Optimizer(p) => self.optimizer.part_mut(p),
            StatePart::Seed => PartMut::Word(&mut self.seed.0),
        }
    }
}
