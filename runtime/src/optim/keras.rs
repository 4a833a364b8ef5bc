//! The optimizers of Keras 3, with its defaults, its formulas and its names.
//!
//! Keras evaluates its per-step scalars (`beta^t`, bias corrections, schedules) in `f32`, and
//! so do these rules (`step` without `(f64)`); the constants it derives from Python floats
//! (`1 - beta_1` in Adam, `1 - rho` in RMSprop) are `f64`, rounded once, as here with `f64(..)`
//! (`1 - 0.999` is `0.001`, where `1 - 0.999_f32` is 1.3e-5 off). Nadam and Lion cast the
//! hyper-parameters to `f32` first, and so do their rules. Where a Keras optimizer changes its
//! slots with an option (`momentum > 0`, `nesterov`, `centered`, `amsgrad`), each combination
//! is its own type, so that no unused slot is allocated or streamed. Keras' `weight_decay`, `clipnorm`,
//! `global_clipnorm`, `clipvalue` and `use_ema` are [`Config`](super::Config) options of the
//! [`Optimizer`](super::Optimizer), fused into the same pass.
//!
//! Slot names are Keras' state names, except where Keras names a slot like a hyper-parameter:
//! the SGD momentum slot is `velocity` and the RMSprop momentum slot `momentum_buffer` (Keras:
//! `momentum` for both).

use fusegraph_macros::optimizer;

optimizer! {
    /// `keras.optimizers.SGD` without momentum: `p -= lr * g`.
    pub struct Sgd {
        hyper { lr: f32 = 0.01 }
        update { p -= lr * g; }
    }
}

optimizer! {
    /// `keras.optimizers.SGD(momentum=...)`: `velocity = momentum * velocity - lr * g;
    /// p += velocity` (the velocity carries the negative sign and the learning rate). The default
    /// momentum here is 0.9 (Keras' 0.0 is [`Sgd`]). Keras writes `-g * lr + velocity *
    /// momentum`, which rounds the same: a subtraction is the addition of the negated product,
    /// and it saves the lanes a sign flip.
    pub struct SgdMomentum {
        hyper { lr: f32 = 0.01, momentum: f32 = 0.9 }
        slots { velocity = 0.0 }
        update {
            velocity = velocity * momentum - g * lr;
            p += velocity;
        }
    }
}

optimizer! {
    /// `keras.optimizers.SGD(momentum=..., nesterov=True)`: the velocity as in
    /// [`SgdMomentum`], then `p += momentum * velocity - lr * g` with the new velocity.
    pub struct SgdNesterov {
        hyper { lr: f32 = 0.01, momentum: f32 = 0.9 }
        slots { velocity = 0.0 }
        update {
            velocity = velocity * momentum - g * lr;
            p += velocity * momentum - g * lr;
        }
    }
}

optimizer! {
    /// `keras.optimizers.Adagrad`: the accumulator starts at `initial_accumulator_value` (0.1)
    /// and epsilon sits inside the square root, `p -= lr * g / sqrt(acc + eps)` (PyTorch: starts
    /// at 0, epsilon outside).
    pub struct Adagrad {
        hyper { lr: f32 = 0.001, initial_accumulator_value: f32 = 0.1, epsilon: f32 = 1e-7 }
        slots { accumulator = initial_accumulator_value }
        update {
            accumulator += g * g;
            p -= lr * g / (accumulator + epsilon).sqrt();
        }
    }
}

optimizer! {
    /// `keras.optimizers.RMSprop`: `velocity = rho * velocity + (1 - rho) * g^2;
    /// p -= lr * g / sqrt(velocity + eps)` (epsilon inside the square root; PyTorch: outside,
    /// and `rho` is its `alpha` with default 0.99).
    pub struct RmsProp {
        hyper { lr: f32 = 0.001, rho: f32 = 0.9, epsilon: f32 = 1e-7 }
        slots { velocity = 0.0 }
        update {
            velocity = rho * velocity + f64(1.0 - rho) * (g * g);
            p -= lr * g / (velocity + epsilon).sqrt();
        }
    }
}

