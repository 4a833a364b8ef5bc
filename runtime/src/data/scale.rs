//! Feature scaling: [`Standardize`] and [`MinMax`], fitted on training data and applied to any
//! data with the same features.
//!
//! Both compute their statistics in `f64` and map each value `v` of feature `j` to
//! `(v - shift[j]) / scale[j]`, in `f64` rounded once to `f32`. As in scikit-learn, NaN are
//! missing values: left out when fitting, left NaN when applying. Other values should be
//! finite (the loaders make sure of it): an infinite value makes its feature's statistics
//! infinite. Fit on the training set only,
//! then apply the same scaler to the training and the test set, so that nothing about the test
//! set leaks into training:
//!
//! ```
//! use fusegraph_runtime::data::{Dataset, MinMax, Standardize};
//! let train = Dataset::new(vec![0.0, 10.0, 2.0, 10.0, 4.0, 10.0], vec![0u32, 1, 0], 2).unwrap();
//! let test = Dataset::new(vec![6.0, 10.0], vec![1u32], 2).unwrap();
//!
//! let scaler = Standardize::fit(&train);
//! assert_eq!(scaler.mean(), &[2.0, 10.0]);
//! assert_eq!(scaler.scale()[1], 1.0); // a constant feature is only centred
//! let (mut train_z, mut test_z) = (train.clone(), test.clone());
//! scaler.apply(&mut train_z);
//! scaler.apply(&mut test_z);
//! assert_eq!(train_z.x()[1], 0.0);
//! assert!((test_z.x()[0] - 2.0 * 1.5f32.sqrt()).abs() < 1e-6); // (6 - 2) / sqrt(8 / 3)
//!
//! let range = MinMax::fit(&train);
//! let (mut train_01, mut test_01) = (train, test);
//! range.apply(&mut train_01);
//! range.apply(&mut test_01);
//! assert_eq!(train_01.x(), &[0.0, 0.0, 0.5, 0.0, 1.0, 0.0]);
//! assert_eq!(test_01.x(), &[1.5, 0.0]); // beyond the training range
//! ```

use super::Dataset;
use std::vec;
use std::vec::Vec;

/// Standardization: each feature minus its mean, divided by its population standard deviation
/// (as scikit-learn's `StandardScaler`). A constant feature (all values equal) gets scale 1.
///
/// For `[steps, features]` samples, fit per channel with
/// [`fit_samples`](Self::fit_samples)`(data.x(), features)`, which counts each step of each
/// sample as one observation of each of the `features` channels, and scale with
/// [`apply_samples`](Self::apply_samples)`(data.x_mut())` (see the [module](super)
/// documentation). [`fit`](Self::fit) would instead fit each of the `steps * features` columns
/// apart.
#[derive(Clone, Debug, PartialEq)]
pub struct Standardize {
    mean: Vec<f64>,
    scale: Vec<f64>,
}

impl Standardize {
    /// Fits to the features of `data`. Without samples, it maps every value to itself.
    pub fn fit<T: Copy>(data: &Dataset<T>) -> Self {
        Self::fit_samples(data.x(), data.features())
    }

    /// Fits to samples of `features` values each, row-major; for `[steps, features]` samples,
    /// each step counts as one sample: the statistics are per channel.
    ///
    /// # Panics
    /// If `x` does not hold whole samples of `features` values.
    pub fn fit_samples(x: &[f32], features: usize) -> Self {
        let seen = Seen::of(x, features);
        let mean: Vec<f64> = seen.iter().map(Seen::mean).collect();
        let mut var = vec![0.0; features];
        for row in samples(x, features) {
            for ((s, &m), &v) in var.iter_mut().zip(&mean).zip(row) {
                if !v.is_nan() {
                    *s += (f64::from(v) - m) * (f64::from(v) - m);
                }
            }
        }
        let scale = var
            .iter()
            .zip(&seen)
            .map(|(&s, f)| {
                if f.constant() {
                    1.0
                } else {
                    (s / f.count as f64).sqrt()
                }
            })
            .collect();
        Standardize { mean, scale }
    }

