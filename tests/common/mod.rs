//! Helpers shared by integration tests (each test uses some of them).
#![allow(dead_code)]

use fusegraph::optim::{keras, Part, PartMut};
use fusegraph::prelude::*;
use fusegraph::train::StatePart;

/// A small deterministic generator (xorshift64*), so tests need no extra crate.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// Uniform in [-1, 1).
    pub fn next_f32(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let bits = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40;
        (bits as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    pub fn vec(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.next_f32() * scale).collect()
    }
}

/// The bit patterns of a slice, for exact comparisons with readable failures.
pub fn bits(x: &[f32]) -> Vec<u32> {
    x.iter().map(|v| v.to_bits()).collect()
}

/// `f`'s result, run in a new pool of `threads` threads.
pub fn on_threads<R: Send>(threads: usize, f: impl FnOnce() -> R + Send) -> R {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
        .install(f)
}

/// Trains the model `make` builds with Keras' Adam for two steps on `x` and `y` (batches of up
/// to `B`) in a pool of two threads, and asserts that it gives the same bits of the losses,
/// the parameters after them and the input gradient in a pool of one thread; returns the two
/// losses.
pub fn assert_same_bits_on_one_and_two_threads<M: Model<Input = f32>, const B: usize>(
    make: impl Fn() -> M + Sync,
    x: &[f32],
    y: &[Target<M>],
) -> Vec<f32> {
    let run = |threads: usize| {
        on_threads(threads, || {
            let mut model = make();
            let mut step = TrainStep::<M, keras::Adam, B>::new(&model, keras::Adam::default());
            let losses: Vec<u32> = (0..2)
                .map(|_| step.run(&mut model, x, y).to_bits())
                .collect();
            let dx = bits(step.input_gradient(&model, x));
            (losses, bits(model.params()), dx)
        })
    };
    let (one, two) = (run(1), run(2));
    assert_eq!(one.0, two.0, "losses");
    assert!(one.1 == two.1, "parameters differ between 1 and 2 threads");
    assert!(
        one.2 == two.2,
        "input gradients differ between 1 and 2 threads"
    );
    one.0.into_iter().map(f32::from_bits).collect()
}

/// What a model's loss takes as targets.
pub type Target<M> = <<M as Model>::Loss as Loss>::Target;

/// Every parameter's gradient from `TrainStep::gradients` (an SGD step, 8 samples a batch)
/// against f64 central differences of the loss with step `h`: each within a relative 2e-2
/// (of at least 1e-2), and not all exactly equal (or the check would be vacuous). Returns the
/// gradients.
pub fn check_weights<M: Model<Input = f32>>(
    model: &mut M,
    x: &[f32],
    y: &[Target<M>],
    h: f32,
) -> Vec<f32> {
    let mut step = TrainStep::<M, keras::Sgd, 8>::new(model, keras::Sgd::default());
    step.gradients(model, x, y);
    let analytic = step.grads().to_vec();
    let mut worst = 0.0f64;
    for (i, &backward) in analytic.iter().enumerate() {
        let orig = model.params()[i];
        model.params_mut()[i] = orig + h;
        let up = f64::from(step.gradients(model, x, y));
        model.params_mut()[i] = orig - h;
        let down = f64::from(step.gradients(model, x, y));
        model.params_mut()[i] = orig;
        let numeric = (up - down) / (2.0 * f64::from(h));
        let err = (numeric - f64::from(backward)).abs() / numeric.abs().max(1e-2);
        worst = worst.max(err);
        assert!(
            err < 2e-2,
            "parameter {i}: backward {backward} vs differences {numeric}"
        );
    }
    assert!(
        worst > 0.0,
        "differences never moved: the check would be vacuous"
    );
    analytic
}

