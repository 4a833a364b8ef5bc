//! Learning-rate schedules, evaluated once per step in `f32` as Keras evaluates them.

use crate::math;

/// How the learning rate decays after the warm-up.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Decay {
    /// The initial learning rate, always.
    Constant,
    /// `initial * rate^(i / steps)`, with `i / steps` floored when `staircase` (Keras
    /// `ExponentialDecay`; PyTorch `StepLR` is the staircase form, `ExponentialLR` has
    /// `steps = 1`).
    Exponential {
        /// Steps per decay period.
        steps: u64,
        /// Factor per period.
        rate: f32,
        /// Floor the exponent.
        staircase: bool,
    },
    /// `initial / (1 + rate * i / steps)`, floored when `staircase` (Keras `InverseTimeDecay`;
    /// the old Keras `decay=d` is `steps = 1, rate = d`).
    InverseTime {
        /// Steps per period.
        steps: u64,
        /// Decay rate.
        rate: f32,
        /// Floor `i / steps`.
        staircase: bool,
    },
    /// Cosine decay from `initial` to `initial * alpha` over `steps`, then flat (Keras
    /// `CosineDecay`).
    Cosine {
        /// Length of the decay.
        steps: u64,
        /// Final fraction of the initial rate.
        alpha: f32,
    },
    /// PyTorch's `CosineAnnealingLR`: the same cosine, which past `steps` rises back to the
    /// initial rate at `2 * steps` and goes on with period `2 * steps` (PyTorch's scheduler
    /// does not clamp its position; `CosineAnnealingWarmRestarts` is another schedule).
    CosineAnnealing {
        /// Half a period: `T_max`.
        steps: u64,
        /// `eta_min` as a fraction of the initial rate.
        alpha: f32,
    },
}

/// A learning-rate schedule: an optional linear warm-up, then a [`Decay`].
///
/// `at(i)` is the rate of the step taken after `i` completed steps (Keras evaluates its schedule
/// at `iterations`, before the increment).
///
/// ```
/// use fusegraph_runtime::optim::Schedule;
/// let s = Schedule::inverse_time(0.1, 1, 0.5, false);
/// assert_eq!(s.at(0), 0.1);
/// assert_eq!(s.at(2), 0.05);
/// let w = Schedule::constant(1.0).with_warmup(4, 0.0);
/// assert_eq!(w.at(1), 0.25);
/// assert_eq!(w.at(9), 1.0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Schedule {
    /// The rate at the end of the warm-up (or at step 0 without one).
    pub initial: f32,
    /// The decay after the warm-up.
    pub decay: Decay,
    /// Length of the linear warm-up; `0` for none.
    pub warmup_steps: u64,
    /// Rate at the first warm-up step.
    pub warmup_from: f32,
}

impl Schedule {
    /// A constant rate.
    pub fn constant(lr: f32) -> Self {
        Self::new(lr, Decay::Constant)
    }
    /// Smooth exponential decay (see [`Decay::Exponential`]).
    pub fn exponential(lr: f32, steps: u64, rate: f32) -> Self {
        Self::new(
            lr,
            Decay::Exponential {
                steps,
                rate,
                staircase: false,
            },
        )
    }
    /// Step decay: multiply by `gamma` every `steps` steps (PyTorch `StepLR`).
    pub fn step(lr: f32, steps: u64, gamma: f32) -> Self {
        Self::new(
            lr,
            Decay::Exponential {
                steps,
                rate: gamma,
                staircase: true,
            },
        )
    }
    /// Inverse-time decay (see [`Decay::InverseTime`]).
    pub fn inverse_time(lr: f32, steps: u64, rate: f32, staircase: bool) -> Self {
        Self::new(
            lr,
            Decay::InverseTime {
                steps,
                rate,
                staircase,
            },
        )
    }
    /// Cosine decay (see [`Decay::Cosine`]).
    pub fn cosine(lr: f32, steps: u64, alpha: f32) -> Self {
        Self::new(lr, Decay::Cosine { steps, alpha })
    }
    /// PyTorch's `CosineAnnealingLR(T_max = steps, eta_min)` (see [`Decay::CosineAnnealing`]).
    ///
    /// ```
    /// use fusegraph_runtime::optim::Schedule;
    /// let s = Schedule::cosine_annealing(0.1, 10, 0.0);
    /// assert!((s.at(5) - 0.05).abs() < 1e-7);
    /// assert_eq!(s.at(10), 0.0);
    /// assert!((s.at(15) - 0.05).abs() < 1e-7); // rising again, as in PyTorch
    /// assert!((s.at(20) - 0.1).abs() < 1e-7);
    /// ```
    pub fn cosine_annealing(lr: f32, steps: u64, eta_min: f32) -> Self {
        let alpha = if lr != 0.0 { eta_min / lr } else { 0.0 };
        Self::new(lr, Decay::CosineAnnealing { steps, alpha })
    }
    /// A schedule from its parts, without warm-up.
    pub fn new(initial: f32, decay: Decay) -> Self {
        Schedule {
            initial,
            decay,
            warmup_steps: 0,
            warmup_from: 0.0,
        }
    }
    /// Adds a linear warm-up from `from` to `initial` over `steps` steps; the decay starts
    /// after it.
    pub fn with_warmup(mut self, steps: u64, from: f32) -> Self {
        self.warmup_steps = steps;
        self.warmup_from = from;
        self
    }

