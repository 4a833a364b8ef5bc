//! The guide: fusegraph chapter by chapter, from a model to a cluster. The README is the
//! ten-minute tour; these chapters say what each part does, what it guarantees and how it is
//! built. Their code examples are compiled and run as doc tests.

#[doc = include_str!("guide/models.md")]
pub mod models {}

#[doc = include_str!("guide/optimizers.md")]
pub mod optimizers {}

#[doc = include_str!("guide/sequence_models.md")]
pub mod sequence_models {}

#[doc = include_str!("guide/training.md")]
pub mod training {}

#[doc = include_str!("guide/embedded.md")]
pub mod embedded {}

#[doc = include_str!("guide/data_parallel.md")]
pub mod data_parallel {}

#[doc = include_str!("guide/custom_layers.md")]
pub mod custom_layers {}

#[doc = include_str!("guide/cpus_and_bits.md")]
pub mod cpus_and_bits {}

#[doc = include_str!("guide/golden.md")]
pub mod golden {}

#[doc = include_str!("guide/architecture.md")]
pub mod architecture {}
