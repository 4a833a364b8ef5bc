//! The tensor-wise rules `keras::Lamb`, `keras::Adafactor` (a factored matrix) and
//! `keras::Muon` (a matrix) as plain Rust loops: the same passes over the tensor as the code
//! `optimizer!` plans for them, each a `for` over zipped slices that the compiler vectorizes
//! with the build's flags, with the same per-step scalars and the same
//! roundings, so that they compute the built-ins bit for bit (`benches/optim.rs` checks it).
//! They set the speed the fused passes are held to.
//!
//! A pass that sums runs a block of 256 values at a time: a loop over the block's values writes
//! what it sums into an array, whose values are then added in order, value `i` into the
//! `i % 8`-th of eight `f32` sums, the eight widened into an `f64` total, in order, every 256
//! values: the order of the runtime's `tensorwise::Sum` with the default accumulators.
//!
//! - LAMB: pass 1 updates both moments and sums `p^2` and `u^2`; pass 2 computes `u` again
//!   and takes the step scaled by the trust ratio.
//! - Adafactor: pass 1, row by row, sums `p^2`, each row's `g^2 + eps_1` and each column's;
//!   pass 2 updates the column and row statistics and sums the rows'; pass 3 writes the
//!   velocity `r / mean(r) * c` and sums `u^2` (`u = g / sqrt(velocity)`); pass 4 takes the
//!   clipped step.
//! - Muon: pass 1 decays `p`, updates the momentum and sums the Nesterov step's squares; pass
//!   2 writes the normalised step into the matrix the Newton-Schulz iteration runs on
//!   (`fusegraph::optim::newton_schulz`, the same call as the fused step's); pass 3 takes the
//!   orthogonalised step.

use fusegraph::optim::keras::{Adafactor, Lamb, Muon};
use fusegraph::optim::{newton_schulz, newton_schulz_work, Coefficients};
use fusegraph_runtime::aligned::AlignedFloats;
use fusegraph_runtime::math;

/// Values a sum takes in `f32` before its eight sums are widened, and the values of a block
/// of a pass that sums.
const INNER: usize = 256;

/// A sum in the order of the fused pass's: value `i` into sum `i % 8`, the eight sums widened
/// and added in order every [`INNER`] values.
struct Sums {
    eight: [f32; 8],
    count: usize,
    total: f64,
}

impl Sums {
    fn new() -> Self {
        Sums {
            eight: [0.0; 8],
            count: 0,
            total: 0.0,
        }
    }

    /// Adds the values of `x` in order.
    #[inline(always)]
    fn add_slice(&mut self, mut x: &[f32]) {
        while !x.is_empty() {
            if !self.count.is_multiple_of(8) {
                self.add(x[0]);
                x = &x[1..];
                continue;
            }
            let (head, rest) = x.split_at((INNER - self.count).min(x.len()));
            let (eights, tail) = head.as_chunks::<8>();
            for e in eights {
                for (s, v) in self.eight.iter_mut().zip(e) {
                    *s += v;
                }
            }
            self.count += 8 * eights.len();
            if self.count == INNER {
                self.widen();
            }
            tail.iter().for_each(|&v| self.add(v));
            x = rest;
        }
    }

    /// Adds one value.
    #[inline(always)]
    fn add(&mut self, x: f32) {
        self.eight[self.count % 8] += x;
        self.count += 1;
        if self.count == INNER {
            self.widen();
        }
    }

    fn widen(&mut self) {
        self.total += self.eight.iter().fold(0.0, |a, &x| a + f64::from(x));
        self.eight = [0.0; 8];
        self.count = 0;
    }

    fn total(mut self) -> f32 {
        if self.count > 0 {
            self.widen();
        }
        self.total as f32
    }
}

/// Keras' `1 - beta`: the Python float, rounded to `f32` once.
fn one_minus(beta: f32) -> f32 {
    (1.0 - math::decimal_f64(beta)) as f32
}

/// `a / b`, or 1 where either is 0 (LAMB's trust ratio).
fn trust_ratio(w_norm: f32, u_norm: f32) -> f32 {
    if w_norm > 0.0 && u_norm > 0.0 {
        w_norm / u_norm
    } else {
        1.0
    }
}

/// Keras LAMB's per-step scalars.
#[derive(Clone, Copy)]
struct LambStep {
    one_minus_beta_1: f32,
    one_minus_beta_2: f32,
    correction_1: f32,
    correction_2: f32,
    epsilon: f32,
}

/// Updates one element's moments and returns its `u`.
#[inline(always)]
fn lamb_moments(k: &LambStep, g: f32, m: &mut f32, v: &mut f32) -> f32 {
    *m += (g - *m) * k.one_minus_beta_1;
    *v += (g * g - *v) * k.one_minus_beta_2;
    lamb_u(k, *m, *v)
}