optimizer! {
    /// `keras.optimizers.RMSprop(momentum=...)`: the buffer accumulates the increments with the
    /// learning rate inside, `buf = momentum * buf + lr * g / sqrt(velocity + eps); p -= buf`
    /// (PyTorch keeps `lr` outside its buffer). Default momentum 0.9.
    pub struct RmsPropMomentum {
        hyper { lr: f32 = 0.001, rho: f32 = 0.9, momentum: f32 = 0.9, epsilon: f32 = 1e-7 }
        slots { velocity = 0.0, momentum_buffer = 0.0 }
        update {
            velocity = rho * velocity + f64(1.0 - rho) * (g * g);
            momentum_buffer = momentum * momentum_buffer + lr * g / (velocity + epsilon).sqrt();
            p -= momentum_buffer;
        }
    }
}

optimizer! {
    /// `keras.optimizers.RMSprop(centered=True)`: the variance estimate subtracts the squared
    /// mean gradient, `p -= lr * g / sqrt(velocity - average_gradient^2 + eps)`.
    pub struct RmsPropCentered {
        hyper { lr: f32 = 0.001, rho: f32 = 0.9, epsilon: f32 = 1e-7 }
        slots { velocity = 0.0, average_gradient = 0.0 }
        update {
            velocity = rho * velocity + f64(1.0 - rho) * (g * g);
            average_gradient = rho * average_gradient + f64(1.0 - rho) * g;
            let denominator = velocity - average_gradient * average_gradient + epsilon;
            p -= lr * g / denominator.sqrt();
        }
    }
}

optimizer! {
    /// `keras.optimizers.RMSprop(centered=True, momentum=...)`: [`RmsPropCentered`] with the
    /// momentum buffer of [`RmsPropMomentum`].
    pub struct RmsPropCenteredMomentum {
        hyper { lr: f32 = 0.001, rho: f32 = 0.9, momentum: f32 = 0.9, epsilon: f32 = 1e-7 }
        slots { velocity = 0.0, momentum_buffer = 0.0, average_gradient = 0.0 }
        update {
            velocity = rho * velocity + f64(1.0 - rho) * (g * g);
            average_gradient = rho * average_gradient + f64(1.0 - rho) * g;
            let denominator = velocity - average_gradient * average_gradient + epsilon;
            momentum_buffer = momentum * momentum_buffer + lr * g / denominator.sqrt();
            p -= momentum_buffer;
        }
    }
}

optimizer! {
    /// `keras.optimizers.Adam`: the bias corrections fold into
    /// `alpha = lr * sqrt(1 - beta_2^t) / (1 - beta_1^t)`, and epsilon is added to the
    /// uncorrected `sqrt(v)` ("epsilon hat"), default 1e-7. PyTorch adds epsilon after the
    /// correction (default 1e-8): see [`torch::Adam`](super::torch::Adam).
    pub struct Adam {
        hyper { lr: f32 = 0.001, beta_1: f32 = 0.9, beta_2: f32 = 0.999, epsilon: f32 = 1e-7 }
        slots { momentum = 0.0, velocity = 0.0 }
        step { let alpha = lr * (1.0 - beta_2.powi(t)).sqrt() / (1.0 - beta_1.powi(t)); }
        update {
            momentum += (g - momentum) * f64(1.0 - beta_1);
            velocity += (g * g - velocity) * f64(1.0 - beta_2);
            p -= momentum * alpha / (velocity.sqrt() + epsilon);
        }
    }
}

optimizer! {
    /// `keras.optimizers.Adam(amsgrad=True)`: [`Adam`] with the running maximum
    /// `velocity_hat = max(velocity_hat, velocity)` in the denominator.
    pub struct AdamAmsgrad {
        hyper { lr: f32 = 0.001, beta_1: f32 = 0.9, beta_2: f32 = 0.999, epsilon: f32 = 1e-7 }
        slots { momentum = 0.0, velocity = 0.0, velocity_hat = 0.0 }
        step { let alpha = lr * (1.0 - beta_2.powi(t)).sqrt() / (1.0 - beta_1.powi(t)); }
        update {
            momentum += (g - momentum) * f64(1.0 - beta_1);
            velocity += (g * g - velocity) * f64(1.0 - beta_2);
            velocity_hat = velocity_hat.max(velocity);
            p -= momentum * alpha / (velocity_hat.sqrt() + epsilon);
        }
    }
}

