//! The optimizers of optax (JAX), with its defaults, its formulas and its state names: the
//! gradient transformations of an optax `chain` written out as one rule each.
//!
//! optax computes in `f32`: its per-step scalars (`b^t`, bias corrections) are `f32`, as in these
//! rules' `step`; a Python-float constant such as `1 - b1` is computed from the decimals and
//! rounded once, as here with `f64(..)`. optax's `scale_by_learning_rate` multiplies the update
//! by `-lr` and `apply_updates` adds it; subtracting `lr * u` rounds the same.
//!
//! optax chooses transformations per parameter with masks (`mask`, `weight_decay_mask`,
//! `trust_ratio_mask`) and `partition`: here a rule has one branch per choice, picked by rank
//! where optax picks by rank (Muon) and otherwise by name
//! ([`Optimizer::with_routes`](super::Optimizer::with_routes)): a mask entry that is `false`
//! routes its parameter to the branch without that transformation. optax names its state by
//! pytree path (`mu`, `nu`, `trace`, `muon.mu`); a slot here is the path with `_` for `.`.

use fusegraph_macros::optimizer;

optimizer! {
    /// `optax.lamb`: `chain(scale_by_adam, add_decayed_weights(weight_decay, mask),
    /// scale_by_trust_ratio, scale_by_learning_rate)`. Adam's moments, `u = mu_hat /
    /// (sqrt(nu_hat + eps_root) + eps) + weight_decay * p`, and `p -= lr * r * u` with the trust
    /// ratio `r = ||p|| / ||u||` (1 where either norm is 0): unlike Keras' `Lamb`, the decay is
    /// inside the ratio. The branch `undecayed` (a `mask` entry `false`) leaves the decay out.
    pub struct Lamb {
        hyper {
            lr: f32 = 0.001,
            b1: f32 = 0.9,
            b2: f32 = 0.999,
            eps: f32 = 1e-6,
            eps_root: f32 = 0.0,
            weight_decay: f32 = 0.0
        }
        slots { mu = 0.0, nu = 0.0 }
        step {
            let correction_1 = 1.0 - b1.powi(t);
            let correction_2 = 1.0 - b2.powi(t);
        }
        update undecayed {
            mu = f64(1.0 - b1) * g + b1 * mu;
            nu = f64(1.0 - b2) * (g * g) + b2 * nu;
            let u = mu / correction_1 / ((nu / correction_2 + eps_root).sqrt() + eps);
            let w_norm = norm(p);
            let u_norm = norm(u);
            let ratio = if w_norm > 0.0 { if u_norm > 0.0 { w_norm / u_norm } else { 1.0 } } else { 1.0 };
            p -= lr * (u * ratio);
        }
        update decayed {
            mu = f64(1.0 - b1) * g + b1 * mu;
            nu = f64(1.0 - b2) * (g * g) + b2 * nu;
            let u = mu / correction_1 / ((nu / correction_2 + eps_root).sqrt() + eps) + weight_decay * p;
            let w_norm = norm(p);
            let u_norm = norm(u);
            let ratio = if w_norm > 0.0 { if u_norm > 0.0 { w_norm / u_norm } else { 1.0 } } else { 1.0 };
            p -= lr * (u * ratio);
        }
    }
}

optimizer! {
    /// `optax.lars`: `chain(add_decayed_weights(weight_decay, weight_decay_mask),
    /// masked(scale_by_trust_ratio(trust_coefficient, eps), trust_ratio_mask),
    /// scale_by_learning_rate, trace(momentum, nesterov))`. `u = g + weight_decay * p`, scaled
    /// by `r = trust_coefficient * ||p|| / (||u|| + eps)` (1 where either norm is 0); `trace =
    /// momentum * trace - lr * u` (the negative, lr-scaled velocity) and `p += trace` (Nesterov:
    /// `p += momentum * trace - lr * u`). A `false` entry of `weight_decay_mask` or
    /// `trust_ratio_mask` routes its parameter to the branch without that transformation:
    /// `trust_only`, `decay_only` or `plain` (both `false`; what LARS usually gives biases and
    /// norm scales). `nesterov` is 1 or 0.
    pub struct Lars {
        hyper {
            lr: f32 = 0.001,
            weight_decay: f32 = 0.0,
            trust_coefficient: f32 = 0.001,
            eps: f32 = 0.0,
            momentum: f32 = 0.9,
            nesterov: f32 = 0.0
        }
        slots { trace = 0.0 }
        update plain {
            trace = -lr * g + momentum * trace;
            p += if nesterov > 0.0 { -lr * g + momentum * trace } else { trace };
        }
        update decay_only {
            let u = g + weight_decay * p;
            trace = -lr * u + momentum * trace;
            p += if nesterov > 0.0 { -lr * u + momentum * trace } else { trace };
        }
        update trust_only {
            let w_norm = norm(p);
            let u_norm = norm(g);
            let ratio = if w_norm > 0.0 { if u_norm > 0.0 { trust_coefficient * w_norm / (u_norm + eps) } else { 1.0 } } else { 1.0 };
            let u = g * ratio;
            trace = -lr * u + momentum * trace;
            p += if nesterov > 0.0 { -lr * u + momentum * trace } else { trace };
        }
        update decay_and_trust {
            let decayed = g + weight_decay * p;
            let w_norm = norm(p);
            let u_norm = norm(decayed);
            let ratio = if w_norm > 0.0 { if u_norm > 0.0 { trust_coefficient * w_norm / (u_norm + eps) } else { 1.0 } } else { 1.0 };
            let u = decayed * ratio;
            trace = -lr * u + momentum * trace;
            p += if nesterov > 0.0 { -lr * u + momentum * trace } else { trace };
        }
    }
}