    /// Per-feature means.
    pub fn mean(&self) -> &[f64] {
        &self.mean
    }

    /// Per-feature divisors: the standard deviation, or 1 for a constant feature.
    pub fn scale(&self) -> &[f64] {
        &self.scale
    }

    /// Standardizes the features of `data` in place.
    ///
    /// # Panics
    /// If `data` has a different number of features than the data fitted.
    pub fn apply<T: Copy>(&self, data: &mut Dataset<T>) {
        same_features(data.features(), self.mean.len());
        self.apply_samples(data.x_mut());
    }

    /// Standardizes samples in place, row-major.
    ///
    /// # Panics
    /// If `x` does not hold whole samples of as many features as the data fitted.
    pub fn apply_samples(&self, x: &mut [f32]) {
        affine(x, &self.mean, &self.scale);
    }
}

/// Min-max scaling: each feature minus its minimum, divided by its range (as scikit-learn's
/// `MinMaxScaler`), so that the fitted data lies in `[0, 1]`. A constant feature gets range 1.
///
/// For `[steps, features]` samples, fit per channel with
/// [`fit_samples`](Self::fit_samples)`(data.x(), features)` and scale with
/// [`apply_samples`](Self::apply_samples)`(data.x_mut())`, as for [`Standardize`].
#[derive(Clone, Debug, PartialEq)]
pub struct MinMax {
    min: Vec<f64>,
    range: Vec<f64>,
}

impl MinMax {
    /// Fits to the features of `data`. Without samples, it maps every value to itself.
    pub fn fit<T: Copy>(data: &Dataset<T>) -> Self {
        Self::fit_samples(data.x(), data.features())
    }

    /// Fits to samples of `features` values each, row-major.
    ///
    /// # Panics
    /// If `x` does not hold whole samples of `features` values.
    pub fn fit_samples(x: &[f32], features: usize) -> Self {
        let (min, range) = Seen::of(x, features)
            .iter()
            .map(|f| match f.count {
                0 => (0.0, 1.0),
                _ if f.constant() => (f64::from(f.lo), 1.0),
                _ => (f64::from(f.lo), f64::from(f.hi) - f64::from(f.lo)),
            })
            .unzip();
        MinMax { min, range }
    }

    /// Per-feature minima.
    pub fn min(&self) -> &[f64] {
        &self.min
    }

    /// Per-feature ranges (maximum minus minimum), or 1 for a constant feature.
    pub fn range(&self) -> &[f64] {
        &self.range
    }

    /// Scales the features of `data` in place.
    ///
    /// # Panics
    /// If `data` has a different number of features than the data fitted.
    pub fn apply<T: Copy>(&self, data: &mut Dataset<T>) {
        same_features(data.features(), self.min.len());
        self.apply_samples(data.x_mut());
    }

    /// Scales samples in place, row-major.
    ///
    /// # Panics
    /// If `x` does not hold whole samples of as many features as the data fitted.
    pub fn apply_samples(&self, x: &mut [f32]) {
        affine(x, &self.min, &self.range);
    }
}

/// The rows of `x`, `features` values each.
fn samples(x: &[f32], features: usize) -> std::slice::ChunksExact<'_, f32> {
    check_width(x.len(), features);
    x.chunks_exact(features)
}

/// Panics unless a data set of `features` fits a scaler fitted to `fitted` features.
fn same_features(features: usize, fitted: usize) {
    assert_eq!(
        features, fitted,
        "a scaler fitted to {fitted} features applied to {features}"
    );
}

/// Panics unless `len` values make whole samples of `features`.
fn check_width(len: usize, features: usize) {
    assert!(
        features > 0 && len.is_multiple_of(features),
        "{len} values do not make samples of {features} features"
    );
}

/// What fitting saw of one feature, NaN left out: how many values, their sum, least and
/// greatest.
struct Seen {
    count: usize,
    sum: f64,
    lo: f32,
    hi: f32,
}

