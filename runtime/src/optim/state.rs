//! The one description of an optimizer's state: its parts, in order, and the values of each.
//! What saves, restores or sends the state (the checkpoint format, the data-parallel
//! broadcast) walks [`Optimizer::state_parts`], so that a buffer added to the state is added
//! here alone.

use super::optimizer::Optimizer;
use super::rule::Rule;
use super::storage::Storage;
use super::UpdateMode;
use core::slice;

/// One part of an optimizer's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptimizerPart {
    /// Slot `i` of [`Rule::SLOTS`]: one value per parameter, laid out as the parameters.
    Slot(usize),
    /// The EMA of the parameters (kept with [`Config::ema`](super::Config::ema)), laid out as
    /// them.
    Ema,
    /// Carried scalar `i` of [`Rule::CARRIED`]: one value.
    Carried(usize),
    /// The number of completed steps: one word.
    Iterations,
}

/// The values of one part of a state, to read.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Part<'a> {
    /// `f32` values.
    Floats(&'a [f32]),
    /// One 64-bit word.
    Word(u64),
}

/// The values of one part of a state, to write.
#[derive(Debug, PartialEq)]
pub enum PartMut<'a> {
    /// `f32` values.
    Floats(&'a mut [f32]),
    /// One 64-bit word.
    Word(&'a mut u64),
}

impl<R: Rule, U: UpdateMode, S: Storage> Optimizer<R, U, S> {
    /// Every part of the state, in order: each slot, the EMA when it is kept, each carried
    /// scalar, the step counter.
    pub fn state_parts(&self) -> impl Iterator<Item = OptimizerPart> + 'static {
        let ema = self.config.ema.is_some();
        (0..R::SLOTS.len())
            .map(OptimizerPart::Slot)
            .chain(ema.then_some(OptimizerPart::Ema))
            .chain((0..R::CARRIED.len()).map(OptimizerPart::Carried))
            .chain([OptimizerPart::Iterations])
    }

    /// The values of part `part` (the EMA is empty when it is not kept).
    ///
    /// # Panics
    /// On a slot or carried scalar the rule does not have.
    pub fn part(&self, part: OptimizerPart) -> Part<'_> {
        match part {
            OptimizerPart::Slot(j) => Part::Floats(&self.slots[self.slot_span(j)]),
            OptimizerPart::Ema => Part::Floats(&self.ema),
            OptimizerPart::Carried(i) => {
                Part::Floats(slice::from_ref(&self.carried[..R::CARRIED.len()][i]))
            }
            OptimizerPart::Iterations => Part::Word(self.t),
        }
    }

    /// The values of part `part`, writable (to restore or receive a state).
    ///
    /// # Panics
    /// As [`part`](Self::part).
    pub fn part_mut(&mut self, part: OptimizerPart) -> PartMut<'_> {
        match part {
            OptimizerPart::Slot(j) => {
                let span = self.slot_span(j);
                PartMut::Floats(&mut self.slots[span])
            }
            OptimizerPart::Ema => PartMut::Floats(&mut self.ema),
            OptimizerPart::Carried(i) => {
                PartMut::Floats(slice::from_mut(&mut self.carried[..R::CARRIED.len()][i]))
            }
            OptimizerPart::Iterations => PartMut::Word(&mut self.t),
        }
    }
}
