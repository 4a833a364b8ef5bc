//! The optimizers of PyTorch (`torch.optim`, single-tensor CPU implementation), with its
//! defaults, its formulas and its state names.
//!
//! PyTorch computes its per-step scalars (bias corrections, step sizes) in `f64` Python floats
//! from the hyper-parameters as typed; these rules do the same with `step(f64)`, widening each
//! `f32` hyper-parameter to the decimal it was written as. PyTorch's `weight_decay` (an L2 term
//! added to the gradient), `maximize`, `clip_grad_norm_` and `clip_grad_value_` are
//! [`Config`](super::Config) options of the [`Optimizer`](super::Optimizer), fused into the same
//! pass. The per-parameter `step` counter of PyTorch is the optimizer's
//! [`iterations`](super::Optimizer::iterations).

use fusegraph_macros::optimizer;

optimizer! {
    /// `torch.optim.SGD` without momentum: `p -= lr * g`.
    pub struct Sgd {
        hyper { lr: f32 = 0.001 }
        update { p -= lr * g; }
    }
}

optimizer! {
    /// `torch.optim.SGD(momentum=...)`: the buffer is the gradient itself on the first step
    /// (no dampening), then `buf = momentum * buf + (1 - dampening) * g`; `p -= lr * buf`
    /// (Keras keeps `lr` inside its velocity). Default momentum 0.9.
    pub struct SgdMomentum {
        hyper { lr: f32 = 0.001, momentum: f32 = 0.9, dampening: f32 = 0.0 }
        slots { momentum_buffer = 0.0 }
        step(f64) {}
        update {
            momentum_buffer = if t == 1.0 { g } else { momentum_buffer * momentum + g * (1.0 - dampening) };
            p -= lr * momentum_buffer;
        }
    }
}

optimizer! {
    /// `torch.optim.SGD(momentum=..., nesterov=True)`: the buffer as in [`SgdMomentum`], then
    /// `p -= lr * (g + momentum * buf)`.
    pub struct SgdNesterov {
        hyper { lr: f32 = 0.001, momentum: f32 = 0.9, dampening: f32 = 0.0 }
        slots { momentum_buffer = 0.0 }
        step(f64) {}
        update {
            momentum_buffer = if t == 1.0 { g } else { momentum_buffer * momentum + g * (1.0 - dampening) };
            p -= lr * (g + momentum * momentum_buffer);
        }
    }
}

optimizer! {
    /// `torch.optim.Adagrad`: `clr = lr / (1 + (t - 1) * lr_decay)`, the sum starts at
    /// `initial_accumulator_value` (0), `p -= clr * g / (sqrt(sum) + eps)` (epsilon outside the
    /// root, 1e-10; Keras: inside, 1e-7, and starting at 0.1).
    pub struct Adagrad {
        hyper { lr: f32 = 0.01, lr_decay: f32 = 0.0, initial_accumulator_value: f32 = 0.0, eps: f32 = 1e-10 }
        slots { sum = initial_accumulator_value }
        step(f64) { let clr = lr / (1.0 + (t - 1.0) * lr_decay); }
        update {
            sum += g * g;
            p -= clr * (g / (sum.sqrt() + eps));
        }
    }
}

optimizer! {
    /// `torch.optim.RMSprop`: `square_avg = alpha * square_avg + (1 - alpha) * g^2;
    /// p -= lr * g / (sqrt(square_avg) + eps)` (epsilon outside the root; Keras: inside).
    pub struct RmsProp {
        hyper { lr: f32 = 0.01, alpha: f32 = 0.99, eps: f32 = 1e-8 }
        slots { square_avg = 0.0 }
        step(f64) {}
        update {
            square_avg = square_avg * alpha + g * g * (1.0 - alpha);
            p -= lr * (g / (square_avg.sqrt() + eps));
        }
    }
}

optimizer! {
    /// `torch.optim.RMSprop(momentum=...)`: `buf = momentum * buf + g / (sqrt(square_avg) +
    /// eps); p -= lr * buf` (the learning rate outside the buffer; Keras: inside).
    pub struct RmsPropMomentum {
        hyper { lr: f32 = 0.01, alpha: f32 = 0.99, eps: f32 = 1e-8, momentum: f32 = 0.9 }
        slots { square_avg = 0.0, momentum_buffer = 0.0 }
        step(f64) {}
        update {
            square_avg = square_avg * alpha + g * g * (1.0 - alpha);
            momentum_buffer = momentum_buffer * momentum + g / (square_avg.sqrt() + eps);
            p -= lr * momentum_buffer;
        }
    }
}