optimizer! {
    /// `optax.contrib.muon`: a matrix (`x @ W`: rows are its inputs) takes `scale_by_muon`: `mu`
    /// an EMA of the gradient, bias-corrected with Nesterov's look-ahead `beta * mu / (1 -
    /// beta^(t+1)) + (1 - beta) * g / (1 - beta^t)` (`nesterov` 0: `mu / (1 - beta^t)`),
    /// normalised by `||U|| + eps` and orthogonalised by `ns_steps` Newton-Schulz iterations,
    /// scaled by `sqrt(max(1, cols / rows))` (or `sqrt(max(rows, cols)) * consistent_rms` where
    /// `consistent_rms` is not 0), plus `weight_decay * p`, times `lr`. Every other tensor takes
    /// `optax.adamw` with `adam_lr` (0: `lr`), `adam_b1`, `adam_b2`, `eps`, `adam_eps_root`,
    /// `adam_weight_decay` and the same `nesterov`. With `adaptive` 1, the orthogonalised step
    /// is scaled by its inner product with `U`, `sum(U * O)` (the dual norm of `U`). optax's
    /// `muon.mu`, `adam.mu` and `adam.nu` are `muon_mu`, `adam_mu` and `adam_nu`; its
    /// `preconditioning` is `frobenius`.
    pub struct Muon {
        hyper {
            lr: f32 = 0.02,
            ns_a: f32 = 3.4445,
            ns_b: f32 = -4.775,
            ns_c: f32 = 2.0315,
            ns_steps: f32 = 5.0,
            beta: f32 = 0.95,
            eps: f32 = 1e-8,
            weight_decay: f32 = 0.0,
            nesterov: f32 = 1.0,
            adam_b1: f32 = 0.9,
            adam_b2: f32 = 0.999,
            adam_eps_root: f32 = 0.0,
            adam_weight_decay: f32 = 0.0,
            adam_lr: f32 = 0.0,
            consistent_rms: f32 = 0.0,
            adaptive: f32 = 0.0
        }
        slots { muon_mu = 0.0, adam_mu = 0.0, adam_nu = 0.0 }
        step {
            let muon_correction = 1.0 - beta.powi(t);
            let muon_correction_next = 1.0 - beta.powi(t + 1.0);
            let adam_correction_1 = 1.0 - adam_b1.powi(t);
            let adam_correction_1_next = 1.0 - adam_b1.powi(t + 1.0);
            let adam_correction_2 = 1.0 - adam_b2.powi(t);
            let adam_rate = if adam_lr > 0.0 { adam_lr } else { lr };
        }
        update muon when rank == 2 {
            muon_mu = f64(1.0 - beta) * g + beta * muon_mu;
            let u = if nesterov > 0.0 {
                beta * (muon_mu / muon_correction_next) + f64(1.0 - beta) * (g / muon_correction)
            } else {
                muon_mu / muon_correction
            };
            let orthogonal = orthogonalize(u / (norm(u) + eps), ns_steps, ns_a, ns_b, ns_c);
            let o = if adaptive > 0.0 { sum(u * orthogonal) * orthogonal } else { orthogonal };
            let scale = if consistent_rms > 0.0 { max(rows, cols).sqrt() * consistent_rms } else { max(1.0, cols / rows).sqrt() };
            p -= lr * (o * scale + weight_decay * p);
        }
        update adam {
            adam_mu = f64(1.0 - adam_b1) * g + adam_b1 * adam_mu;
            adam_nu = f64(1.0 - adam_b2) * (g * g) + adam_b2 * adam_nu;
            let mu_hat = if nesterov > 0.0 {
                adam_b1 * (adam_mu / adam_correction_1_next) + f64(1.0 - adam_b1) * (g / adam_correction_1)
            } else {
                adam_mu / adam_correction_1
            };
            let u = mu_hat / ((adam_nu / adam_correction_2 + adam_eps_root).sqrt() + eps);
            p -= adam_rate * (u + adam_weight_decay * p);
        }
    }
}