/// LAMB's `u = m_hat / (sqrt(v_hat) + epsilon)`.
#[inline(always)]
fn lamb_u(k: &LambStep, m: f32, v: f32) -> f32 {
    m / k.correction_1 / ((v / k.correction_2).sqrt() + k.epsilon)
}

/// LAMB's first pass: the moments, and the sums of `p^2` and `u^2`, a block at a time.
#[inline(never)]
fn lamb_pass_1(k: &LambStep, p: &[f32], g: &[f32], m: &mut [f32], v: &mut [f32]) -> (f32, f32) {
    let (mut pp, mut uu) = (Sums::new(), Sums::new());
    let blocks = p.chunks(INNER).zip(g.chunks(INNER));
    for ((p, g), (m, v)) in blocks.zip(m.chunks_mut(INNER).zip(v.chunks_mut(INNER))) {
        let (mut p2, mut u2) = ([0.0; INNER], [0.0; INNER]);
        let squares = p2.iter_mut().zip(u2.iter_mut());
        for ((((p, &g), m), v), (p2, u2)) in p.iter().zip(g).zip(m).zip(v).zip(squares) {
            let u = lamb_moments(k, g, m, v);
            *p2 = p * p;
            *u2 = u * u;
        }
        pp.add_slice(&p2[..p.len()]);
        uu.add_slice(&u2[..p.len()]);
    }
    (pp.total(), uu.total())
}

/// LAMB's second pass: `p -= step * u`, `u` computed again from the moments.
#[inline(never)]
fn lamb_pass_2(k: &LambStep, step: f32, p: &mut [f32], m: &[f32], v: &[f32]) {
    for ((p, &m), &v) in p.iter_mut().zip(m).zip(v) {
        *p -= step * lamb_u(k, m, v);
    }
}

/// Keras LAMB as plain loops, with its slots.
pub struct PlainLamb {
    rule: Lamb,
    t: u64,
    m: AlignedFloats,
    v: AlignedFloats,
}

impl PlainLamb {
    /// State for a tensor of `n` values.
    pub fn new(rule: Lamb, n: usize) -> Self {
        PlainLamb {
            rule,
            t: 0,
            m: AlignedFloats::zeros(n),
            v: AlignedFloats::zeros(n),
        }
    }

    /// One step.
    pub fn step(&mut self, p: &mut [f32], g: &[f32]) {
        self.t += 1;
        let t = self.t as f32;
        let r = self.rule;
        let k = LambStep {
            one_minus_beta_1: one_minus(r.beta_1),
            one_minus_beta_2: one_minus(r.beta_2),
            correction_1: 1.0 - math::powf(r.beta_1, t),
            correction_2: 1.0 - math::powf(r.beta_2, t),
            epsilon: r.epsilon,
        };
        let (pp, uu) = lamb_pass_1(&k, p, g, &mut self.m, &mut self.v);
        let ratio = trust_ratio(math::sqrt(pp), math::sqrt(uu));
        lamb_pass_2(&k, ratio * r.lr, p, &self.m, &self.v);
    }
}

/// Keras Adafactor's per-step scalars.
#[derive(Clone, Copy)]
struct AdafactorStep {
    rho: f32,
    beta_2_t: f32,
    one_minus_beta_2_t: f32,
    epsilon_1: f32,
}

/// Adafactor's first pass over one row: sums `p^2` into `pp` and `g^2 + eps_1` into the
/// row's sum (returned) and into each column's, a block at a time.
#[inline(always)]
fn adafactor_row_sums(
    k: &AdafactorStep,
    p: &[f32],
    g: &[f32],
    col_sums: &mut [f32],
    pp: &mut Sums,
) -> f32 {
    let mut row = Sums::new();
    let blocks = p.chunks(INNER).zip(g.chunks(INNER));
    for ((p, g), c) in blocks.zip(col_sums.chunks_mut(INNER)) {
        let (mut p2, mut g2) = ([0.0; INNER], [0.0; INNER]);
        let squares = p2.iter_mut().zip(g2.iter_mut());
        for (((p, g), c), (p2, g2)) in p.iter().zip(g).zip(c).zip(squares) {
            *p2 = p * p;
            *g2 = g * g + k.epsilon_1;
            *c += *g2;
        }
        pp.add_slice(&p2[..p.len()]);
        row.add_slice(&g2[..p.len()]);
    }
    row.total()
}