optimizer! {
    /// `torch.optim.RMSprop(centered=True)`: the denominator is
    /// `sqrt(square_avg - grad_avg^2) + eps`.
    pub struct RmsPropCentered {
        hyper { lr: f32 = 0.01, alpha: f32 = 0.99, eps: f32 = 1e-8 }
        slots { square_avg = 0.0, grad_avg = 0.0 }
        step(f64) {}
        update {
            square_avg = square_avg * alpha + g * g * (1.0 - alpha);
            grad_avg += (g - grad_avg) * (1.0 - alpha);
            let avg = (square_avg - grad_avg * grad_avg).sqrt() + eps;
            p -= lr * (g / avg);
        }
    }
}

optimizer! {
    /// `torch.optim.RMSprop(centered=True, momentum=...)`: [`RmsPropCentered`] with the buffer
    /// of [`RmsPropMomentum`].
    pub struct RmsPropCenteredMomentum {
        hyper { lr: f32 = 0.01, alpha: f32 = 0.99, eps: f32 = 1e-8, momentum: f32 = 0.9 }
        slots { square_avg = 0.0, momentum_buffer = 0.0, grad_avg = 0.0 }
        step(f64) {}
        update {
            square_avg = square_avg * alpha + g * g * (1.0 - alpha);
            grad_avg += (g - grad_avg) * (1.0 - alpha);
            let avg = (square_avg - grad_avg * grad_avg).sqrt() + eps;
            momentum_buffer = momentum_buffer * momentum + g / avg;
            p -= lr * momentum_buffer;
        }
    }
}

optimizer! {
    /// `torch.optim.Adam`: `p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)`:
    /// epsilon is added after the bias correction (default 1e-8). Keras adds it before: see
    /// [`keras::Adam`](super::keras::Adam).
    pub struct Adam {
        hyper { lr: f32 = 0.001, beta1: f32 = 0.9, beta2: f32 = 0.999, eps: f32 = 1e-8 }
        slots { exp_avg = 0.0, exp_avg_sq = 0.0 }
        step(f64) {
            let step_size = lr / (1.0 - beta1.powi(t));
            let correction2_sqrt = (1.0 - beta2.powi(t)).sqrt();
        }
        update {
            exp_avg += (g - exp_avg) * (1.0 - beta1);
            exp_avg_sq = exp_avg_sq * beta2 + g * g * (1.0 - beta2);
            p -= step_size * (exp_avg / (exp_avg_sq.sqrt() / correction2_sqrt + eps));
        }
    }
}

optimizer! {
    /// `torch.optim.Adam(amsgrad=True)`: [`Adam`] with the running maximum `max_exp_avg_sq` in
    /// the denominator.
    pub struct AdamAmsgrad {
        hyper { lr: f32 = 0.001, beta1: f32 = 0.9, beta2: f32 = 0.999, eps: f32 = 1e-8 }
        slots { exp_avg = 0.0, exp_avg_sq = 0.0, max_exp_avg_sq = 0.0 }
        step(f64) {
            let step_size = lr / (1.0 - beta1.powi(t));
            let correction2_sqrt = (1.0 - beta2.powi(t)).sqrt();
        }
        update {
            exp_avg += (g - exp_avg) * (1.0 - beta1);
            exp_avg_sq = exp_avg_sq * beta2 + g * g * (1.0 - beta2);
            max_exp_avg_sq = max_exp_avg_sq.max(exp_avg_sq);
            p -= step_size * (exp_avg / (max_exp_avg_sq.sqrt() / correction2_sqrt + eps));
        }
    }
}

optimizer! {
    /// `torch.optim.AdamW`: `p *= 1 - lr * weight_decay` (decoupled, default 0.01), then the
    /// [`Adam`] update, in the same pass.
    pub struct AdamW {
        hyper { lr: f32 = 0.001, beta1: f32 = 0.9, beta2: f32 = 0.999, eps: f32 = 1e-8, weight_decay: f32 = 0.01 }
        slots { exp_avg = 0.0, exp_avg_sq = 0.0 }
        step(f64) {
            let decay = 1.0 - lr * weight_decay;
            let step_size = lr / (1.0 - beta1.powi(t));
            let correction2_sqrt = (1.0 - beta2.powi(t)).sqrt();
        }
        update {
            p *= decay;
            exp_avg += (g - exp_avg) * (1.0 - beta1);
            exp_avg_sq = exp_avg_sq * beta2 + g * g * (1.0 - beta2);
            p -= step_size * (exp_avg / (exp_avg_sq.sqrt() / correction2_sqrt + eps));
        }
    }
}

