//! What `optimizer!` should emit, written by hand: Keras Adam as a plain `Rule` implementation
//! (step scalars computed once, lifted `f64(1 - beta)` factors, an `f32x8` lane body). The
//! macro-generated `keras::Adam` must behave identically, bit for bit, with the same metadata.
//!
//! The same for `activation!`: Swish (`x * sigmoid(x)`) as a hand-written `Elementwise`, with
//! the sigmoid computed once and the derivative `s + y (1 - s)` reading the output `y`, as the
//! built-in `layers::Swish` was written before the macro wrote it. (The macro crate's unit tests
//! compare the token streams themselves.)

mod common;

use common::{bits, Rng};
use fusegraph::lane::Lane;
use fusegraph::layers::{Activation, Elementwise, Swish};
use fusegraph::optim::{keras, LearningRate, Optimizer, Rule};
use fusegraph_runtime::math;

#[derive(Clone, Copy, Debug, PartialEq)]
struct HandAdam {
    lr: f32,
    beta_1: f32,
    beta_2: f32,
    epsilon: f32,
}

#[derive(Clone, Copy)]
struct HandStep {
    one_minus_beta_1: f32,
    one_minus_beta_2: f32,
    alpha: f32,
    epsilon: f32,
}

impl LearningRate for HandAdam {
    fn lr(&self) -> f32 {
        self.lr
    }

    fn set_lr(&mut self, lr: f32) {
        self.lr = lr;
    }
}

impl Rule for HandAdam {
    const NAME: &'static str = "Adam";
    const HYPER: &'static [&'static str] = &["lr", "beta_1", "beta_2", "epsilon"];
    const SLOTS: &'static [&'static str] = &["momentum", "velocity"];
    const CARRIED: &'static [&'static str] = &[];
    type Step = HandStep;
    type Decimals = [math::Decimal; 2];

    fn hyper(&self, name: &str) -> Option<f32> {
        match name {
            "lr" => Some(self.lr),
            "beta_1" => Some(self.beta_1),
            "beta_2" => Some(self.beta_2),
            "epsilon" => Some(self.epsilon),
            _ => None,
        }
    }

    fn set_hyper(&mut self, name: &str, value: f32) -> bool {
        match name {
            "lr" => self.lr = value,
            "beta_1" => self.beta_1 = value,
            "beta_2" => self.beta_2 = value,
            "epsilon" => self.epsilon = value,
            _ => return false,
        }
        true
    }

    fn learning_rate(&self) -> Option<f32> {
        Some(self.lr)
    }

    fn learning_rate_mut(&mut self) -> Option<&mut f32> {
        Some(&mut self.lr)
    }

    fn slot_init(&self, _: usize) -> f32 {
        0.0
    }

    fn carried_init(&self, _: usize) -> f32 {
        0.0
    }

    fn begin_step(&self, t: u64, _: &mut [f32], decimals: &mut [math::Decimal; 2]) -> HandStep {
        let t = t as f32;
        let alpha = self.lr * math::sqrt(1.0 - math::powf(self.beta_2, t))
            / (1.0 - math::powf(self.beta_1, t));
        HandStep {
            one_minus_beta_1: (1.0 - decimals[0].of(self.beta_1)) as f32,
            one_minus_beta_2: (1.0 - decimals[1].of(self.beta_2)) as f32,
            alpha,
            epsilon: self.epsilon,
        }
    }

    #[inline(always)]
    fn update<L: Lane>(s: &HandStep, p: &mut L, g: L, slots: &mut [L]) {
        let mut m = slots[0];
        let mut v = slots[1];
        m += (g - m) * L::splat(s.one_minus_beta_1);
        v += (g * g - v) * L::splat(s.one_minus_beta_2);
        *p -= m * L::splat(s.alpha) / (v.sqrt() + L::splat(s.epsilon));
        slots[0] = m;
        slots[1] = v;
    }
}

#[test]
fn generated_adam_matches_the_hand_written_expansion() {
    let lr = 0.003;
    let generated = keras::Adam::default().with_lr(lr);
    let hand = HandAdam {
        lr,
        beta_1: 0.9,
        beta_2: 0.999,
        epsilon: 1e-7,
    };
    assert_eq!(keras::Adam::HYPER, HandAdam::HYPER);
    assert_eq!(keras::Adam::SLOTS, HandAdam::SLOTS);
    assert_eq!(keras::Adam::NAME, HandAdam::NAME);
    for name in HandAdam::HYPER {
        assert_eq!(generated.hyper(name), hand.hyper(name), "{name}");
    }
    assert_eq!(generated.hyper("missing"), None);

    let n = 1029;
    let mut rng = Rng::new(99);
    let mut a = rng.vec(n, 1.0);
    let mut b = a.clone();
    let mut opt_a = Optimizer::new(generated, &[n]);
    let mut opt_b = Optimizer::new(hand, &[n]);
    for _ in 0..20 {
        let g = rng.vec(n, 0.1);
        opt_a.step(&mut a, &g);
        opt_b.step(&mut b, &g);
    }
    assert_eq!(bits(&a), bits(&b));
    assert_eq!(
        bits(opt_a.slot("velocity").unwrap()),
        bits(opt_b.slot("velocity").unwrap())
    );
}

/// What `activation!` should emit for Swish, written by hand.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct HandSwish;

impl Elementwise for HandSwish {
    const NAME: &'static str = "swish";
    // The derivative reads `sigmoid(z)`.
    const NEEDS_Z: bool = true;

    #[inline(always)]
    fn lane<L: Lane>(x: L) -> L {
        x * fusegraph_runtime::lane::sigmoid(x)
    }

    #[inline(always)]
    fn lane_grad<L: Lane>(z: L, y: L) -> L {
        // d(x s) = s + x s (1 - s), and x s is y: no more work than by hand.
        let s = fusegraph_runtime::lane::sigmoid(z);
        s + y * (L::splat(1.0) - s)
    }
}

#[test]
fn generated_swish_matches_the_hand_written_expansion() {
    assert_eq!(<Swish as Activation>::NAME, <HandSwish as Activation>::NAME);
    assert_eq!(
        <Swish as Activation>::NEEDS_Z,
        <HandSwish as Activation>::NEEDS_Z
    );
    let mut rng = Rng::new(5);
    let mut z = rng.vec(1027, 8.0);
    z.extend([0.0, -0.0, 1e-40, -1e-40, 90.0, -90.0, f32::MAX, f32::MIN]);
    let run = |f: fn(&[f32], &mut [f32], usize), b: fn(&[f32], &[f32], &mut [f32], usize)| {
        let mut y = vec![0.0; z.len()];
        f(&z, &mut y, 7);
        let mut dy = upstream(z.len());
        b(&z, &y, &mut dy, 7);
        (bits(&y), bits(&dy))
    };
    assert_eq!(
        run(
            <Swish as Activation>::forward,
            <Swish as Activation>::backward
        ),
        run(
            <HandSwish as Activation>::forward,
            <HandSwish as Activation>::backward
        )
    );
}

/// Upstream gradients, not all ones so that the product with the derivative is exercised.
fn upstream(n: usize) -> Vec<f32> {
    (0..n).map(|i| 1.0 + (i % 5) as f32 * 0.25).collect()
}
