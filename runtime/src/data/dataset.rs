//! [`Dataset`]: samples, their targets and (for padded sequences) their lengths, in memory.

use super::DataError;
use crate::hash::Fnv;
use crate::loss::TargetValue;
use crate::rng::{Rng, Seed};
use crate::train::{padding_lengths, InputValue};
use std::format;
use std::vec;
use std::vec::Vec;

/// Samples of `features` values each and their targets (`targets_per_sample` each: one class
/// label, or one value per model output), in two flat row-major buffers. The values are `f32`
/// features, or (`X = u32`) the token ids of a model with `input = u32`. Samples that are
/// sequences padded at the end may carry their lengths ([`with_lengths`](Self::with_lengths)),
/// which travel with them through subsets, splits and batches.
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
pub struct Dataset<T = f32, X = f32> {
    x: Vec<X>,
    y: Vec<T>,
    lengths: Option<Vec<u32>>,
    features: usize,
    targets: usize,
}

impl<T: Copy, X: Copy> Dataset<T, X> {
    /// Samples from `x` (`features` values each) and their targets `y` (the same number per
    /// sample). An error if they do not divide into whole samples.
    pub fn new(x: Vec<X>, y: Vec<T>, features: usize) -> Result<Self, DataError> {
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
            lengths: None,
            features,
            targets,
        })
    }

    /// The same samples with their lengths: sample `i` is a sequence whose first `lengths[i]`
    /// steps are real and the rest padding (of at most `features` steps; a train step checks
    /// them against the model's sequence length). An error unless there is one length per
    /// sample, each at least 1.
    ///
    /// ```
    /// use fusegraph_runtime::data::Dataset;
    /// let data = Dataset::new(vec![5u32, 6, 0, 7, 0, 0], vec![1u32, 0], 3).unwrap();
    /// let data = data.with_lengths(vec![2, 1]).unwrap();
    /// assert_eq!(data.lengths(), Some(&[2, 1][..]));
    /// assert!(Dataset::new(vec![1.0; 4], vec![0u32; 2], 2).unwrap().with_lengths(vec![1]).is_err());
    /// ```
    pub fn with_lengths(mut self, lengths: Vec<u32>) -> Result<Self, DataError> {
        if lengths.len() != self.len() {
            return Err(DataError::Shape(format!(
                "{} lengths for {} samples: give one a sample",
                lengths.len(),
                self.len()
            )));
        }
        if let Some(i) = lengths
            .iter()
            .position(|&l| l == 0 || l as usize > self.features)
        {
            return Err(DataError::Shape(format!(
                "sample {i}: length {} is not from 1 to {} (its values)",
                lengths[i], self.features
            )));
        }
        self.lengths = Some(lengths);
        Ok(self)
    }

    /// The lengths of the samples, if they are padded sequences.
    ///
    /// Token ids padded at the end with `pad` get theirs from
    /// [`with_padding_id`](Dataset::with_padding_id).
    pub fn lengths(&self) -> Option<&[u32]> {
        self.lengths.as_deref()
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

    /// All features (or ids), sample after sample.
    pub fn x(&self) -> &[X] {
        &self.x
    }

    /// All features, writable (for scaling in place).
    pub fn x_mut(&mut self) -> &mut [X] {
        &mut self.x
    }

    /// All targets, sample after sample.
    pub fn y(&self) -> &[T] {
        &self.y
    }

    /// Sample `i`: its features and its targets.
    pub fn sample(&self, i: usize) -> (&[X], &[T]) {
        let (f, t) = (self.features, self.targets);
        (&self.x[i * f..(i + 1) * f], &self.y[i * t..(i + 1) * t])
    }

    /// Copies samples `idx[0], idx[1], ...` into `x` and `y`, replacing what they held: a batch
    /// gathered into buffers that keep their capacity.
    pub fn gather_into(&self, idx: &[usize], x: &mut Vec<X>, y: &mut Vec<T>) {
        x.clear();
        y.clear();
        for &i in idx {
            let (xs, ys) = self.sample(i);
            x.extend_from_slice(xs);
            y.extend_from_slice(ys);
        }
    }

    /// Copies the lengths of samples `idx[0], idx[1], ...` into `lengths`, replacing what it
    /// held (nothing when the samples have no lengths): the lengths of the batch of
    /// [`gather_into`](Self::gather_into).
    pub fn gather_lengths_into(&self, idx: &[usize], lengths: &mut Vec<u32>) {
        lengths.clear();
        if let Some(all) = &self.lengths {
            lengths.extend(idx.iter().map(|&i| all[i]));
        }
    }

    /// A new data set of samples `idx`, in that order, with their lengths.
    pub fn subset(&self, idx: &[usize]) -> Self {
        let mut x = Vec::with_capacity(idx.len() * self.features);
        let mut y = Vec::with_capacity(idx.len() * self.targets);
        self.gather_into(idx, &mut x, &mut y);
        let lengths = self.lengths.as_ref().map(|_| {
            let mut lengths = Vec::with_capacity(idx.len());
            self.gather_lengths_into(idx, &mut lengths);
            lengths
        });
        Dataset {
            x,
            y,
            lengths,
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

impl<T: Copy> Dataset<T, u32> {
    /// The same samples of token ids, each with its length read off its padding: the steps
    /// up to its last id that is not `pad` ([`padding_lengths`]), as Keras' `mask_zero=True`
    /// finds them for `pad = 0`.
    ///
    /// ```
    /// use fusegraph_runtime::data::Dataset;
    /// let data = Dataset::new(vec![4u32, 0, 0, 2, 9, 0], vec![0u32, 1], 3).unwrap();
    /// assert_eq!(data.with_padding_id(0).lengths(), Some(&[1, 2][..]));
    /// ```
    pub fn with_padding_id(mut self, pad: u32) -> Self {
        let mut lengths = vec![0; self.len()];
        padding_lengths(&self.x, self.features, pad, &mut lengths);
        self.lengths = Some(lengths);
        self
    }
}

impl<T: TargetValue, X: InputValue> Dataset<T, X> {
    /// A hash of the data set, bit for bit: its shape, samples, targets and lengths (64-bit
    /// FNV-1a). Two data sets with the same hash hold the same values, as far as a hash can
    /// tell; the processes of a data-parallel fit compare theirs before the first step.
    ///
    /// ```
    /// use fusegraph_runtime::data::Dataset;
    /// let a = Dataset::new(vec![0.0, 1.0, 2.0, 3.0], vec![0u32, 1], 2).unwrap();
    /// let mut b = a.clone();
    /// assert_eq!(a.content_hash(), b.content_hash());
    /// b.x_mut()[3] = 3.5;
    /// assert_ne!(a.content_hash(), b.content_hash());
    /// ```
    pub fn content_hash(&self) -> u64 {
        let mut h = Fnv::new();
        h.u64(self.features as u64);
        h.u64(self.targets as u64);
        h.u64(self.x.len() as u64);
        self.x.iter().for_each(|v| h.bytes(&v.bits().to_le_bytes()));
        for t in &self.y {
            let bits = t
                .class()
                .unwrap_or_else(|| t.value().map_or(0, f32::to_bits));
            h.bytes(&bits.to_le_bytes());
        }
        match &self.lengths {
            None => h.u64(u64::MAX),
            Some(lengths) => lengths.iter().for_each(|&l| h.u64(u64::from(l))),
        }
        h.finish()
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

    #[test]
    fn lengths_travel_with_their_samples() {
        let n = 20u32;
        let x: Vec<u32> = (0..n).flat_map(|i| [i, i, 0]).collect();
        let y: Vec<u32> = (0..n).collect();
        let lengths: Vec<u32> = (0..n).map(|i| 1 + i % 3).collect();
        let d = Dataset::new(x, y, 3)
            .unwrap()
            .with_lengths(lengths)
            .unwrap();
        let (a, b) = d.split(0.25, Seed(2));
        for part in [&a, &b] {
            let lengths = part.lengths().unwrap();
            assert_eq!(lengths.len(), part.len());
            for (i, &l) in lengths.iter().enumerate() {
                let (xs, ys) = part.sample(i);
                assert_eq!((xs[0], l), (ys[0], 1 + ys[0] % 3));
            }
        }
        let mut batch = vec![7];
        b.gather_lengths_into(&[1, 0], &mut batch);
        assert_eq!(batch, [b.lengths().unwrap()[1], b.lengths().unwrap()[0]]);
        Dataset::new(vec![1.0; 4], vec![0u32; 2], 2)
            .unwrap()
            .gather_lengths_into(&[0], &mut batch);
        assert!(batch.is_empty());
        assert!(d.clone().with_lengths(vec![1; 19]).is_err());
        assert!(d.clone().with_lengths(vec![4; 20]).is_err());
        assert!(d.with_lengths(vec![0; 20]).is_err());
    }
}