optimizer! {
    /// `keras.optimizers.AdamW`: `p -= p * weight_decay * lr` (decoupled, default 0.004), then
    /// the [`Adam`] update, in the same pass.
    pub struct AdamW {
        hyper {
            lr: f32 = 0.001,
            beta_1: f32 = 0.9,
            beta_2: f32 = 0.999,
            epsilon: f32 = 1e-7,
            weight_decay: f32 = 0.004,
        }
        slots { momentum = 0.0, velocity = 0.0 }
        step { let alpha = lr * (1.0 - beta_2.powi(t)).sqrt() / (1.0 - beta_1.powi(t)); }
        update {
            p -= p * weight_decay * lr;
            momentum += (g - momentum) * f64(1.0 - beta_1);
            velocity += (g * g - velocity) * f64(1.0 - beta_2);
            p -= momentum * alpha / (velocity.sqrt() + epsilon);
        }
    }
}

optimizer! {
    /// `keras.optimizers.Adamax`: `norm = max(beta_2 * norm, |g|)`,
    /// `p -= lr * m / ((1 - beta_1^t) * (norm + eps))` (PyTorch puts epsilon inside the max).
    pub struct Adamax {
        hyper { lr: f32 = 0.001, beta_1: f32 = 0.9, beta_2: f32 = 0.999, epsilon: f32 = 1e-7 }
        slots { momentum = 0.0, norm = 0.0 }
        step { let correction = 1.0 - beta_1.powi(t); }
        update {
            momentum += (g - momentum) * f64(1.0 - beta_1);
            norm = (beta_2 * norm).max(g.abs());
            p -= lr * momentum / (correction * (norm + epsilon));
        }
    }
}

optimizer! {
    /// `keras.optimizers.Nadam`: the momentum schedule `u_t = beta_1 * (1 - 0.5 * 0.96^t)` and
    /// its running product `u_product` (a carried scalar, as Keras' optimizer-level variable).
    /// PyTorch's `NAdam` uses `0.96^(t * momentum_decay)`: see [`torch::NAdam`](super::torch::NAdam).
    pub struct Nadam {
        hyper { lr: f32 = 0.001, beta_1: f32 = 0.9, beta_2: f32 = 0.999, epsilon: f32 = 1e-7 }
        slots { momentum = 0.0, velocity = 0.0 }
        carry { u_product = 1.0 }
        step {
            let u_t = beta_1 * (1.0 - 0.5 * 0.96.powi(t));
            let u_t1 = beta_1 * (1.0 - 0.5 * 0.96.powi(t + 1.0));
            u_product *= u_t;
            let u_product_t1 = u_product * u_t1;
        }
        update {
            momentum += (g - momentum) * (1.0 - beta_1);
            velocity += (g * g - velocity) * (1.0 - beta_2);
            let m_hat = u_t1 * momentum / (1.0 - u_product_t1) + (1.0 - u_t) * g / (1.0 - u_product);
            let v_hat = velocity / (1.0 - beta_2.powi(t));
            p -= m_hat * lr / (v_hat.sqrt() + epsilon);
        }
    }
}

optimizer! {
    /// `keras.optimizers.Adadelta`: defaults lr 0.001, rho 0.95, epsilon 1e-7 (PyTorch: 1.0,
    /// 0.9, 1e-6), `p += lr * delta`.
    pub struct Adadelta {
        hyper { lr: f32 = 0.001, rho: f32 = 0.95, epsilon: f32 = 1e-7 }
        slots { accumulated_grad = 0.0, accumulated_delta_var = 0.0 }
        update {
            accumulated_grad = rho * accumulated_grad + f64(1.0 - rho) * (g * g);
            let delta = -((accumulated_delta_var + epsilon).sqrt() * g / (accumulated_grad + epsilon).sqrt());
            accumulated_delta_var = rho * accumulated_delta_var + f64(1.0 - rho) * (delta * delta);
            p += lr * delta;
        }
    }
}

