//! Sliding windows over a time series: [`Series`] and [`Windows`].

use super::{DataError, Dataset};
use std::format;
use std::vec::Vec;

/// A time series in memory: `steps` rows of `channels` values, row-major, in time order.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    values: Vec<f32>,
    channels: usize,
}

impl Series {
    /// The series of `values`, `channels` per step. An error if they do not make whole steps.
    pub fn new(values: Vec<f32>, channels: usize) -> Result<Self, DataError> {
        if channels == 0 || !values.len().is_multiple_of(channels) {
            return Err(DataError::Shape(format!(
                "{} values do not make steps of {channels} channels",
                values.len()
            )));
        }
        Ok(Series { values, channels })
    }

    /// Number of time steps.
    pub fn steps(&self) -> usize {
        self.values.len() / self.channels
    }

    /// Values per step.
    pub fn channels(&self) -> usize {
        self.channels
    }

    /// All values, step after step.
    pub fn values(&self) -> &[f32] {
        &self.values
    }

    /// All values, writable (for scaling in place).
    pub fn values_mut(&mut self) -> &mut [f32] {
        &mut self.values
    }

    /// The steps before `step` and those from it on.
    ///
    /// # Panics
    ///
    /// If `step` is beyond the series.
    pub fn split_at(&self, step: usize) -> (Self, Self) {
        assert!(
            step <= self.steps(),
            "step {step} is beyond the {} steps of the series",
            self.steps()
        );
        let (head, tail) = self.values.split_at(step * self.channels);
        let part = |values: &[f32]| Series {
            values: values.to_vec(),
            channels: self.channels,
        };
        (part(head), part(tail))
    }

    /// The series cut in time as Keras' `validation_split` cuts samples: the first
    /// `floor(steps * (1 - fraction))` steps, then the rest.
    ///
    /// # Panics
    ///
    /// If `fraction` is not in `[0, 1]`.
    pub fn split_tail(&self, fraction: f64) -> (Self, Self) {
        assert!(
            (0.0..=1.0).contains(&fraction),
            "fraction {fraction} is not in [0, 1]"
        );
        let steps = self.steps();
        self.split_at(((steps as f64 * (1.0 - fraction)).floor() as usize).min(steps))
    }
}

/// How to cut a [`Series`] (`[N, F]`: `steps` rows of `channels` values, in time order) into
/// samples, as Keras' `timeseries_dataset_from_array` does: a sample is `window` consecutive
/// steps (`[window, F]`, time-major), its targets the `horizon` steps that follow, of the
/// chosen target channels (`horizon * targets` values, step after step), and windows start
/// every `stride` steps from the first.
///
/// **Splitting without leakage.** Cut the series in time first ([`Series::split_tail`] or
/// [`Series::split_at`]) and window each part on its own: no test window then reads or predicts
/// a step that a training window reads or predicts. The windows that would straddle the cut
/// (with stride 1, the `window + horizon - 1` starting in the last `window + horizon - 1` steps
/// before it) are left out. Fit scaling on the training part only and apply it to both parts
/// before windowing, so that nothing about the test steps reaches training:
///
/// ```
/// use fusegraph_runtime::data::{Series, Standardize, Windows};
/// // 10 steps of 2 channels: step t is [t, 10 t].
/// let values: Vec<f32> = (0..10).flat_map(|t| [t as f32, 10.0 * t as f32]).collect();
/// let series = Series::new(values, 2)?;
/// let windows = Windows::new(3, 1).targets(&[1]);
/// let all = windows.dataset(&series)?;
/// assert_eq!((all.len(), all.features(), all.targets_per_sample()), (7, 6, 1));
/// assert_eq!(all.sample(2), (&[2.0, 20.0, 3.0, 30.0, 4.0, 40.0][..], &[50.0][..]));
///
/// let (mut train, mut test) = series.split_tail(0.4); // steps 0..6 and 6..10
/// let scaler = Standardize::fit_samples(train.values(), train.channels());
/// scaler.apply_samples(train.values_mut());
/// scaler.apply_samples(test.values_mut());
/// let (train, test) = (windows.dataset(&train)?, windows.dataset(&test)?);
/// assert_eq!((train.len(), test.len()), (3, 1)); // the 3 windows across the cut are left out
/// # Ok::<(), fusegraph_runtime::data::DataError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Windows {
    window: usize,
    horizon: usize,
    stride: usize,
    targets: Option<Vec<usize>>,
}

impl Windows {
    /// Windows of `window` steps, each predicting the next `horizon` steps of every channel,
    /// one starting at every step.
    pub fn new(window: usize, horizon: usize) -> Self {
        Windows {
            window,
            horizon,
            stride: 1,
            targets: None,
        }
    }

    /// A window starts every `stride` steps (from the first step).
    pub fn stride(mut self, stride: usize) -> Self {
        self.stride = stride;
        self
    }

    /// The targets are these channels (0-based, in this order) of the `horizon` steps.
    pub fn targets(mut self, channels: &[usize]) -> Self {
        self.targets = Some(channels.to_vec());
        self
    }