optimizer! {
    /// `optax.contrib.schedule_free_adamw`: the parameters are the point `y` where gradients
    /// are taken, the slot `z` (starting as the parameters) the base iterate, and the view
    /// `eval_params` their average `x = (y - (1 - b1) * z) / b1`, at which to evaluate. Each
    /// step: the base rule (`scale_by_rms` with bias correction, plus `weight_decay * y`) moves
    /// `z` by the rate of the step before, `s(t - 1)` (its own count starts at 0); `max_lr`
    /// tracks the largest `s(t)`, each step weighs `max_lr^weight_lr_power`, and `x` moves
    /// towards `z` by that weight's share of all weights so far; then `y = b1 * x + (1 - b1) *
    /// z`. `s(k)` is `lr` warmed up linearly over `warmup_steps` steps (0: none).
    pub struct ScheduleFreeAdamw {
        hyper {
            lr: f32 = 0.0025,
            warmup_steps: f32 = 0.0,
            b1: f32 = 0.9,
            b2: f32 = 0.999,
            eps: f32 = 1e-8,
            weight_decay: f32 = 0.0,
            weight_lr_power: f32 = 2.0
        }
        slots { z = p, nu = 0.0 }
        carry { weight_sum = 0.0, max_lr = 0.0 }
        views { eval_params = (p - (1.0 - b1) * z) / b1 }
        step {
            let rate = if warmup_steps > 0.0 { lr - lr * (1.0 - min(t, warmup_steps) / warmup_steps) } else { lr };
            let base_rate = if warmup_steps > 0.0 { lr - lr * (1.0 - min(t - 1.0, warmup_steps) / warmup_steps) } else { lr };
            max_lr = max(max_lr, rate);
            let weight = max_lr.powf(weight_lr_power);
            weight_sum += weight;
            let ck = if weight_sum > 0.0 { weight / weight_sum } else { 0.0 };
            let correction = 1.0 - b2.powi(t);
        }
        update {
            nu = f64(1.0 - b2) * (g * g) + b2 * nu;
            let u = g / ((nu / correction).sqrt() + eps) + weight_decay * p;
            let z_next = z - u * base_rate;
            let x = (1.0 - ck) * ((p - (1.0 - b1) * z) / b1) + ck * z_next;
            p += (b1 * x + (1.0 - b1) * z_next) - p;
            z = z_next;
        }
    }
}

#[cfg(all(test, feature = "alloc"))]
mod tests {
    use super::*;
    use crate::optim::{Optimizer, Shape};
    use alloc::vec::Vec;

    /// `adaptive` scales Muon's orthogonalised step by `sum(U * O)`: from the same state, its
    /// step is the plain one times that inner product, with `U` the first step's look-ahead.
    #[test]
    fn adaptive_muon_scales_the_step_by_the_dual_norm() {
        let (rows, cols) = (6, 9);
        let g: Vec<f32> = (0..rows * cols)
            .map(|i| ((i * 7) % 11) as f32 / 5.0 - 1.0)
            .collect();
        let step = |adaptive: f32| {
            let rule = Muon::default().with_adaptive(adaptive);
            let mut opt =
                Optimizer::with_shapes(rule, &[Shape::matrix(rows, cols)], Default::default());
            let mut p = alloc::vec![0.0f32; rows * cols];
            opt.step(&mut p, &g);
            p
        };
        let (plain, adaptive) = (step(0.0), step(1.0));
        let rule = Muon::default();
        let (lr, beta) = (f64::from(rule.lr), f64::from(rule.beta));
        let scale = (cols as f64 / rows as f64).max(1.0).sqrt();
        // The first step's look-ahead: mu = (1 - beta) g, bias-corrected as optax does.
        let u = |g: f32| {
            let g = f64::from(g);
            beta * ((1.0 - beta) * g / (1.0 - beta * beta)) + (1.0 - beta) * g / (1.0 - beta)
        };
        let dual: f64 = plain
            .iter()
            .zip(&g)
            .map(|(p, &g)| u(g) * (-f64::from(*p) / (lr * scale)))
            .sum();
        assert!(dual > 1.0, "{dual}");
        for (a, p) in adaptive.iter().zip(&plain) {
            let want = dual * f64::from(*p);
            assert!(
                (f64::from(*a) - want).abs() <= 1e-5 * want.abs() + 1e-7,
                "{a} {want}"
            );
        }
    }
}