optimizer! {
    /// `keras.optimizers.Lion`: `p -= lr * sign(beta_1 * m + (1 - beta_1) * g)` with
    /// `sign(0) = 0`, then `m = beta_2 * m + (1 - beta_2) * g`.
    pub struct Lion {
        hyper { lr: f32 = 0.001, beta_1: f32 = 0.9, beta_2: f32 = 0.99 }
        slots { momentum = 0.0 }
        update {
            p -= lr * (momentum * beta_1 + g * (1.0 - beta_1)).sign();
            momentum = momentum * beta_2 + g * (1.0 - beta_2);
        }
    }
}

optimizer! {
    /// `keras.optimizers.Ftrl` (follow the regularized leader): the parameter is recomputed from
    /// the `linear` and `accumulator` slots each step.
    pub struct Ftrl {
        hyper {
            lr: f32 = 0.001,
            learning_rate_power: f32 = -0.5,
            initial_accumulator_value: f32 = 0.1,
            l1_regularization_strength: f32 = 0.0,
            l2_regularization_strength: f32 = 0.0,
            l2_shrinkage_regularization_strength: f32 = 0.0,
            beta: f32 = 0.0,
        }
        slots { accumulator = initial_accumulator_value, linear = 0.0 }
        step {
            let power = -learning_rate_power;
            let l2 = l2_regularization_strength + beta / (2.0 * lr);
            let l1 = l1_regularization_strength;
        }
        update {
            let shrunk = g + f64(2.0 * l2_shrinkage_regularization_strength) * p;
            let new_accumulator = accumulator + g * g;
            linear += shrunk - (new_accumulator.powf(power) - accumulator.powf(power)) / lr * p;
            let quadratic = new_accumulator.powf(power) / lr + 2.0 * l2;
            p = (linear.clamp(-l1, l1) - linear) / quadratic;
            accumulator = new_accumulator;
        }
    }
}

optimizer! {
    /// `keras.optimizers.Lamb`: Adam's moments with bias-corrected `u = m_hat / (sqrt(v_hat) +
    /// epsilon)`, and each tensor's step scaled by the trust ratio `||p|| / ||u||` (1 where
    /// either norm is 0). Keras' `weight_decay` is the decoupled decay of the
    /// [`Config`](super::Config), applied before the step and outside the ratio.
    pub struct Lamb {
        hyper { lr: f32 = 0.001, beta_1: f32 = 0.9, beta_2: f32 = 0.999, epsilon: f32 = 1e-7 }
        slots { momentum = 0.0, velocity = 0.0 }
        step {
            let correction_1 = 1.0 - beta_1.powi(t);
            let correction_2 = 1.0 - beta_2.powi(t);
        }
        update {
            momentum += (g - momentum) * f64(1.0 - beta_1);
            velocity += (g * g - velocity) * f64(1.0 - beta_2);
            let u = momentum / correction_1 / ((velocity / correction_2).sqrt() + epsilon);
            let w_norm = norm(p);
            let u_norm = norm(u);
            let ratio = if w_norm > 0.0 { if u_norm > 0.0 { w_norm / u_norm } else { 1.0 } } else { 1.0 };
            p -= ratio * lr * u;
        }
    }
}

