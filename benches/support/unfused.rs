//! The baselines the fused optimizer pass is measured against, shared by `benches/optim.rs` and
//! `examples/bench_optim.rs`:
//!
//! - the same rules run *unfused*, one pass per operator over the buffers, with every temporary
//!   allocated beforehand: the way an op-by-op framework runs an optimizer step;
//! - the in-place `a += s * b` kernel on `f32x8` lanes, which moves 12 bytes per element and
//!   sets the bandwidth a memory-bound element-wise pass can reach on this machine.
//!
//! With `par`, each pass is split across rayon in pieces of `PARALLEL_CHUNK` elements, as the
//! fused pass is at and above its threshold.

use fusegraph::optim::keras::{Adam, SgdMomentum};
use fusegraph::optim::PARALLEL_CHUNK as CHUNK;
use rayon::prelude::*;
use wide::f32x8;

/// `x = f(x)`, one pass.
fn pass1(par: bool, x: &mut [f32], f: impl Fn(&mut f32) + Sync) {
    if par {
        x.par_chunks_mut(CHUNK)
            .for_each(|x| x.iter_mut().for_each(&f));
    } else {
        x.iter_mut().for_each(f);
    }
}

/// `x = f(x, a)`, one pass.
fn pass2(par: bool, x: &mut [f32], a: &[f32], f: impl Fn(&mut f32, f32) + Sync) {
    let run = |x: &mut [f32], a: &[f32]| x.iter_mut().zip(a).for_each(|(x, &a)| f(x, a));
    if par {
        x.par_chunks_mut(CHUNK)
            .zip(a.par_chunks(CHUNK))
            .for_each(|(x, a)| run(x, a));
    } else {
        run(x, a);
    }
}

/// `x = f(a, b)`, one pass.
fn pass3(par: bool, x: &mut [f32], a: &[f32], b: &[f32], f: impl Fn(f32, f32) -> f32 + Sync) {
    let run = |x: &mut [f32], a: &[f32], b: &[f32]| {
        x.iter_mut()
            .zip(a.iter().zip(b))
            .for_each(|(x, (&a, &b))| *x = f(a, b));
    };
    if par {
        x.par_chunks_mut(CHUNK)
            .zip(a.par_chunks(CHUNK).zip(b.par_chunks(CHUNK)))
            .for_each(|(x, (a, b))| run(x, a, b));
    } else {
        run(x, a, b);
    }
}

/// Keras 3 Adam, one pass per operator: twelve passes and four temporaries.
pub struct UnfusedAdam {
    rule: Adam,
    t: i32,
    m: Vec<f32>,
    v: Vec<f32>,
    tmp: [Vec<f32>; 4],
}

impl UnfusedAdam {
    /// State for `n` elements, all allocated here.
    pub fn new(rule: Adam, n: usize) -> Self {
        UnfusedAdam {
            rule,
            t: 0,
            m: vec![0.0; n],
            v: vec![0.0; n],
            tmp: core::array::from_fn(|_| vec![0.0; n]),
        }
    }

    /// One step; with `par`, every pass is split across rayon.
    pub fn step(&mut self, par: bool, p: &mut [f32], g: &[f32]) {
        let Adam {
            lr,
            beta_1,
            beta_2,
            epsilon,
            ..
        } = self.rule;
        self.t += 1;
        // The per-step scalars, in f32 as Keras computes them.
        let alpha = lr * (1.0 - beta_2.powi(self.t)).sqrt() / (1.0 - beta_1.powi(self.t));
        let (c1, c2) = (1.0 - beta_1, 1.0 - beta_2);
        let (m, v) = (&mut self.m, &mut self.v);
        let [t1, t2, t3, t4] = &mut self.tmp;
        pass3(par, t1, g, m, |g, m| g - m);
        pass1(par, t1, |t| *t *= c1);
        pass2(par, m, t1, |m, t| *m += t);
        pass3(par, t2, g, g, |g, h| g * h);
        pass2(par, t2, v, |t, v| *t -= v);
        pass1(par, t2, |t| *t *= c2);
        pass2(par, v, t2, |v, t| *v += t);
        pass2(par, t3, v, |t, v| *t = v.sqrt());
        pass1(par, t3, |t| *t += epsilon);
        pass2(par, t4, m, |t, m| *t = m * alpha);
        pass2(par, t4, t3, |t, d| *t /= d);
        pass2(par, p, t4, |p, t| *p -= t);
    }
}

/// Keras 3 SGD with momentum (`m = momentum * m - lr * g; p += m`), one pass per operator:
/// four passes and one temporary.
pub struct UnfusedSgdMomentum {
    rule: SgdMomentum,
    m: Vec<f32>,
    tmp: Vec<f32>,
}

impl UnfusedSgdMomentum {
    /// State for `n` elements, all allocated here.
    pub fn new(rule: SgdMomentum, n: usize) -> Self {
        UnfusedSgdMomentum {
            rule,
            m: vec![0.0; n],
            tmp: vec![0.0; n],
        }
    }

    /// One step; with `par`, every pass is split across rayon.
    pub fn step(&mut self, par: bool, p: &mut [f32], g: &[f32]) {
        let SgdMomentum { lr, momentum, .. } = self.rule;
        let (m, t1) = (&mut self.m, &mut self.tmp);
        pass2(par, t1, g, |t, g| *t = g * lr);
        pass1(par, m, |m| *m *= momentum);
        pass2(par, m, t1, |m, t| *m -= t);
        pass2(par, p, m, |p, m| *p += m);
    }
}

/// The in-place kernel `a += s * b` on `f32x8` lanes (12 bytes per element). With `par` it is
/// split across rayon the way the fused pass splits: halves, down to `CHUNK` elements.
pub fn axpy(par: bool, a: &mut [f32], s: f32, b: &[f32]) {
    assert_eq!(a.len(), b.len(), "axpy operands differ in length");
    if par && a.len() > CHUNK {
        let mid = a.len().div_ceil(CHUNK) / 2 * CHUNK;
        let (a0, a1) = a.split_at_mut(mid);
        let (b0, b1) = b.split_at(mid);
        rayon::join(|| axpy(true, a0, s, b0), || axpy(true, a1, s, b1));
        return;
    }
    let sv = f32x8::splat(s);
    let lane = |x: [f32; 8], y: [f32; 8]| (f32x8::from(x) + sv * f32x8::from(y)).to_array();
    let mut ac = a.chunks_exact_mut(8);
    let mut bc = b.chunks_exact(8);
    for (x, y) in (&mut ac).zip(&mut bc) {
        let r = lane(
            x[..].try_into().expect("a full lane"),
            y.try_into().expect("a full lane"),
        );
        x.copy_from_slice(&r);
    }
    // The tail runs the same lane code, zero-padded.
    let (x, y) = (ac.into_remainder(), bc.remainder());
    let (mut xa, mut ya) = ([0.0; 8], [0.0; 8]);
    xa[..x.len()].copy_from_slice(x);
    ya[..y.len()].copy_from_slice(y);
    x.copy_from_slice(&lane(xa, ya)[..x.len()]);
}