/// Adafactor's first pass: the sum of `p^2`, and the means of `g^2 + eps_1` over each row
/// (into `row_means`) and column (into `col_means`).
#[inline(never)]
fn adafactor_pass_1(
    k: &AdafactorStep,
    p: &[f32],
    g: &[f32],
    row_means: &mut [f32],
    col_means: &mut [f32],
) -> f32 {
    let cols = col_means.len();
    col_means.fill(0.0);
    let mut pp = Sums::new();
    for ((p, g), mean) in p.chunks(cols).zip(g.chunks(cols)).zip(row_means.iter_mut()) {
        *mean = adafactor_row_sums(k, p, g, col_means, &mut pp) / cols as f32;
    }
    let rows = row_means.len() as f32;
    col_means.iter_mut().for_each(|c| *c /= rows);
    pp.total()
}

/// Adafactor's second pass: the column and row statistics; returns the mean of `r`.
#[inline(never)]
fn adafactor_pass_2(
    k: &AdafactorStep,
    r: &mut [f32],
    c: &mut [f32],
    row_means: &[f32],
    col_means: &[f32],
) -> f32 {
    for (c, &mean) in c.iter_mut().zip(col_means) {
        *c = k.beta_2_t * *c + k.one_minus_beta_2_t * mean;
    }
    let mut sum = Sums::new();
    for (r, &mean) in r.iter_mut().zip(row_means) {
        *r = k.beta_2_t * *r + k.one_minus_beta_2_t * mean;
        sum.add(*r);
    }
    sum.total() / r.len() as f32
}

/// Adafactor's third pass over one row: `velocity = r_row / mean(r) * c`, and `u^2` summed,
/// a block at a time.
#[inline(always)]
fn adafactor_row_velocity(r: f32, c: &[f32], g: &[f32], velocity: &mut [f32], uu: &mut Sums) {
    let blocks = c.chunks(INNER).zip(g.chunks(INNER));
    for ((c, g), v) in blocks.zip(velocity.chunks_mut(INNER)) {
        let mut u2 = [0.0; INNER];
        for (((c, g), v), u2) in c.iter().zip(g).zip(v).zip(u2.iter_mut()) {
            *v = r * c;
            let u = g / v.sqrt();
            *u2 = u * u;
        }
        uu.add_slice(&u2[..c.len()]);
    }
}

/// Adafactor's third pass: the velocity, and the sum of `u^2`.
#[inline(never)]
fn adafactor_pass_3(r: &[f32], mean_r: f32, c: &[f32], g: &[f32], velocity: &mut [f32]) -> f32 {
    let cols = c.len();
    let mut uu = Sums::new();
    for ((&r, g), v) in r.iter().zip(g.chunks(cols)).zip(velocity.chunks_mut(cols)) {
        adafactor_row_velocity(r / mean_r, c, g, v, &mut uu);
    }
    uu.total()
}

/// Adafactor's last pass: `p -= alpha * (u / clip)`, `u` computed again.
#[inline(never)]
fn adafactor_pass_4(alpha: f32, clip: f32, p: &mut [f32], g: &[f32], velocity: &[f32]) {
    for ((p, &g), &v) in p.iter_mut().zip(g).zip(velocity) {
        *p -= alpha * (g / v.sqrt() / clip);
    }
}

/// Keras Adafactor on a factored `rows` x `cols` matrix as plain loops, with its slots and
/// the row and column statistics' scratch.
pub struct PlainAdafactor {
    rule: Adafactor,
    t: u64,
    r: AlignedFloats,
    c: AlignedFloats,
    velocity: AlignedFloats,
    row_means: AlignedFloats,
    col_means: AlignedFloats,
}

impl PlainAdafactor {
    /// State for a `rows` x `cols` matrix.
    pub fn new(rule: Adafactor, rows: usize, cols: usize) -> Self {
        PlainAdafactor {
            rule,
            t: 0,
            r: AlignedFloats::zeros(rows),
            c: AlignedFloats::zeros(cols),
            velocity: AlignedFloats::zeros(rows * cols),
            row_means: AlignedFloats::zeros(rows),
            col_means: AlignedFloats::zeros(cols),
        }
    }