optimizer! {
    /// `keras.optimizers.Adafactor`: no first moment; a matrix keeps the means of `g^2 +
    /// epsilon_1` over its rows (`r`, one per row) and its columns (`c`, one per column), and
    /// its second moment is their outer product `velocity = r / mean(r) * c`; a tensor of
    /// another rank keeps `velocity` whole. The step is `g / sqrt(velocity)`, clipped to an RMS
    /// of `clip_threshold`, times `max(epsilon_2, rms(p)) * min(lr, 1 / sqrt(t))`. A tensor of
    /// rank above 2 is kept whole (Keras factors its last two axes).
    pub struct Adafactor {
        hyper {
            lr: f32 = 0.001,
            beta_2_decay: f32 = -0.8,
            epsilon_1: f32 = 1e-30,
            epsilon_2: f32 = 0.001,
            clip_threshold: f32 = 1.0
        }
        slots { r: [rows] = 0.0, c: [cols] = 0.0, velocity = 0.0 }
        step {
            let rho = lr.min(1.0 / t.sqrt());
            let beta_2_t = 1.0 - t.powf(beta_2_decay);
        }
        update factored when rank == 2 {
            let alpha = epsilon_2.max(rms(p)) * rho;
            let g2 = g * g + epsilon_1;
            r = beta_2_t * r + (1.0 - beta_2_t) * row_mean(g2);
            c = beta_2_t * c + (1.0 - beta_2_t) * col_mean(g2);
            velocity = r / mean(r) * c;
            let u = g / velocity.sqrt();
            p -= alpha * (u / max(1.0, rms(u) / clip_threshold));
        }
        update unfactored {
            let alpha = epsilon_2.max(rms(p)) * rho;
            velocity = beta_2_t * velocity + (1.0 - beta_2_t) * (g * g + epsilon_1);
            let u = g / velocity.sqrt();
            p -= alpha * (u / max(1.0, rms(u) / clip_threshold));
        }
    }
}

optimizer! {
    /// `keras.optimizers.Muon`: a matrix's step is its momentum (`momentum_buffer = momentum *
    /// momentum_buffer + g`, with Nesterov's look-ahead `g + momentum * momentum_buffer` by
    /// default) orthogonalised by `ns_steps` Newton-Schulz iterations, scaled by `lr *
    /// sqrt(max(rows, cols)) * rms_rate` (`rms_rate` 0: by `lr` alone); every other tensor, and
    /// those routed to `adamw` by name ([`Optimizer::with_routes`](super::Optimizer::with_routes),
    /// Keras' `exclude_layers` and embeddings), takes Keras' Adam step with `lr *
    /// adam_lr_ratio`. Each branch decays its weights first by its own coefficient times `lr`.
    /// Keras calls `momentum_buffer` `momentum`, the hyper-parameter's name.
    pub struct Muon {
        hyper {
            lr: f32 = 0.001,
            adam_beta_1: f32 = 0.9,
            adam_beta_2: f32 = 0.999,
            epsilon: f32 = 1e-7,
            weight_decay: f32 = 0.004,
            adam_weight_decay: f32 = 0.004,
            adam_lr_ratio: f32 = 1.0,
            momentum: f32 = 0.95,
            ns_steps: f32 = 5.0,
            muon_a: f32 = 3.4445,
            muon_b: f32 = -4.775,
            muon_c: f32 = 2.0315,
            nesterov: f32 = 1.0,
            rms_rate: f32 = 0.2
        }
        slots { momentum_buffer = 0.0, velocity = 0.0 }
        step {
            let alpha = lr * adam_lr_ratio * (1.0 - adam_beta_2.powi(t)).sqrt()
                / (1.0 - adam_beta_1.powi(t));
        }
        update muon when rank == 2 {
            p -= p * weight_decay * lr;
            momentum_buffer += g + momentum_buffer * f64(momentum - 1.0);
            let u = if nesterov > 0.0 { g + momentum_buffer * momentum } else { momentum_buffer };
            let o = orthogonalize(u / (norm(u) + 1e-7), ns_steps, muon_a, muon_b, muon_c);
            let scale = if rms_rate > 0.0 { max(rows, cols).sqrt() * rms_rate } else { 1.0 };
            p -= lr * o * scale;
        }
        update adamw {
            p -= p * adam_weight_decay * lr;
            momentum_buffer += (g - momentum_buffer) * f64(1.0 - adam_beta_1);
            velocity += (g * g - velocity) * f64(1.0 - adam_beta_2);
            p -= momentum_buffer * alpha / (velocity.sqrt() + epsilon);
        }
    }
}
