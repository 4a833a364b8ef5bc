//! fusegraph compiles training code: declarative optimizer rules (and, later, models) become
//! statically typed Rust whose state is allocated once and whose update is one fused
//! SIMD/rayon pass.
//!
//! # Optimizers
//!
//! [`optimizer!`] turns an element-wise rule into a hyper-parameter struct that implements
//! [`optim::Rule`]; [`optim::Optimizer`] owns the state (one buffer per slot, allocated once)
//! and runs the fused pass. The built-ins in [`optim::keras`] and [`optim::torch`] are written
//! with the same macro.
//!
//! ```
//! fusegraph::optimizer! {
//!     /// Plain SGD with heavy-ball momentum.
//!     pub struct Momentum {
//!         hyper  { lr: f32 = 0.1, beta: f32 = 0.9 }
//!         slots  { v = 0.0 }
//!         update {
//!             v = beta * v + g;
//!             p -= lr * v;
//!         }
//!     }
//! }
//!
//! let mut params = vec![1.0_f32; 10];
//! let mut opt = fusegraph::optim::Optimizer::new(Momentum::default().with_lr(0.5), &[10]);
//! for _ in 0..3 {
//!     let grads: Vec<f32> = params.iter().map(|p| 2.0 * p).collect(); // d/dp of p^2
//!     opt.step(&mut params, &grads);
//! }
//! assert!(params[0].abs() < 1.0);
//! assert_eq!(opt.slot("v").unwrap().len(), 10);
//! ```
#![no_std]

extern crate self as fusegraph;

#[cfg(feature = "std")]
extern crate std;

pub mod optim;

pub use fusegraph_macros::optimizer;

/// What generated code names; not a stable API.
#[doc(hidden)]
pub mod __private {
    pub use fusegraph_runtime::f32x8;
    pub use fusegraph_runtime::lane;
    pub use fusegraph_runtime::math;
    pub use fusegraph_runtime::optim::Rule;
}