    /// The windows of `series` as samples of `window * channels` values (`[window, channels]`)
    /// with `horizon * targets` targets each (`[horizon, targets]`), in time order.
    ///
    /// An error for a window, horizon or stride of 0, no target channel or one the series
    /// lacks, or a series shorter than `window + horizon` steps.
    pub fn dataset(&self, series: &Series) -> Result<Dataset<f32>, DataError> {
        let targets = self.target_channels(series.channels())?;
        let starts = window_starts(series.steps(), self.window, self.horizon, self.stride)?;
        let (f, values) = (series.channels(), series.values());
        let mut x = Vec::with_capacity(starts.len() * self.window * f);
        let mut y = Vec::with_capacity(starts.len() * self.horizon * targets.len());
        for start in starts {
            let end = start + self.window;
            x.extend_from_slice(&values[start * f..end * f]);
            for step in values[end * f..(end + self.horizon) * f].chunks_exact(f) {
                y.extend(targets.iter().map(|&c| step[c]));
            }
        }
        Dataset::new(x, y, self.window * f)
    }

    /// The target channels of a series of `channels`, checked with the window, horizon and
    /// stride.
    fn target_channels(&self, channels: usize) -> Result<Vec<usize>, DataError> {
        at_least_one(&[
            ("window", self.window),
            ("horizon", self.horizon),
            ("stride", self.stride),
            (
                "number of target channels",
                self.targets.as_ref().map_or(1, Vec::len),
            ),
        ])?;
        let targets = self
            .targets
            .clone()
            .unwrap_or_else(|| (0..channels).collect());
        match targets.iter().find(|&&c| c >= channels) {
            Some(&channel) => Err(DataError::NoChannel { channel, channels }),
            None => Ok(targets),
        }
    }
}

/// [`DataError::ZeroWindowParameter`] for the first of the named `parameters` that is 0.
pub(super) fn at_least_one(parameters: &[(&'static str, usize)]) -> Result<(), DataError> {
    match parameters.iter().find(|&&(_, n)| n == 0) {
        Some(&(what, _)) => Err(DataError::ZeroWindowParameter { what }),
        None => Ok(()),
    }
}

/// The first step of each window of `window` steps followed by `horizon` more in a series of
/// `steps`, one every `stride` (at least 1) steps from the first; an error if none fits.
pub(super) fn window_starts(
    steps: usize,
    window: usize,
    horizon: usize,
    stride: usize,
) -> Result<std::iter::StepBy<std::ops::Range<usize>>, DataError> {
    match steps.checked_sub(window.saturating_add(horizon)) {
        Some(last) => Ok((0..last + 1).step_by(stride)),
        None => Err(DataError::SeriesTooShort {
            steps,
            window,
            horizon,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;
    use std::vec;

    /// Steps 0..n of two channels: step t is [t, 100 + t].
    fn two_channels(n: usize) -> Series {
        let values = (0..n).flat_map(|t| [t as f32, 100.0 + t as f32]).collect();
        Series::new(values, 2).unwrap()
    }

    #[test]
    fn windows_read_their_steps_and_target_the_next() {
        let data = Windows::new(2, 2)
            .stride(3)
            .dataset(&two_channels(9))
            .unwrap();
        // Starts 0, 3 (6 + 4 > 9): inputs steps [s, s+1], targets steps [s+2, s+3].
        assert_eq!(data.len(), 2);
        assert_eq!(
            data.sample(0),
            (&[0.0, 100.0, 1.0, 101.0][..], &[2.0, 102.0, 3.0, 103.0][..])
        );
        assert_eq!(
            data.sample(1),
            (&[3.0, 103.0, 4.0, 104.0][..], &[5.0, 105.0, 6.0, 106.0][..])
        );
        let data = Windows::new(3, 2)
            .targets(&[1, 0])
            .dataset(&two_channels(6))
            .unwrap();
        assert_eq!(data.len(), 2);
        assert_eq!(data.sample(1).1, &[104.0, 4.0, 105.0, 5.0]);
        let exact = Windows::new(5, 1).dataset(&two_channels(6)).unwrap();
        assert_eq!((exact.len(), exact.sample(0).1), (1, &[5.0, 105.0][..]));
    }

    #[test]
    fn windows_that_cannot_be_cut_are_errors() {
        let series = two_channels(5);
        let err = |w: Windows| w.dataset(&series).unwrap_err().to_string();
        assert_eq!(err(Windows::new(0, 1)), "the window must be at least 1");
        assert_eq!(err(Windows::new(2, 0)), "the horizon must be at least 1");
        assert_eq!(
            err(Windows::new(2, 1).stride(0)),
            "the stride must be at least 1"
        );
        assert_eq!(
            err(Windows::new(2, 1).targets(&[])),
            "the number of target channels must be at least 1"
        );
        assert_eq!(
            err(Windows::new(2, 1).targets(&[0, 2])),
            "no channel 2: the series has 2 channels"
        );
        assert_eq!(
            err(Windows::new(4, 2)),
            "a series of 5 steps is shorter than a window of 4 steps and its horizon of 2"
        );
        assert!(matches!(
            Windows::new(usize::MAX, 1).dataset(&series),
            Err(DataError::SeriesTooShort { .. })
        ));
        assert!(Series::new(vec![1.0; 5], 2).is_err());
        assert!(Series::new(vec![], 0).is_err());
    }

    #[test]
    fn split_cuts_the_steps_in_time() {
        let series = two_channels(10);
        let (head, tail) = series.split_tail(0.25);
        assert_eq!((head.steps(), tail.steps()), (7, 3));
        assert_eq!(tail.values()[..2], [7.0, 107.0]);
        let (all, none) = series.split_tail(0.0);
        assert_eq!((all, none.steps()), (series.clone(), 0));
        assert_eq!(series.split_at(0).0.steps(), 0);
    }
}
