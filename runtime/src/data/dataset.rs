//! [`Dataset`]: samples and their targets in memory.

use super::DataError;
use crate::rng::{Rng, Seed};
use std::format;
use std::vec::Vec;

/// Samples of `features` values each and their targets (`targets_per_sample` each: one class
/// label, or one value per model output), in two flat row-major buffers.
///
/// ```
/// use fusegraph_runtime::data::Dataset;
/// use fusegraph_runtime::rng::Seed;
/// let data = Dataset::new(vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0], vec![0u32, 1, 0], 2).unwrap();
/// assert_eq!((data.len(), data.features()), (3, 2));
/// assert_eq!(data.sample(1), (&[2.0, 3.0][..], &[1u32][..]));
/// let (train, test) = data.split(1.0 / 3.0, Seed(1));
/// assert_eq!((train.len(), test.len()), (2, 1));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Dataset<T = f32> {
    x: Vec<f32>,
    y: Vec<T>,
    features: usize,
    targets: usize,
}

impl<T: Copy> Dataset<T> {
    /// Samples from `x` (`features` values each) and their targets `y` (the same number per
    /// sample). An error if they do not divide into whole samples.
    pub fn new(x: Vec<f32>, y: Vec<T>, features: usize) -> Result<Self, DataError> {
        if features == 0 || !x.len().is_multiple_of(features) {
            return Err(DataError::Shape(format!(
                "{} feature values do not make samples of {features}",
                x.len()
            )));
        }
        let n = x.len() / features;
        let targets = y.len().checked_div(n).unwrap_or(1);
        if (n == 0 && !y.is_empty()) || (n > 0 && (targets == 0 || y.len() != n * targets)) {
            return Err(DataError::Shape(format!(
                "{} targets do not divide among {n} samples",
                y.len()
            )));
        }
        Ok(Dataset {
            x,
            y,
            features,
            targets,
        })
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.x.len() / self.features
    }

    /// Whether there are no samples.
    pub fn is_empty(&self) -> bool {
        self.x.is_empty()
    }

    /// Values per sample.
    pub fn features(&self) -> usize {
        self.features
    }

    /// Targets per sample.
    pub fn targets_per_sample(&self) -> usize {
        self.targets
    }

    /// All features, sample after sample.
    pub fn x(&self) -> &[f32] {
        &self.x
    }

    /// All features, writable (for scaling in place).
    pub fn x_mut(&mut self) -> &mut [f32] {
        &mut self.x
    }

    /// All targets, sample after sample.
    pub fn y(&self) -> &[T] {
        &self.y
    }

    /// Sample `i`: its features and its targets.
    pub fn sample(&self, i: usize) -> (&[f32], &[T]) {
        let (f, t) = (self.features, self.targets);
        (&self.x[i * f..(i + 1) * f], &self.y[i * t..(i + 1) * t])
    }

    /// Copies samples `idx[0], idx[1], ...` into `x` and `y`, replacing what they held: a batch
    /// gathered into buffers that keep their capacity.
    pub fn gather_into(&self, idx: &[usize], x: &mut Vec<f32>, y: &mut Vec<T>) {
        x.clear();
        y.clear();
        for &i in idx {
            let (xs, ys) = self.sample(i);
            x.extend_from_slice(xs);
            y.extend_from_slice(ys);
        }
    }

    /// A new data set of samples `idx`, in that order.
    pub fn subset(&self, idx: &[usize]) -> Self {
        let mut x = Vec::with_capacity(idx.len() * self.features);
        let mut y = Vec::with_capacity(idx.len() * self.targets);
        self.gather_into(idx, &mut x, &mut y);
        Dataset {
            x,
            y,
            features: self.features,
            targets: self.targets,
        }
    }

    /// Splits into (train, test) after a seeded shuffle: `test_fraction` of the samples
    /// (rounded down) go to the test set. The same seed gives the same split.
    ///
    /// # Panics
    ///
    /// If `test_fraction` is not in `[0, 1]`.
    pub fn split(&self, test_fraction: f64, seed: Seed) -> (Self, Self) {
        assert!(
            (0.0..=1.0).contains(&test_fraction),
            "test fraction {test_fraction} is not in [0, 1]"
        );
        let mut order: Vec<usize> = (0..self.len()).collect();
        Rng::new(seed).shuffle(&mut order);
        let test = (self.len() as f64 * test_fraction) as usize;
        let (test_idx, train_idx) = order.split_at(test);
        (self.subset(train_idx), self.subset(test_idx))
    }

    /// The samples split in order as Keras' `validation_split` does: the first
    /// `floor(n * (1 - fraction))` samples, then the rest.
    ///
    /// # Panics
    ///
    /// If `fraction` is not in `[0, 1]`.
    pub fn split_tail(&self, fraction: f64) -> (Self, Self) {
        assert!(
            (0.0..=1.0).contains(&fraction),
            "fraction {fraction} is not in [0, 1]"
        );
        let n = self.len();
        let split_at = ((n as f64 * (1.0 - fraction)).floor() as usize).min(n);
        let head: Vec<usize> = (0..split_at).collect();
        let rest: Vec<usize> = (split_at..n).collect();
        (self.subset(&head), self.subset(&rest))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec;

    #[test]
    fn rejects_partial_samples() {
        assert!(Dataset::new(vec![1.0; 5], vec![0u32; 2], 2).is_err());
        assert!(Dataset::new(vec![1.0; 6], vec![0u32; 2], 2).is_err());
        assert!(Dataset::new(vec![1.0; 6], vec![0u32; 3], 0).is_err());
        assert!(Dataset::<u32>::new(vec![], vec![1], 2).is_err());
        let d = Dataset::new(vec![1.0; 6], vec![0.5f32; 6], 2).unwrap();
        assert_eq!(d.targets_per_sample(), 2);
    }

    #[test]
    fn split_is_a_seeded_partition() {
        let n = 50;
        let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let y: Vec<u32> = (0..n).collect();
        let d = Dataset::new(x, y, 1).unwrap();
        let (a, b) = d.split(0.2, Seed(4));
        assert_eq!((a.len(), b.len()), (40, 10));
        let mut all: Vec<u32> = a.y().iter().chain(b.y()).copied().collect();
        all.sort_unstable();
        assert_eq!(all, (0..n).collect::<Vec<_>>());
        for i in 0..a.len() {
            assert_eq!(a.sample(i).0[0], a.sample(i).1[0] as f32);
        }
        assert_eq!(d.split(0.2, Seed(4)), (a.clone(), b));
        assert_ne!(d.split(0.2, Seed(5)).0, a);
        let (h, t) = d.split_tail(0.1);
        assert_eq!(t.y(), &[45, 46, 47, 48, 49]);
        assert_eq!(h.len(), 45);
    }
}
