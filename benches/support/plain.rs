//! The rules of `keras::Adam` and `keras::SgdMomentum` as plain Rust loops: one
//! `for` over zipped slices per step, which the compiler auto-vectorizes (SSE2 `mulps`, `divps`,
//! `sqrtps` in the default x86_64 build). They compute the built-ins bit for bit, with the same
//! per-step scalars, and set the speed the fused pass is held to: the loop the compiler writes
//! for the same rule with the same flags.
//!
//! On two threads, a step splits the buffers into two halves, one per side of `rayon::join`.
//! Their slots start on a cache line, as the optimizer's own do (`AlignedFloats`), so that the
//! comparison does not depend on where the allocator puts them.

use fusegraph::optim::keras::{Adam, SgdMomentum};
use fusegraph_runtime::aligned::AlignedFloats;
use fusegraph_runtime::math;

/// Keras' `1 - beta`: the Python float, rounded to `f32` once.
fn one_minus(beta: f32) -> f32 {
    (1.0 - math::decimal_f64(beta)) as f32
}

/// Keras Adam's per-step scalars, as the `step` part of `keras::Adam` computes them.
#[derive(Clone, Copy)]
struct AdamStep {
    c1: f32,
    c2: f32,
    alpha: f32,
    eps: f32,
}

/// One Adam step over one piece of the buffers.
#[inline(never)]
fn adam_loop(k: AdamStep, p: &mut [f32], g: &[f32], m: &mut [f32], v: &mut [f32]) {
    for (((p, &g), m), v) in p.iter_mut().zip(g).zip(m.iter_mut()).zip(v.iter_mut()) {
        *m += (g - *m) * k.c1;
        *v += (g * g - *v) * k.c2;
        *p -= *m * k.alpha / (v.sqrt() + k.eps);
    }
}

/// Keras Adam as a plain loop, with its slots.
pub struct PlainAdam {
    rule: Adam,
    t: u64,
    m: AlignedFloats,
    v: AlignedFloats,
}

impl PlainAdam {
    /// State for `n` elements.
    pub fn new(rule: Adam, n: usize) -> Self {
        PlainAdam {
            rule,
            t: 0,
            m: AlignedFloats::zeros(n),
            v: AlignedFloats::zeros(n),
        }
    }

    /// One step on `threads` (1 or 2) threads.
    pub fn step(&mut self, threads: usize, p: &mut [f32], g: &[f32]) {
        self.t += 1;
        let t = self.t as f32;
        let Adam {
            lr,
            beta_1,
            beta_2,
            epsilon,
        } = self.rule;
        let k = AdamStep {
            c1: one_minus(beta_1),
            c2: one_minus(beta_2),
            alpha: lr * math::sqrt(1.0 - math::powf(beta_2, t)) / (1.0 - math::powf(beta_1, t)),
            eps: epsilon,
        };
        let (m, v) = (&mut self.m[..], &mut self.v[..]);
        if threads == 2 {
            let mid = g.len() / 2;
            let (p0, p1) = p.split_at_mut(mid);
            let (g0, g1) = g.split_at(mid);
            let (m0, m1) = m.split_at_mut(mid);
            let (v0, v1) = v.split_at_mut(mid);
            rayon::join(
                || adam_loop(k, p0, g0, m0, v0),
                || adam_loop(k, p1, g1, m1, v1),
            );
        } else {
            adam_loop(k, p, g, m, v);
        }
    }
}

/// One SGD-momentum step over one piece of the buffers.
#[inline(never)]
fn sgd_momentum_loop(lr: f32, momentum: f32, p: &mut [f32], g: &[f32], velocity: &mut [f32]) {
    for ((p, &g), v) in p.iter_mut().zip(g).zip(velocity.iter_mut()) {
        *v = -g * lr + *v * momentum;
        *p += *v;
    }
}

/// Keras SGD with momentum as a plain loop, with its slot.
pub struct PlainSgdMomentum {
    rule: SgdMomentum,
    velocity: AlignedFloats,
}

impl PlainSgdMomentum {
    /// State for `n` elements.
    pub fn new(rule: SgdMomentum, n: usize) -> Self {
        PlainSgdMomentum {
            rule,
            velocity: AlignedFloats::zeros(n),
        }
    }

    /// One step on `threads` (1 or 2) threads.
    pub fn step(&mut self, threads: usize, p: &mut [f32], g: &[f32]) {
        let SgdMomentum { lr, momentum } = self.rule;
        let v = &mut self.velocity[..];
        if threads == 2 {
            let mid = g.len() / 2;
            let (p0, p1) = p.split_at_mut(mid);
            let (g0, g1) = g.split_at(mid);
            let (v0, v1) = v.split_at_mut(mid);
            rayon::join(
                || sgd_momentum_loop(lr, momentum, p0, g0, v0),
                || sgd_momentum_loop(lr, momentum, p1, g1, v1),
            );
        } else {
            sgd_momentum_loop(lr, momentum, p, g, v);
        }
    }
}
