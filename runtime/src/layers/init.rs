//! Parameter initialization: [`init_tensor`] fills one tensor according to an [`Init`].

use super::{Init, Tensor};
use crate::math;
use crate::rng::Rng;

/// `scipy.stats.truncnorm.std(a=-2, b=2)`: the standard deviation of a standard normal cut at
/// two standard deviations. Keras divides by it so that its truncated initializers keep the
/// variance they are named for.
const TRUNCATED_STD: f64 = 0.879_625_661_034_239_8;

/// Fills `out` (the tensor's values, `t.len()` of them) according to `init`, drawing from
/// `rng` value after value, with the fans of `t`:
///
/// - [`Init::GlorotUniform`]: uniform in `±sqrt(6 / (fan_in + fan_out))`;
/// - [`Init::HeNormal`]: a normal of standard deviation `sqrt(2 / fan_in) / 0.8796...`,
///   redrawn outside two of its standard deviations: after truncation the standard deviation
///   is `sqrt(2 / fan_in)`, as Keras' `he_normal` computes it;
/// - [`Init::HeUniform`]: uniform in `±sqrt(6 / fan_in)`;
/// - [`Init::TorchDefault`]: uniform in `±1 / sqrt(fan_in)` (PyTorch's `Linear` and `Conv2d`,
///   whose biases use the weight's fan-in, which is why layers give a bias the weight's fans);
/// - [`Init::StandardNormal`]: `N(0, 1)`, whatever the fans;
/// - [`Init::Zeros`], [`Init::Ones`], [`Init::Constant`]: constants, without drawing.
///
/// A fan of 0 counts as 1.
///
/// ```
/// use fusegraph_runtime::layers::{init_tensor, Dense, Init, Layer};
/// use fusegraph_runtime::rng::{Rng, Seed};
///
/// let weight = &<Dense<4, 2>>::TENSORS[0];
/// let mut w = [0.0; 8];
/// init_tensor(weight, weight.init, &mut w, &mut Rng::new(Seed(1)));
/// assert!(w.iter().all(|v| v.abs() <= 1.0)); // sqrt(6 / (4 + 2))
/// ```
///
/// # Panics
/// If `out` does not hold `t.len()` values.
pub fn init_tensor(t: &Tensor, init: Init, out: &mut [f32], rng: &mut Rng) {
    if init.draws_normal() {
        init_normal(t, init, out, rng);
    } else {
        init_without_normal(t, init, out, rng);
    }
}

/// [`init_tensor`] for an `init` that does not [draw from a normal](Init::draws_normal): the
/// normal sampler (Box-Muller's logarithm and cosine in `f64`) is not linked where only this
/// is called, as on a microcontroller whose model has no such tensor.
///
/// # Panics
/// If `init` draws from a normal distribution, or `out` does not hold `t.len()` values.
pub fn init_without_normal(t: &Tensor, init: Init, out: &mut [f32], rng: &mut Rng) {
    check_length(t, out);
    let (fan_in, fan_out) = fans(t);
    let uniform = |limit: f32, out: &mut [f32], rng: &mut Rng| {
        out.iter_mut().for_each(|v| *v = rng.uniform(-limit, limit));
    };
    match init {
        Init::GlorotUniform => uniform(math::sqrt(6.0 / (fan_in + fan_out)), out, rng),
        Init::HeUniform => uniform(math::sqrt(6.0 / fan_in), out, rng),
        Init::TorchDefault => uniform(1.0 / math::sqrt(fan_in), out, rng),
        Init::HeNormal | Init::StandardNormal => {
            panic!("init_without_normal: `{}` draws from a normal", t.name)
        }
        Init::Zeros => out.fill(0.0),
        Init::Ones => out.fill(1.0),
        Init::Constant(bits) => out.fill(f32::from_bits(bits)),
    }
}

/// [`init_tensor`] for the initializers that draw from a normal distribution.
fn init_normal(t: &Tensor, init: Init, out: &mut [f32], rng: &mut Rng) {
    check_length(t, out);
    match init {
        Init::HeNormal => {
            let std = (math::sqrt(2.0 / f64::from(fans(t).0)) / TRUNCATED_STD) as f32;
            out.iter_mut().for_each(|v| *v = rng.truncated_normal(std));
        }
        Init::StandardNormal => out.iter_mut().for_each(|v| *v = rng.normal()),
        _ => unreachable!("init_normal is called for the normal initializers alone"),
    }
}

/// `(fan_in, fan_out)` of `t`, a fan of 0 counting as 1.
fn fans(t: &Tensor) -> (f32, f32) {
    (t.fans.0.max(1) as f32, t.fans.1.max(1) as f32)
}

