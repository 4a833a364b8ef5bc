//! A rule no built-in has, in a dozen lines: AdaBelief (Zhuang et al., NeurIPS 2020), used to
//! fit a least-squares problem beside the built-in `keras::Adam`.
//!
//! ```text
//! cargo run --release --example custom_optimizer
//! ```
//!
//! AdaBelief is Adam with a different second moment: instead of the EMA of `g^2` it tracks the
//! EMA of `(g - m)^2`, how far the gradient strays from its own average (the "belief"). Steps
//! are large where the gradient is predictable and small where it is noisy.
//!
//! # What `optimizer!` generates
//!
//! From the block below the macro writes, at compile time, code you could have written by hand:
//! - `pub struct AdaBelief { pub lr: f32, pub beta1: f32, pub beta2: f32, pub eps: f32 }` with
//!   the doc comment given, `Clone`, `Copy`, `Debug`, `PartialEq`, and `Default` from the
//!   declared defaults;
//! - the builders `with_lr`, `with_beta1`, `with_beta2`, `with_eps`;
//! - inside `const _: () = { ... };`, an `impl fusegraph::optim::Rule for AdaBelief`: the names
//!   of the hyper-parameters and of the slots (`m`, `s`: one flat buffer each, as long as the
//!   parameters, filled with the initial value once by `Optimizer::new`); a struct `__Step` of
//!   the scalars the update reads, which `begin_step` computes once per step from the
//!   hyper-parameters and `t` by running the `step` block (a hyper-parameter it reads in `f64`
//!   is widened to its decimal value once, when it changes, and kept in `Decimals`): here `1 - beta1`, `1 - beta2`,
//!   `eps`, `lr / bc1` and `bc2_sqrt`, every scalar sub-expression of `update` lifted out of
//!   the element loop; and `update`, the `update` block as straight-line `wide::f32x8` code for
//!   one lane of eight elements, each scalar read as a splat; `learning_rate` and
//!   `learning_rate_mut`, the field `lr`, which a schedule sets;
//! - since the rule has an `lr`, an `impl fusegraph::optim::LearningRate for AdaBelief` (`lr`,
//!   `set_lr`), which the learning-rate callbacks of `fit` require.
//!
//! `Optimizer::step` calls that lane update from its one fused pass over the parameters, the
//! gradient and both slots (split across rayon for large buffers), so the step reads and writes
//! each buffer once and allocates nothing. To read the generated code:
//!
//! ```text
//! cargo install cargo-expand
//! cargo expand --example custom_optimizer
//! ```

use fusegraph::optim::{keras, Optimizer};

fusegraph::optimizer! {
    /// AdaBelief: Adam whose second moment is the EMA of `(g - m)^2`.
    pub struct AdaBelief {
        hyper  { lr: f32 = 1e-3, beta1: f32 = 0.9, beta2: f32 = 0.999, eps: f32 = 1e-16 }
        slots  { m = 0.0, s = 0.0 }
        step   {
            let bc1 = 1.0 - beta1.powi(t);
            let bc2_sqrt = (1.0 - beta2.powi(t)).sqrt();
        }
        update {
            m += (g - m) * (1.0 - beta1);
            let d = g - m;
            s += (d * d - s) * (1.0 - beta2) + eps;
            p -= lr / bc1 * m / (s.sqrt() / bc2_sqrt + eps);
        }
    }
}

/// Samples of the least-squares problem.
const ROWS: usize = 256;
/// Unknowns.
const COLS: usize = 16;
/// Optimizer steps.
const STEPS: usize = 500;

/// A deterministic value in `[-1, 1)`.
fn uniform(i: usize) -> f32 {
    let mut x = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 31;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 29;
    (x >> 40) as f32 / (1u64 << 23) as f32 - 1.0
}

/// `0.5 * mean((X w - y)^2)`; writes its gradient `X^T (X w - y) / ROWS` into `grad`.
fn loss_and_grad(x: &[f32], y: &[f32], w: &[f32], grad: &mut [f32]) -> f32 {
    grad.fill(0.0);
    let mut loss = 0.0;
    for (row, &target) in x.chunks_exact(COLS).zip(y) {
        let r = row.iter().zip(w).map(|(a, b)| a * b).sum::<f32>() - target;
        loss += 0.5 * r * r;
        for (gj, &xj) in grad.iter_mut().zip(row) {
            *gj += r * xj;
        }
    }
    grad.iter_mut().for_each(|gj| *gj /= ROWS as f32);
    loss / ROWS as f32
}

fn main() {
    // y = X w_true + noise, with correlated columns so that the problem is ill-conditioned.
    let mut x: Vec<f32> = (0..ROWS * COLS).map(uniform).collect();
    for row in x.chunks_exact_mut(COLS) {
        for j in 1..COLS {
            row[j] = 0.7 * row[j - 1] + 0.3 * row[j];
        }
    }
    let w_true: Vec<f32> = (0..COLS).map(|j| uniform(1_000_000 + j) * 2.0).collect();
    let y: Vec<f32> = x
        .chunks_exact(COLS)
        .enumerate()
        .map(|(i, row)| {
            let clean: f32 = row.iter().zip(&w_true).map(|(a, b)| a * b).sum();
            clean + 0.01 * uniform(2_000_000 + i)
        })
        .collect();

    let noise_floor: f32 = (0..ROWS)
        .map(|i| 0.5 * (0.01 * uniform(2_000_000 + i)).powi(2))
        .sum::<f32>()
        / ROWS as f32;

    // Every buffer is allocated here, once: the weights, their gradient, the slots. The
    // built-in Keras Adam runs beside AdaBelief on the same problem, with the same step size.
    let rule = AdaBelief::default().with_lr(3e-2);
    let mut belief = Optimizer::new(rule, &[COLS]);
    let mut adam = Optimizer::new(keras::Adam::default().with_lr(3e-2), &[COLS]);
    let mut w_belief = vec![0.0_f32; COLS];
    let mut w_adam = vec![0.0_f32; COLS];
    let mut grad = vec![0.0_f32; COLS];
    println!("{rule:?} on a {ROWS}x{COLS} least-squares fit");
    println!("{:>6} {:>12} {:>12}", "step", "AdaBelief", "keras::Adam");
    for t in 0..=STEPS {
        let loss_belief = loss_and_grad(&x, &y, &w_belief, &mut grad);
        belief.step(&mut w_belief, &grad);
        let loss_adam = loss_and_grad(&x, &y, &w_adam, &mut grad);
        adam.step(&mut w_adam, &grad);
        if t % (STEPS / 10) == 0 {
            println!("{t:>6} {loss_belief:>12.3e} {loss_adam:>12.3e}");
        }
    }
    let err = w_belief
        .iter()
        .zip(&w_true)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0_f32, f32::max);
    println!("noise floor {noise_floor:.3e}; AdaBelief: max |w - w_true| = {err:.4}");
}