/// The gradient of the loss by each input from `TrainStep::loss_input_gradient` against f64
/// central differences of `evaluate`'s loss with step `h`: each within a relative 2e-2 (of at
/// least `floor`).
pub fn check_loss_input_gradient<M: Model<Input = f32>>(
    model: &M,
    x: &[f32],
    y: &[Target<M>],
    h: f32,
    floor: f64,
) {
    let mut step = TrainStep::<M, keras::Sgd, 8>::new(model, keras::Sgd::default());
    let dx = step.loss_input_gradient(model, x, y).to_vec();
    let mut loss = |x: &[f32]| f64::from(step.evaluate(model, x, y).loss);
    for i in 0..x.len() {
        let (mut up, mut down) = (x.to_vec(), x.to_vec());
        up[i] += h;
        down[i] -= h;
        let numeric = (loss(&up) - loss(&down)) / (2.0 * f64::from(h));
        assert!(
            (numeric - f64::from(dx[i])).abs() < 2e-2 * numeric.abs().max(floor),
            "x[{i}]: {} vs {numeric}",
            dx[i]
        );
    }
}

/// Every part of a train step's state ([`Step::state_parts`]) with the bits of its values.
pub fn state_bits<M: Model, R: Rule, const B: usize>(
    model: &M,
    step: &TrainStep<M, R, B>,
) -> Vec<(StatePart, Vec<u64>)> {
    step.state_parts()
        .map(|part| {
            let values = match step.part(model, part) {
                Part::Floats(v) => v.iter().map(|x| u64::from(x.to_bits())).collect(),
                Part::Word(w) => vec![w],
            };
            (part, values)
        })
        .collect()
}

/// Gives every value of every part of a train step's state a value of its own (from `salt`,
/// the part and the index), which no fresh step holds.
pub fn mark_every_part<M: Model, R: Rule, const B: usize>(
    model: &mut M,
    step: &mut TrainStep<M, R, B>,
    salt: u64,
) {
    for (k, part) in step.state_parts().enumerate() {
        let mark = salt * 1000 + k as u64 * 100;
        match step.part_mut(model, part) {
            PartMut::Floats(v) => {
                for (i, x) in v.iter_mut().enumerate() {
                    *x = (mark + i as u64) as f32 * 0.125;
                }
            }
            PartMut::Word(w) => *w = mark + 7,
        }
    }
}

/// The mean of `[T, F]` values over each sample's real steps (`ctx.lengths`), 0 gradient at
/// the padded ones: `MeanOverTime` honouring lengths, written against the lengths contract
/// (`Layer::STEPS`, `Ctx::lengths`) alone.
pub struct RealMean<const T: usize, const F: usize>;

impl<const T: usize, const F: usize> Layer for RealMean<T, F> {
    const IN: usize = T * F;
    const OUT: usize = F;
    const PARAMS: usize = 0;
    const STATE: usize = 0;
    const SAVED: usize = 0;
    const TENSORS: &'static [Tensor] = &[];
    const STEPS: usize = T;

    fn describe(out: &mut dyn core::fmt::Write) -> core::fmt::Result {
        write!(out, "RealMean<{T}, {F}>")
    }
    fn forward(ctx: &mut Ctx<'_>, io: Forward<'_>) {
        for b in 0..io.batch {
            let real = ctx.lengths.of(b, T);
            let y = &mut io.y[b * F..(b + 1) * F];
            y.fill(0.0);
            for step in io.x[b * T * F..].chunks(F).take(real) {
                y.iter_mut().zip(step).for_each(|(y, &v)| *y += v);
            }
            y.iter_mut().for_each(|y| *y /= real as f32);
        }
    }
    fn backward(ctx: &mut Ctx<'_>, io: Backward<'_>) {
        let Some(dx) = io.dx.accumulator() else {
            return;
        };
        for b in 0..io.batch {
            let real = ctx.lengths.of(b, T);
            let dy = &io.dy[b * F..(b + 1) * F];
            for step in dx[b * T * F..].chunks_mut(F).take(real) {
                step.iter_mut()
                    .zip(dy)
                    .for_each(|(d, &g)| *d += g / real as f32);
            }
        }
    }
}
