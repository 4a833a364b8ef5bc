//! Data sets, loaders (CSV, IDX), scaling and seeded splits.

mod dataset;
mod error;

pub use dataset::Dataset;
pub use error::DataError;
