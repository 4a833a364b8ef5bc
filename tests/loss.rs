//! `loss!`: gradients against `f64` central finite differences, the built-in losses rewritten
//! with the macro against the hand-written ones, tail handling over lengths 0..=17 and 1000,
//! and a regression model that trains with a generated loss.

mod common;

use common::{bits, Rng};
use fusegraph::loss::{BinaryCrossEntropyWithLogits, Huber, Loss, Mae, Mse};
use fusegraph::optim::keras;
use fusegraph::prelude::*;

fusegraph::loss! {
    /// The built-in `Mse`, rewritten.
    pub MacroMse(pred, target) = (pred - target) * (pred - target);

    /// The built-in `Mae`, rewritten.
    pub MacroMae(pred, target) = abs(pred - target);

    /// The built-in `Huber` (delta 1), rewritten.
    pub MacroHuber { delta: f32 = 1.0 } (pred, target) = {
        let d = abs(pred - target);
        if d <= delta { 0.5 * d * d } else { delta * (d - 0.5 * delta) }
    };

    /// The built-in `BinaryCrossEntropyWithLogits`, rewritten stably.
    pub MacroBce(z, y) = max(z, 0.0) - z * y + ln(1.0 + exp(-abs(z)));

    /// Log-cosh.
    pub LogCosh(pred, target) = ln(cosh(pred - target));

    /// A squared error weighted by a constant.
    pub WeightedMse {
        /// The weight.
        w: f32 = 2.5,
    } (pred, target) = w * (pred - target) * (pred - target);

    /// The squared error, summed.
    pub SumSquared(pred, target) = (pred - target) * (pred - target), reduce = sum;

    /// The pinball (quantile) loss of quantile `tau`.
    pub Pinball { tau: f32 = 0.8 } (pred, target) = {
        let e = target - pred;
        max(tau * e, (tau - 1.0) * e)
    };

    /// A squared error relative to the target's size.
    pub Relative(pred, target) = (pred - target) * (pred - target) / (target * target + 1.0);
}

const LENGTHS: [usize; 19] = [
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 1000,
];

/// Predictions and targets of `len` elements; `target01` puts targets in [0, 1] (binary
/// cross-entropy); every `pred - target` stays at least 0.05 away from each of `kinks`.
fn data(len: usize, seed: u64, target01: bool, kinks: &[f64]) -> (Vec<f32>, Vec<f32>) {
    let mut rng = Rng::new(seed + len as u64);
    let target: Vec<f32> = if target01 {
        rng.vec(len, 0.5).iter().map(|t| t + 0.5).collect()
    } else {
        rng.vec(len, 2.0)
    };
    let pred = rng
        .vec(len, 3.0)
        .into_iter()
        .zip(&target)
        .map(|(mut p, &t)| {
            while kinks
                .iter()
                .any(|k| (f64::from(p) - f64::from(t) - k).abs() < 0.05)
            {
                p += 0.125;
            }
            p
        })
        .collect();
    (pred, target)
}

/// Checks `L` against its element function `f` in `f64`: the value (relative 1e-6), the
/// gradient against central differences (relative 1e-4 of the element's derivative, plus
/// 1e-6), `loss` equal to `loss_and_grad`'s value bit for bit.
fn check<L: Loss<Target = f32>>(name: &str, f: fn(f64, f64) -> f64, mean: bool, kinks: &[f64]) {
    let target01 = name == "bce";
    for len in LENGTHS {
        let (pred, target) = data(len, 11, target01, kinks);
        let mut grad = vec![f32::NAN; len];
        let value = L::loss_and_grad(&pred, &target, &mut grad, 1);
        assert_eq!(
            value.to_bits(),
            L::loss(&pred, &target, 1).to_bits(),
            "{name}: loss and loss_and_grad agree"
        );
        let count = if mean { len.max(1) as f64 } else { 1.0 };
        let want: f64 = pred
            .iter()
            .zip(&target)
            .map(|(&p, &t)| f(f64::from(p), f64::from(t)))
            .sum::<f64>()
            / count;
        assert!(
            (f64::from(value) - want).abs() <= 1e-6 * want.abs() + 1e-9,
            "{name} len {len}: value {value} vs {want}"
        );
        for (j, (&p, &t)) in pred.iter().zip(&target).enumerate() {
            let (p, t) = (f64::from(p), f64::from(t));
            let h = 1e-6;
            let num = (f(p + h, t) - f(p - h, t)) / (2.0 * h);
            let g = f64::from(grad[j]) * count;
            assert!(
                (g - num).abs() <= 1e-4 * num.abs() + 1e-6,
                "{name} len {len}: grad[{j}] = {g} (times the count), numerically {num}"
            );
        }
    }
}

