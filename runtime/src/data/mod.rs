//! Data sets, loaders (CSV, IDX), scaling, seeded splits, sliding windows over a series
//! ([`Windows`]) and next-token windows over text with its [`Vocabulary`].
//!
//! # Sequences: `[steps, features]` samples
//!
//! A sample of a sequence model is `steps` time steps of `features` values (channels), stored
//! time-major: every feature of step 0, then of step 1, and so on. [`Csv::sequence`] reads
//! such samples from columns named by a pattern and checks that each is there once.
//!
//! Scale them per channel, as the model sees them: fit over the `features` values of a step,
//! every step of every sample counting as one observation of each channel, with
//! [`Standardize::fit_samples`] (or [`MinMax::fit_samples`]) given the number of features, and
//! apply with `apply_samples` to the data's values (not `apply`, which expects one statistic
//! per value of a sample, as fitting to the `steps * features` columns would give). Fit on the
//! training samples only:
//!
//! ```
//! use fusegraph_runtime::data::{Csv, Standardize};
//! let text = "y,t0_a,t0_b,t1_a,t1_b\n0,1,100,3,300\n1,5,500,7,700\n";
//! let csv = Csv::new().label_column("y").sequence(2, &["a", "b"], "t{t}_{f}");
//! let mut train = csv.parse_classes(text, "mem.csv")?;
//! let scaler = Standardize::fit_samples(train.x(), 2); // 2 channels, over every step
//! assert_eq!(scaler.mean(), &[4.0, 400.0]);
//! assert_eq!(scaler.scale(), &[5f64.sqrt(), 100.0 * 5f64.sqrt()]);
//! scaler.apply_samples(train.x_mut());
//! let (a, b) = (train.x()[2], train.x()[3]); // step 1 of sample 0
//! assert_eq!((a, b), (-(0.2f64.sqrt()) as f32, -(0.2f64.sqrt()) as f32));
//! # Ok::<(), fusegraph_runtime::data::DataError>(())
//! ```

mod csv;
mod dataset;
mod error;
pub mod idx;
mod scale;
mod sequence;
mod text;
mod windows;

pub use csv::Csv;
pub use dataset::Dataset;
pub use error::{Column, DataError, Place, SequenceProblem};
pub use idx::Idx;
pub use scale::{MinMax, Standardize};
pub use text::{NextTokens, Vocabulary};
pub use windows::{Series, Windows};