impl Seen {
    /// Per feature of the samples `x`.
    fn of(x: &[f32], features: usize) -> Vec<Seen> {
        let mut seen: Vec<Seen> = (0..features)
            .map(|_| Seen {
                count: 0,
                sum: 0.0,
                lo: f32::INFINITY,
                hi: f32::NEG_INFINITY,
            })
            .collect();
        for row in samples(x, features) {
            for (f, &v) in seen.iter_mut().zip(row).filter(|(_, v)| !v.is_nan()) {
                f.count += 1;
                f.sum += f64::from(v);
                f.lo = f.lo.min(v);
                f.hi = f.hi.max(v);
            }
        }
        seen
    }

    /// The mean (0 without values).
    fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum / self.count as f64
        }
    }

    /// Whether the feature takes at most one value.
    fn constant(&self) -> bool {
        self.count == 0 || self.lo == self.hi
    }
}

/// `x[j] = (x[j] - shift[j]) / scale[j]` per feature `j`, in `f64`.
fn affine(x: &mut [f32], shift: &[f64], scale: &[f64]) {
    for row in samples_mut(x, shift.len()) {
        for ((v, &s), &d) in row.iter_mut().zip(shift).zip(scale) {
            *v = ((f64::from(*v) - s) / d) as f32;
        }
    }
}

/// The rows of `x`, `features` values each, writable.
fn samples_mut(x: &mut [f32], features: usize) -> std::slice::ChunksExactMut<'_, f32> {
    check_width(x.len(), features);
    x.chunks_exact_mut(features)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_features_keep_their_scale() {
        let x = [0.1f32; 12];
        let s = Standardize::fit_samples(&x, 3);
        assert_eq!(s.scale(), &[1.0; 3]);
        let mut y = x;
        s.apply_samples(&mut y);
        assert!(y.iter().all(|v| v.abs() < 1e-7), "{y:?}");
        let m = MinMax::fit_samples(&x, 3);
        assert_eq!(m.range(), &[1.0; 3]);
        let mut y = x;
        m.apply_samples(&mut y);
        assert_eq!(y, [0.0; 12]);
    }

    #[test]
    fn nan_is_left_out_of_fitting_and_kept_by_applying() {
        let nan = f32::NAN;
        let x = [1.0, nan, nan, nan, 3.0, 5.0];
        let s = Standardize::fit_samples(&x, 2);
        assert_eq!((s.mean(), s.scale()), (&[2.0, 5.0][..], &[1.0, 1.0][..]));
        let m = MinMax::fit_samples(&x, 2);
        assert_eq!((m.min(), m.range()), (&[1.0, 5.0][..], &[2.0, 1.0][..]));
        let mut y = [nan, 3.0];
        s.apply_samples(&mut y);
        assert!(y[0].is_nan());
        assert_eq!(y[1], -2.0);
        let all_nan = Standardize::fit_samples(&[nan, nan], 1);
        assert_eq!((all_nan.mean(), all_nan.scale()), (&[0.0][..], &[1.0][..]));
    }

    #[test]
    fn statistics_accumulate_in_f64() {
        let x: Vec<f32> = (0..100_000).map(|i| 1e6 + (i % 2) as f32).collect();
        let s = Standardize::fit_samples(&x, 1);
        assert_eq!((s.mean(), s.scale()), (&[1e6 + 0.5][..], &[0.5][..]));
    }

    #[test]
    fn without_samples_the_scalers_are_identities() {
        let s = Standardize::fit_samples(&[], 2);
        let m = MinMax::fit_samples(&[], 2);
        let mut x = [3.0, -4.0];
        s.apply_samples(&mut x);
        m.apply_samples(&mut x);
        assert_eq!(x, [3.0, -4.0]);
    }

    #[test]
    #[should_panic(expected = "a scaler fitted to 2 features applied to 1")]
    fn apply_checks_the_features() {
        let mut data = Dataset::new(std::vec![1.0; 4], std::vec![0u32; 4], 1).unwrap();
        Standardize::fit_samples(&[1.0, 2.0], 2).apply(&mut data);
    }

    #[test]
    #[should_panic(expected = "5 values do not make samples of 2 features")]
    fn apply_checks_the_width() {
        MinMax::fit_samples(&[1.0, 2.0], 2).apply_samples(&mut [0.0; 5]);
    }
}
