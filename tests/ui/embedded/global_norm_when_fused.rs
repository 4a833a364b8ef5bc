use fusegraph::train::{Fused, StepConfig};

fn main() {
    let _ = StepConfig::<Fused>::new().clip_global_norm(1.0);
}