optimizer! {
    /// `torch.optim.Adamax`: `exp_inf = max(beta2 * exp_inf, |g| + eps)` (epsilon inside the
    /// max; Keras adds it to the denominator), `p -= lr / (1 - beta1^t) * exp_avg / exp_inf`.
    pub struct Adamax {
        hyper { lr: f32 = 0.002, beta1: f32 = 0.9, beta2: f32 = 0.999, eps: f32 = 1e-8 }
        slots { exp_avg = 0.0, exp_inf = 0.0 }
        step(f64) { let clr = lr / (1.0 - beta1.powi(t)); }
        update {
            exp_avg += (g - exp_avg) * (1.0 - beta1);
            exp_inf = (exp_inf * beta2).max(g.abs() + eps);
            p -= clr * (exp_avg / exp_inf);
        }
    }
}

optimizer! {
    /// `torch.optim.NAdam`: `mu_t = beta1 * (1 - 0.5 * 0.96^(t * momentum_decay))` with
    /// `momentum_decay` 0.004 (Keras uses `0.96^t`), and the running product `mu_product` as a
    /// carried scalar.
    pub struct NAdam {
        hyper { lr: f32 = 0.002, beta1: f32 = 0.9, beta2: f32 = 0.999, eps: f32 = 1e-8, momentum_decay: f32 = 0.004 }
        slots { exp_avg = 0.0, exp_avg_sq = 0.0 }
        carry { mu_product = 1.0 }
        step(f64) {
            let correction2 = 1.0 - beta2.powi(t);
            let mu = beta1 * (1.0 - 0.5 * 0.96.powf(t * momentum_decay));
            let mu_next = beta1 * (1.0 - 0.5 * 0.96.powf((t + 1.0) * momentum_decay));
            mu_product *= mu;
            let grad_step = lr * (1.0 - mu) / (1.0 - mu_product);
            let avg_step = lr * mu_next / (1.0 - mu_product * mu_next);
        }
        update {
            exp_avg += (g - exp_avg) * (1.0 - beta1);
            exp_avg_sq = exp_avg_sq * beta2 + g * g * (1.0 - beta2);
            let denom = (exp_avg_sq / correction2).sqrt() + eps;
            p -= grad_step * (g / denom);
            p -= avg_step * (exp_avg / denom);
        }
    }
}

optimizer! {
    /// `torch.optim.RAdam`: Adam with the variance rectification `rect` while the
    /// approximated SMA length `rho_t` exceeds 5, plain momentum SGD before.
    pub struct RAdam {
        hyper { lr: f32 = 0.001, beta1: f32 = 0.9, beta2: f32 = 0.999, eps: f32 = 1e-8 }
        slots { exp_avg = 0.0, exp_avg_sq = 0.0 }
        step(f64) {
            let correction1 = 1.0 - beta1.powi(t);
            let correction2 = 1.0 - beta2.powi(t);
            let rho_inf = 2.0 / (1.0 - beta2) - 1.0;
            let rho_t = rho_inf - 2.0 * t * beta2.powi(t) / correction2;
            let rect = if rho_t > 5.0 {
                ((rho_t - 4.0) * (rho_t - 2.0) * rho_inf / ((rho_inf - 4.0) * (rho_inf - 2.0) * rho_t)).sqrt()
            } else {
                0.0
            };
            let correction2_sqrt = correction2.sqrt();
        }
        update {
            exp_avg += (g - exp_avg) * (1.0 - beta1);
            exp_avg_sq = exp_avg_sq * beta2 + g * g * (1.0 - beta2);
            let m_hat = exp_avg / correction1;
            p -= if rho_t > 5.0 {
                m_hat * lr * (correction2_sqrt / (exp_avg_sq.sqrt() + eps)) * rect
            } else {
                m_hat * lr
            };
        }
    }
}

optimizer! {
    /// `torch.optim.Adadelta`: defaults lr 1.0, rho 0.9, eps 1e-6 (Keras: 0.001, 0.95, 1e-7),
    /// `p -= lr * delta`.
    pub struct Adadelta {
        hyper { lr: f32 = 1.0, rho: f32 = 0.9, eps: f32 = 1e-6 }
        slots { square_avg = 0.0, acc_delta = 0.0 }
        step(f64) {}
        update {
            square_avg = square_avg * rho + g * g * (1.0 - rho);
            let delta = (acc_delta + eps).sqrt() / (square_avg + eps).sqrt() * g;
            acc_delta = acc_delta * rho + delta * delta * (1.0 - rho);
            p -= lr * delta;
        }
    }
}