    /// One step.
    pub fn step(&mut self, p: &mut [f32], g: &[f32]) {
        self.t += 1;
        let t = self.t as f32;
        let rule = self.rule;
        let beta_2_t = 1.0 - math::powf(t, rule.beta_2_decay);
        let k = AdafactorStep {
            rho: math::min(rule.lr, 1.0 / math::sqrt(t)),
            beta_2_t,
            one_minus_beta_2_t: 1.0 - beta_2_t,
            epsilon_1: rule.epsilon_1,
        };
        let n = p.len() as f32;
        let pp = adafactor_pass_1(&k, p, g, &mut self.row_means, &mut self.col_means);
        let alpha = math::max(rule.epsilon_2, math::sqrt(pp / n)) * k.rho;
        let mean_r = adafactor_pass_2(
            &k,
            &mut self.r,
            &mut self.c,
            &self.row_means,
            &self.col_means,
        );
        let uu = adafactor_pass_3(&self.r, mean_r, &self.c, g, &mut self.velocity);
        let clip = math::max(1.0, math::sqrt(uu / n) / rule.clip_threshold);
        adafactor_pass_4(alpha, clip, p, g, &self.velocity);
    }
}

/// Keras Muon's per-step scalars (its matrix branch).
#[derive(Clone, Copy)]
struct MuonStep {
    lr: f32,
    weight_decay: f32,
    momentum: f32,
    momentum_minus_1: f32,
    nesterov: bool,
}

/// Muon's step before normalisation: Nesterov's look-ahead or the momentum.
#[inline(always)]
fn muon_u(k: &MuonStep, g: f32, m: f32) -> f32 {
    if k.nesterov {
        g + m * k.momentum
    } else {
        m
    }
}

/// Muon's first pass: decoupled decay, the momentum, and the sum of the step's squares, a
/// block at a time.
#[inline(never)]
fn muon_pass_1(k: &MuonStep, p: &mut [f32], g: &[f32], m: &mut [f32]) -> f32 {
    let mut uu = Sums::new();
    let blocks = p.chunks_mut(INNER).zip(g.chunks(INNER));
    for ((p, g), m) in blocks.zip(m.chunks_mut(INNER)) {
        let mut u2 = [0.0; INNER];
        for (((p, &g), m), u2) in p.iter_mut().zip(g).zip(m).zip(u2.iter_mut()) {
            *p -= *p * k.weight_decay * k.lr;
            *m += g + *m * k.momentum_minus_1;
            let u = muon_u(k, g, *m);
            *u2 = u * u;
        }
        uu.add_slice(&u2[..g.len()]);
    }
    uu.total()
}

/// Muon's second pass: the step divided by `divisor` (its norm plus Keras' epsilon) into `x`.
#[inline(never)]
fn muon_pass_2(k: &MuonStep, divisor: f32, g: &[f32], m: &[f32], x: &mut [f32]) {
    for ((x, &g), &m) in x.iter_mut().zip(g).zip(m) {
        *x = muon_u(k, g, m) / divisor;
    }
}

/// Muon's last pass: `p -= lr * o * scale`.
#[inline(never)]
fn muon_pass_3(lr: f32, scale: f32, p: &mut [f32], o: &[f32]) {
    for (p, &o) in p.iter_mut().zip(o) {
        *p -= lr * o * scale;
    }
}

/// Keras Muon on a `rows` x `cols` matrix as plain loops around the same Newton-Schulz call
/// as the fused step, with its slot and scratch.
pub struct PlainMuon {
    rule: Muon,
    rows: usize,
    cols: usize,
    momentum: AlignedFloats,
    x: AlignedFloats,
    work: AlignedFloats,
}

impl PlainMuon {
    /// State for a `rows` x `cols` matrix.
    pub fn new(rule: Muon, rows: usize, cols: usize) -> Self {
        PlainMuon {
            rule,
            rows,
            cols,
            momentum: AlignedFloats::zeros(rows * cols),
            x: AlignedFloats::zeros(rows * cols),
            work: AlignedFloats::zeros(newton_schulz_work(rows, cols)),
        }
    }

    /// One step.
    pub fn step(&mut self, p: &mut [f32], g: &[f32]) {
        let r = self.rule;
        let k = MuonStep {
            lr: r.lr,
            weight_decay: r.weight_decay,
            momentum: r.momentum,
            momentum_minus_1: (math::decimal_f64(r.momentum) - 1.0) as f32,
            nesterov: r.nesterov > 0.0,
        };
        let uu = muon_pass_1(&k, p, g, &mut self.momentum);
        muon_pass_2(&k, math::sqrt(uu) + 1e-7, g, &self.momentum, &mut self.x);
        let coefficients = Coefficients {
            a: r.muon_a,
            b: r.muon_b,
            c: r.muon_c,
        };
        let (rows, cols) = (self.rows, self.cols);
        let steps = r.ns_steps as u32;
        newton_schulz(&mut self.x, rows, cols, steps, coefficients, &mut self.work);
        let scale = if r.rms_rate > 0.0 {
            math::sqrt(rows.max(cols) as f32) * r.rms_rate
        } else {
            1.0
        };
        muon_pass_3(r.lr, scale, p, &self.x);
    }
}