fn check_length(t: &Tensor, out: &[f32]) {
    assert_eq!(
        out.len(),
        t.len(),
        "init_tensor: `{}` has {} values, the buffer {}",
        t.name,
        t.len(),
        out.len()
    );
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::rng::Seed;
    use std::vec;

    const T: Tensor = Tensor {
        name: "weight",
        shape: &[200, 100],
        fans: (200, 100),
        init: Init::GlorotUniform,
    };

    fn moments(init: Init) -> (f64, f64, f32) {
        let mut v = vec![f32::NAN; T.len()];
        init_tensor(&T, init, &mut v, &mut Rng::new(Seed(9)));
        let n = v.len() as f64;
        let mean = v.iter().map(|&x| f64::from(x)).sum::<f64>() / n;
        let var = v
            .iter()
            .map(|&x| (f64::from(x) - mean).powi(2))
            .sum::<f64>()
            / n;
        let max = v.iter().fold(0.0f32, |m, x| m.max(x.abs()));
        (mean, var.sqrt(), max)
    }

    #[test]
    fn each_initializer_has_its_bounds_and_spread() {
        // Uniform in ±l has standard deviation l / sqrt(3).
        let cases = [
            (Init::GlorotUniform, (6.0f64 / 300.0).sqrt()),
            (Init::HeUniform, (6.0f64 / 200.0).sqrt()),
            (Init::TorchDefault, (1.0f64 / 200.0).sqrt()),
        ];
        for (init, limit) in cases {
            let (mean, std, max) = moments(init);
            assert!(f64::from(max) <= limit, "{init:?}");
            assert!(f64::from(max) > 0.99 * limit, "{init:?}");
            assert!(mean.abs() < 0.01 * limit, "{init:?}");
            assert!((std / (limit / 3f64.sqrt()) - 1.0).abs() < 0.02, "{init:?}");
        }
        let (mean, std, max) = moments(Init::HeNormal);
        let target = (2.0f64 / 200.0).sqrt();
        assert!(mean.abs() < 0.01 * target);
        assert!((std / target - 1.0).abs() < 0.02, "{std} vs {target}");
        let bound = 2.0 * target / TRUNCATED_STD;
        assert!(f64::from(max) <= bound * (1.0 + 1e-6) && f64::from(max) > 0.95 * bound);
        let (mean, std, max) = moments(Init::StandardNormal);
        assert!(
            mean.abs() < 0.01 && (std - 1.0).abs() < 0.02,
            "{mean} {std}"
        );
        assert!(max > 3.5, "20000 draws of N(0, 1) reach past 3.5: {max}");
        assert_eq!(moments(Init::Zeros), (0.0, 0.0, 0.0));
        assert_eq!(moments(Init::Ones), (1.0, 0.0, 1.0));
        assert_eq!(moments(Init::constant(-0.25)), (-0.25, 0.0, 0.25));
    }

    /// The path without the normal sampler gives the bits of `init_tensor` for every
    /// initializer that does not draw from a normal, and refuses the two that do.
    #[test]
    fn without_normal_matches_init_tensor_and_refuses_normals() {
        let inits = [
            Init::GlorotUniform,
            Init::HeUniform,
            Init::TorchDefault,
            Init::Zeros,
            Init::Ones,
            Init::constant(0.25),
        ];
        for init in inits {
            assert!(!init.draws_normal());
            let (mut a, mut b) = (vec![f32::NAN; T.len()], vec![f32::NAN; T.len()]);
            init_tensor(&T, init, &mut a, &mut Rng::new(Seed(3)));
            init_without_normal(&T, init, &mut b, &mut Rng::new(Seed(3)));
            assert!(
                a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()),
                "{init:?}"
            );
        }
        for init in [Init::HeNormal, Init::StandardNormal] {
            assert!(init.draws_normal());
            let refused = std::panic::catch_unwind(|| {
                init_without_normal(&T, init, &mut vec![0.0; T.len()], &mut Rng::new(Seed(3)));
            });
            assert!(refused.is_err(), "{init:?}");
        }
    }

    #[test]
    fn same_seed_same_values() {
        let mut a = [0.0; 16];
        let mut b = [0.0; 16];
        let t = Tensor { shape: &[16], ..T };
        init_tensor(&t, Init::HeNormal, &mut a, &mut Rng::new(Seed(3)));
        init_tensor(&t, Init::HeNormal, &mut b, &mut Rng::new(Seed(3)));
        assert_eq!(a, b);
    }
}
