use fusegraph::optim::{Config, Fused};

fn main() {
    let _ = Config::<Fused>::new().clip_global_norm(1.0);
}
