//! Data sets, loaders (CSV, IDX), scaling and seeded splits.

mod csv;
mod dataset;
mod error;
pub mod idx;
mod scale;
mod sequence;

pub use csv::Csv;
pub use dataset::Dataset;
pub use error::{Column, DataError, Place, SequenceProblem};
pub use idx::Idx;
pub use scale::{MinMax, Standardize};