optimizer! {
    /// `torch.optim.Adafactor`: no first moment; a matrix keeps the means of `g^2` over its
    /// rows (`row_var`, `[rows, 1]`) and columns (`col_var`, `[1, cols]`), updated with the
    /// weight `t^beta2_decay`, and its variance estimate is `row_var * col_var /
    /// max(mean(row_var), eps1)`; a tensor of another rank keeps `variance` whole. The step is
    /// `g / sqrt(max(var, eps1^2))` divided by `max(1, rms / d)` and scaled by `max(eps2,
    /// rms(p)) * min(lr, 1 / sqrt(t))`; `weight_decay` multiplies the weights by `1 - lr *
    /// weight_decay` once that scale is taken. `eps1` 0 stands for PyTorch's `None`, the `f32`
    /// machine epsilon. A tensor of rank above 2 is kept whole (PyTorch factors its last two
    /// axes).
    pub struct Adafactor {
        hyper {
            lr: f32 = 0.01,
            beta2_decay: f32 = -0.8,
            eps1: f32 = 0.0,
            eps2: f32 = 0.001,
            d: f32 = 1.0,
            weight_decay: f32 = 0.0
        }
        slots { row_var: [rows, 1] = 0.0, col_var: [1, cols] = 0.0, variance = 0.0 }
        step(f64) {
            let rho = lr.min(1.0 / t.sqrt());
            let beta2_t = t.powf(beta2_decay);
            let decay = 1.0 - lr * weight_decay;
            let floor = if eps1 > 0.0 { eps1 } else { 1.1920928955078125e-7 };
        }
        update factored when rank == 2 {
            let alpha = eps2.max(norm(p) / numel.sqrt()) * rho;
            p *= decay;
            row_var += beta2_t * (row_mean(g * g) - row_var);
            col_var += beta2_t * (col_mean(g * g) - col_var);
            let var = row_var * col_var / max(mean(row_var), floor);
            let u = 1.0 / max(var, floor * floor).sqrt() * g;
            p -= alpha / max(1.0, norm(u) / (numel.sqrt() * d)) * u;
        }
        update unfactored {
            let alpha = eps2.max(norm(p) / numel.sqrt()) * rho;
            p *= decay;
            variance += beta2_t * (g * g - variance);
            let u = 1.0 / max(variance, floor * floor).sqrt() * g;
            p -= alpha / max(1.0, norm(u) / (numel.sqrt() * d)) * u;
        }
    }
}

optimizer! {
    /// `torch.optim.Muon`: `momentum_buffer` is an EMA of the gradient (`lerp` by `1 -
    /// momentum`), the step its Nesterov look-ahead `g + momentum * (momentum_buffer - g)`
    /// (`nesterov` 0: the buffer itself), normalised by `max(||U||, eps)` and orthogonalised by
    /// `ns_steps` Newton-Schulz iterations (in `f32`; PyTorch computes them in `bfloat16`),
    /// scaled by `lr * sqrt(max(1, rows / cols))` (`match_rms_adamw` 1, PyTorch's `adjust_lr_fn
    /// = "match_rms_adamw"`: `lr * 0.2 * sqrt(max(rows, cols))`), after `p *= 1 - lr *
    /// weight_decay`.
    /// PyTorch refuses tensors of other ranks; here they take [`AdamW`]'s step with the same
    /// `lr` and `weight_decay` (`adam_*` hyper-parameters), as Keras and optax route them.
    pub struct Muon {
        hyper {
            lr: f32 = 0.001,
            weight_decay: f32 = 0.1,
            momentum: f32 = 0.95,
            nesterov: f32 = 1.0,
            ns_a: f32 = 3.4445,
            ns_b: f32 = -4.775,
            ns_c: f32 = 2.0315,
            eps: f32 = 1e-7,
            ns_steps: f32 = 5.0,
            adam_beta1: f32 = 0.9,
            adam_beta2: f32 = 0.999,
            adam_eps: f32 = 1e-8,
            match_rms_adamw: f32 = 0.0
        }
        slots { momentum_buffer = 0.0, exp_avg = 0.0, exp_avg_sq = 0.0 }
        step(f64) {
            let decay = 1.0 - lr * weight_decay;
            let step_size = lr / (1.0 - adam_beta1.powi(t));
            let correction2_sqrt = (1.0 - adam_beta2.powi(t)).sqrt();
        }
        update muon when rank == 2 {
            p *= decay;
            momentum_buffer += (g - momentum_buffer) * (1.0 - momentum);
            let u = if nesterov > 0.0 { g + (momentum_buffer - g) * momentum } else { momentum_buffer };
            let o = orthogonalize(u / max(norm(u), eps), ns_steps, ns_a, ns_b, ns_c);
            let ratio = if match_rms_adamw > 0.0 { 0.2 * max(rows, cols).sqrt() } else { max(1.0, rows / cols).sqrt() };
            p -= lr * ratio * o;
        }
        update adamw {
            p *= decay;
            exp_avg += (g - exp_avg) * (1.0 - adam_beta1);
            exp_avg_sq = exp_avg_sq * adam_beta2 + g * g * (1.0 - adam_beta2);
            p -= step_size * (exp_avg / (exp_avg_sq.sqrt() / correction2_sqrt + eps));
        }
    }
}
