// A learning-rate callback sets the rule's `lr`: a rule whose rate has another name does not
// compile with it, rather than keeping its rate without a word.
use fusegraph::fit::{Callback, Monitor, ReduceLrOnPlateau};
use fusegraph::prelude::*;

fusegraph::optimizer! {
    pub struct EtaSgd {
        hyper { eta: f32 = 0.1 }
        update { p -= eta * g; }
    }
}

#[fusegraph::model(loss = Mse)]
pub struct Net {
    fc: Dense<2, 1>,
}

fn main() {
    let mut reduce = ReduceLrOnPlateau::new(Monitor::Loss);
    let _: &mut dyn Callback<Net, EtaSgd, 4> = &mut reduce;
}