#[test]
fn gradients_match_finite_differences() {
    check::<MacroMse>("mse", |p, t| (p - t) * (p - t), true, &[]);
    check::<MacroMae>("mae", |p, t| (p - t).abs(), true, &[0.0]);
    check::<MacroHuber>(
        "huber",
        |p, t| {
            let d = (p - t).abs();
            if d <= 1.0 {
                0.5 * d * d
            } else {
                d - 0.5
            }
        },
        true,
        &[0.0, -1.0, 1.0],
    );
    check::<MacroBce>(
        "bce",
        |z, y| z.max(0.0) - z * y + (-z.abs()).exp().ln_1p(),
        true,
        &[],
    );
    check::<LogCosh>("log-cosh", |p, t| (p - t).cosh().ln(), true, &[]);
    check::<WeightedMse>("weighted", |p, t| 2.5 * (p - t) * (p - t), true, &[]);
    check::<SumSquared>("sum", |p, t| (p - t) * (p - t), false, &[]);
    check::<Pinball>(
        "pinball",
        |p, t| {
            let tau = f64::from(0.8f32);
            let e = t - p;
            (tau * e).max((tau - 1.0) * e)
        },
        true,
        &[0.0],
    );
    check::<Relative>(
        "relative",
        |p, t| (p - t) * (p - t) / (t * t + 1.0),
        true,
        &[],
    );
}

/// Compares a macro loss with the built-in it rewrites: values and gradients to relative
/// `tol` of the element's scale, with `pred` exactly at each of `at` included.
fn against_builtin<A: Loss<Target = f32>, B: Loss<Target = f32>>(name: &str, tol: f64, at: f32) {
    for len in LENGTHS {
        let (mut pred, target) = data(len, 5, name == "bce", &[]);
        if let Some(p) = pred.first_mut() {
            *p = target[0] + at; // a kink or a tie
        }
        let (mut ga, mut gb) = (vec![f32::NAN; len], vec![f32::NAN; len]);
        let a = A::loss_and_grad(&pred, &target, &mut ga, 1);
        let b = B::loss_and_grad(&pred, &target, &mut gb, 1);
        let (a, b) = (f64::from(a), f64::from(b));
        assert!(
            (a - b).abs() <= tol * b.abs() + 1e-9,
            "{name} len {len}: {a} vs {b}"
        );
        let scale = 1.0 / len.max(1) as f64;
        for (j, (x, y)) in ga.iter().zip(&gb).enumerate() {
            let (x, y) = (f64::from(*x), f64::from(*y));
            assert!(
                (x - y).abs() <= tol * (y.abs() + scale),
                "{name} len {len}: grad[{j}] {x} vs {y}"
            );
        }
        assert_eq!(A::targets_per_sample(5), 5);
        assert_eq!(A::correct(&pred, &target, 1), None);
    }
}

#[test]
fn rewritten_builtins_match_the_hand_written_ones() {
    against_builtin::<MacroMse, Mse>("mse", 1e-6, 0.0);
    against_builtin::<MacroMae, Mae>("mae", 1e-6, 0.0);
    against_builtin::<MacroHuber, Huber>("huber", 1e-6, 1.0);
    against_builtin::<MacroBce, BinaryCrossEntropyWithLogits>("bce", 1e-6, 0.0);
}