    /// The learning rate after `i` completed steps.
    pub fn at(&self, i: u64) -> f32 {
        if i < self.warmup_steps {
            let frac = i as f32 / self.warmup_steps as f32;
            return self.warmup_from + (self.initial - self.warmup_from) * frac;
        }
        let done_steps = i - self.warmup_steps;
        let i = done_steps as f32;
        let ratio = |steps: u64, staircase: bool| {
            let p = i / steps.max(1) as f32;
            if staircase {
                math::floor(p)
            } else {
                p
            }
        };
        match self.decay {
            Decay::Constant => self.initial,
            Decay::Exponential {
                steps,
                rate,
                staircase,
            } => self.initial * math::powf(rate, ratio(steps, staircase)),
            Decay::InverseTime {
                steps,
                rate,
                staircase,
            } => self.initial / (1.0 + rate * ratio(steps, staircase)),
            Decay::Cosine { steps, alpha } => {
                let done = i.min(steps as f32) / steps.max(1) as f32;
                let cosine = 0.5 * (1.0 + math::cos(core::f32::consts::PI * done));
                self.initial * ((1.0 - alpha) * cosine + alpha)
            }
            Decay::CosineAnnealing { steps, alpha } => {
                // The position within one period, so that the cosine's argument stays small.
                let period = 2 * steps.max(1);
                let done = (done_steps % period) as f32 / steps.max(1) as f32;
                let cosine = 0.5 * (1.0 + math::cos(core::f32::consts::PI * done));
                self.initial * ((1.0 - alpha) * cosine + alpha)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosine_annealing_follows_pytorchs_recursion_past_t_max() {
        // torch.optim.lr_scheduler.CosineAnnealingLR's step(), in f64, for 3 periods.
        let (base, eta_min, t_max) = (0.1f64, 0.01f64, 4u64);
        let pi = core::f64::consts::PI;
        let mut lr = base;
        let s = Schedule::cosine_annealing(0.1, t_max, 0.01);
        for e in 0..3 * 2 * t_max {
            if e > 0 {
                lr = if (e as i64 - 1 - t_max as i64).rem_euclid(2 * t_max as i64) == 0 {
                    lr + (base - eta_min) * (1.0 - libm::cos(pi / t_max as f64)) / 2.0
                } else {
                    (1.0 + libm::cos(pi * e as f64 / t_max as f64))
                        / (1.0 + libm::cos(pi * (e - 1) as f64 / t_max as f64))
                        * (lr - eta_min)
                        + eta_min
                };
            }
            let got = f64::from(s.at(e));
            assert!((got - lr).abs() <= 1e-6 * lr, "step {e}: {got} vs {lr}");
        }
    }

    #[test]
    fn exponential_smooth_and_staircase() {
        let s = Schedule::exponential(0.05, 4, 0.5);
        assert_eq!(s.at(0), 0.05);
        assert_eq!(s.at(4), 0.025);
        assert!((s.at(2) - 0.05 * 0.5f32.sqrt()).abs() < 1e-8);
        let st = Schedule::step(0.1, 3, 0.5);
        assert_eq!(
            [st.at(0), st.at(2), st.at(3), st.at(6)],
            [0.1, 0.1, 0.05, 0.025]
        );
    }

    #[test]
    fn cosine_reaches_alpha_and_stays() {
        let s = Schedule::cosine(1.0, 10, 0.1);
        assert_eq!(s.at(0), 1.0);
        assert!((s.at(5) - 0.55).abs() < 1e-6);
        assert!((s.at(10) - 0.1).abs() < 1e-6);
        assert_eq!(s.at(10), s.at(50));
    }

    #[test]
    fn warmup_is_linear_then_decays() {
        let s = Schedule::inverse_time(1.0, 1, 1.0, false).with_warmup(2, 0.5);
        assert_eq!([s.at(0), s.at(1), s.at(2), s.at(3)], [0.5, 0.75, 1.0, 0.5]);
    }
}