#[test]
fn kinks_follow_pytorch() {
    // `abs` has derivative 0 at 0, as `torch.nn.L1Loss` gives it.
    let mut g = [f32::NAN; 2];
    assert_eq!(
        MacroMae::loss_and_grad(&[1.0, 2.0], &[1.0, 0.0], &mut g, 1),
        1.0
    );
    assert_eq!(g, [0.0, 0.5]);
    // `max(z, 0)` gives half to each side at 0: the gradient is `sigmoid(0) - y`.
    let mut g = [f32::NAN; 2];
    MacroBce::loss_and_grad(&[0.0, 0.0], &[1.0, 0.25], &mut g, 2);
    assert_eq!(g, [-0.25, 0.125]);
    // Large logits stay finite.
    let z = [80.0, -80.0, 1e30, -1e30];
    let mut g = [f32::NAN; 4];
    let l = MacroBce::loss_and_grad(&z, &[0.0, 1.0, 1.0, 0.0], &mut g, 1);
    assert_eq!(l, 40.0);
    assert_eq!(g, [0.25, -0.25, 0.0, 0.0]);
}

#[test]
fn mae_gradients_are_bit_identical_to_the_builtin() {
    // `sign(pred - target) / count`: the same number whether computed in `f32` or `f64`.
    for len in LENGTHS {
        let (pred, target) = data(len, 3, false, &[]);
        let (mut ga, mut gb) = (vec![f32::NAN; len], vec![f32::NAN; len]);
        MacroMae::loss_and_grad(&pred, &target, &mut ga, 1);
        Mae::loss_and_grad(&pred, &target, &mut gb, 1);
        assert_eq!(bits(&ga), bits(&gb), "len {len}");
    }
}

#[test]
fn an_element_gives_the_same_bits_wherever_it_sits() {
    // With `reduce = sum` the gradient is the derivative itself: each element's must not
    // depend on the length or on its place in a lane or in the padded tail.
    let (pred, target) = data(1000, 9, false, &[]);
    let mut full = vec![f32::NAN; 1000];
    SumSquared::loss_and_grad(&pred, &target, &mut full, 1);
    for len in LENGTHS {
        for start in [0, 3, 8, 500].into_iter().filter(|s| s + len <= 1000) {
            let (p, t) = (&pred[start..start + len], &target[start..start + len]);
            let mut g = vec![f32::NAN; len];
            SumSquared::loss_and_grad(p, t, &mut g, 1);
            assert_eq!(
                bits(&g),
                bits(&full[start..start + len]),
                "len {len} at {start}"
            );
        }
    }
    let mut g = [f32::NAN; 1];
    LogCosh::loss_and_grad(&[0.5], &[0.5], &mut g, 1);
    assert_eq!(g, [0.0]);
    assert_eq!(WeightedMse::W, 2.5);
    assert_eq!(Pinball::TAU, 0.8);
}

/// A regression model trained with a generated loss.
#[fusegraph::model(loss = LogCosh)]
pub struct Regressor {
    fc1: Dense<3, 16, Tanh>,
    fc2: Dense<16, 2>,
}

#[test]
fn a_model_trains_with_a_generated_loss() {
    let mut rng = Rng::new(1);
    let x = rng.vec(64 * 3, 1.0);
    let y: Vec<f32> = x
        .chunks(3)
        .flat_map(|s| [s[0] - 2.0 * s[1] + 0.5, s[2] * s[0]])
        .collect();
    let mut model = Regressor::init(Seed(3));
    let mut step =
        TrainStep::<Regressor, keras::Adam, 64>::new(&model, keras::Adam::default().with_lr(0.02));
    let first = step.run(&mut model, &x, &y);
    for _ in 0..300 {
        step.run(&mut model, &x, &y);
    }
    let last = step.evaluate(&model, &x, &y).loss;
    assert!(last < 0.05 * first, "{first} -> {last}");
}

/// Generated code names nothing the user can shadow, and raises no warning.
mod hygiene {
    #![deny(warnings)]
    #![allow(dead_code, non_camel_case_types)]

    struct Option;
    struct f32x8;
    type Result = ();
    fn sqrt() {}
    fn lanes_loss() {}

    fusegraph::loss! {
        /// Shadowed names all around.
        pub(crate) Shadowed { one: f32 = 1.0 } (pred, target) = sqrt(abs(pred - target) + one);
    }

    #[test]
    fn generated_code_is_hygienic() {
        use fusegraph::loss::Loss;
        let mut g = [0.0; 1];
        assert_eq!(Shadowed::loss_and_grad(&[3.0], &[0.0], &mut g, 1), 2.0);
        assert_eq!(g, [0.25]);
    }
}
