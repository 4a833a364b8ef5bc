//! What the passes of a tensor-wise rule ([`Rule::TENSOR_WISE`]) are made of: the lanes of a
//! buffer ([`lanes`], [`At`]) and the sums of its reductions ([`Sum`]), in a fixed order that
//! gives the same bits on every lane type; and the driver that hands a rule one tensor at a
//! time, its gradient transformed as the fused pass transforms it.
//!
//! `optimizer!` plans a rule that reads per-tensor reductions (`norm(u)`, `mean(g * g)`), row
//! or column statistics or matrix steps as a few passes over each tensor: each pass loads its
//! lanes with [`At::load`], stores them with [`At::store`] (a partial lane at the end of a
//! row or of the tensor is zero-padded and only its valid values are written back) and adds
//! what it reduces into a [`Sum`].

use super::kernel::Segment;
use super::rule::{Rule, Shape, TensorUpdate, MAX_SLOTS};
use crate::accumulate::{narrow, widen, Accumulator};
use crate::lane::{self, EightSums, Lane, OnLanes, MAX_LANES};

/// One lane's place in a buffer: its first value and how many of its values are in the buffer
/// (fewer than the lane type's only for the last lane).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct At {
    /// Index of the lane's first value.
    pub at: usize,
    /// How many of its values lie in the buffer.
    pub valid: usize,
}

impl At {
    /// The lane of `s` here, zero-padded past the end.
    #[inline(always)]
    pub fn load<L: Lane>(self, s: &[f32]) -> L {
        if self.valid == L::LANES {
            L::load(&s[self.at..])
        } else {
            L::load_padded(&s[self.at..self.at + self.valid])
        }
    }

    /// Stores the valid values of `v` into `s` here.
    #[inline(always)]
    pub fn store<L: Lane>(self, v: L, s: &mut [f32]) {
        if self.valid == L::LANES {
            v.store(&mut s[self.at..]);
        } else {
            v.store_partial(&mut s[self.at..self.at + self.valid]);
        }
    }

    /// The same lane in a buffer where this one's buffer starts at `base`.
    #[inline(always)]
    pub fn offset(self, base: usize) -> At {
        At {
            at: base + self.at,
            valid: self.valid,
        }
    }
}

/// The lanes of type `L` that cover `0..n`, the last one possibly partial.
#[inline(always)]
pub fn lanes<L: Lane>(n: usize) -> impl Iterator<Item = At> {
    lane::pieces::<L>(n).map(|(at, valid)| At { at, valid })
}

/// Values summed in `f32` lane order before they are widened into the total.
const INNER: usize = 256;

/// A sum over the values a pass reduces, in the order of the values whatever lanes the pass
/// runs on: the values are taken in turn into blocks of sixteen, each block is added to eight
/// `f32` sums as an `f32x8` pass adds it ([`EightSums`]), and every 256 values the eight
/// sums are widened and added, in lane order, to an [`Accumulator`]. So a sum gives the same
/// bits on every lane type, and whether the pass runs flat or row by row.
#[derive(Clone, Copy, Debug)]
pub struct Sum {
    block: [f32; MAX_LANES],
    filled: usize,
    eight: EightSums,
    inner: usize,
    total: Accumulator,
}

impl Default for Sum {
    fn default() -> Self {
        Self::new()
    }
}

impl Sum {
    /// An empty sum.
    pub const fn new() -> Self {
        Sum {
            block: [0.0; MAX_LANES],
            filled: 0,
            eight: EightSums::new(),
            inner: 0,
            total: Accumulator::ZERO,
        }
    }

    /// Adds the valid values of lane `v`, at `at`.
    #[inline(always)]
    pub fn add<L: Lane>(&mut self, at: At, v: L) {
        if at.valid == L::LANES && self.filled + L::LANES <= MAX_LANES {
            v.store(&mut self.block[self.filled..]);
            self.filled += L::LANES;
            if self.filled == MAX_LANES {
                self.flush();
            }
            return;
        }
        let mut values = [0.0; MAX_LANES];
        v.store(&mut values[..L::LANES]);
        for &x in &values[..at.valid] {
            self.add_value(x);
        }
    }

    /// Adds one value.
    #[inline(always)]
    pub fn add_value(&mut self, x: f32) {
        self.block[self.filled] = x;
        self.filled += 1;
        if self.filled == MAX_LANES {
            self.flush();
        }
    }

    /// Adds the block (zero-padded past what it holds) to the eight sums.
    #[inline(always)]
    fn flush(&mut self) {
        self.block[self.filled..].fill(0.0);
        self.eight.add_slice(&self.block);
        self.filled = 0;
        self.inner += MAX_LANES;
        if self.inner >= INNER {
            self.widen();
        }
    }

    /// Widens the eight sums into the total.
    fn widen(&mut self) {
        let mut lanes = Accumulator::ZERO;
        self.eight.lanes().iter().for_each(|&a| lanes.add(widen(a)));
        self.total.add(lanes.total());
        self.eight = EightSums::new();
        self.inner = 0;
    }

    /// The sum of every value added.
    pub fn total(mut self) -> f32 {
        if self.filled > 0 {
            self.flush();
        }
        if self.inner > 0 {
            self.widen();
        }
        narrow(self.total.total())
    }
}

/// The buffers of one tensor-wise step: the gradient transforms of each tensor's segment are
/// applied into `gradient` (as long as the largest tensor, or empty when the configuration has
/// none), and `work` is the rule's scratch.
pub(crate) struct TensorBuffers<'a> {
    /// The tensor's parameters.
    pub params: &'a mut [f32],
    /// The tensor's gradient.
    pub grads: &'a [f32],
    /// The tensor's part of each slot.
    pub slots: [&'a mut [f32]; MAX_SLOTS],
    /// The EMA of the tensor's parameters (empty without EMA).
    pub ema: &'a mut [f32],
    /// Room for the transformed gradient.
    pub gradient: &'a mut [f32],
    /// The rule's scratch.
    pub work: &'a mut [f32],
}

/// What the per-tensor part of a step around the rule does: the values the fused pass folds
/// into its lanes, applied here pass by pass.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Around {
    /// Element-wise clipping of the gradient to `[-v, v]`.
    pub clip_value: Option<f32>,
    /// EMA momentum of this step, if the EMA is kept.
    pub ema_momentum: Option<f32>,
    /// Overwrite the weights with their EMA after this step.
    pub ema_overwrite: bool,
}

/// Updates one tensor of `shape` on `branch` with `segment`'s values: the gradient transforms
/// (into `bufs.gradient` when there are any), decoupled weight decay, the rule's passes and the
/// EMA.
pub(crate) fn update_tensor<R: Rule>(
    segment: &Segment<R>,
    around: Around,
    shape: Shape,
    branch: usize,
    bufs: TensorBuffers<'_>,
) {
    let TensorBuffers {
        params,
        grads,
        slots,
        ema,
        gradient,
        work,
    } = bufs;
    let transformed = segment.grad_scale != 1.0 || segment.l2 != 0.0 || around.clip_value.is_some();
    let g: &[f32] = if transformed {
        let gradient = &mut gradient[..grads.len()];
        transform_gradient(segment, around.clip_value, params, grads, gradient);
        gradient
    } else {
        grads
    };
    if segment.decay != 0.0 {
        params.iter_mut().for_each(|p| *p -= *p * segment.decay);
    }
    lane::dispatch_for(
        params.len(),
        RuleOnTensor::<R> {
            step: &segment.step,
            tensor: TensorUpdate {
                shape,
                branch,
                p: &mut *params,
                g,
                slots,
                work,
            },
        },
    );
    if let Some(momentum) = around.ema_momentum {
        for (e, p) in ema.iter_mut().zip(params.iter_mut()) {
            *e = momentum * *e + (1.0 - momentum) * *p;
            if around.ema_overwrite {
                *p = *e;
            }
        }
    }
}

/// `gradient = clip(grads * scale) + l2 * params`, as the fused pass transforms each lane.
fn transform_gradient<R: Rule>(
    segment: &Segment<R>,
    clip_value: Option<f32>,
    params: &[f32],
    grads: &[f32],
    gradient: &mut [f32],
) {
    let clip = clip_value.unwrap_or(f32::INFINITY);
    for ((out, &g), &p) in gradient.iter_mut().zip(grads).zip(params) {
        let mut g = g * segment.grad_scale;
        // Compare-and-blend rather than `clamp`, so that a NaN gradient stays NaN.
        if g < -clip {
            g = -clip;
        }
        if g > clip {
            g = clip;
        }
        *out = g + segment.l2 * p;
    }
}

/// A rule's [`update_tensor`](Rule::update_tensor), run on the lanes [`lane::dispatch`] picks.
struct RuleOnTensor<'a, R: Rule> {
    step: &'a R::Step,
    tensor: TensorUpdate<'a>,
}

impl<R: Rule> OnLanes for RuleOnTensor<'_, R> {
    type Output = ();
    #[inline(always)]
    fn run<L: Lane>(self) {
        R::update_tensor::<L>(self.step, self.tensor);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lane::{run_on, Capability};

    /// Sums of the lanes of every lane type, flat or in rows of any length, have the bits of
    /// one sum of the values in order.
    #[test]
    fn sums_do_not_depend_on_lanes_or_rows() {
        struct Summed<'a>(&'a [f32], usize);
        impl OnLanes for Summed<'_> {
            type Output = u32;
            fn run<L: Lane>(self) -> u32 {
                let (x, cols) = (self.0, self.1);
                let mut sum = Sum::new();
                for row in x.chunks(cols) {
                    for at in lanes::<L>(row.len()) {
                        let v: L = at.load(row);
                        sum.add(at, v * v);
                    }
                }
                sum.total().to_bits()
            }
        }
        let x: [f32; 1031] = core::array::from_fn(|i| ((i * 7919) % 1000) as f32 / 250.0 - 2.0);
        for n in [0, 1, 7, 8, 9, 16, 17, 255, 256, 257, 1031] {
            let x = &x[..n];
            let mut want = Sum::new();
            x.iter().for_each(|v| want.add_value(v * v));
            let want = want.total().to_bits();
            for cols in [1, 3, 8, 13, 16, 64, 1031] {
                assert_eq!(Summed(x, cols).run::<f32>(), want, "n {n}, cols {cols}");
                for c in Capability::ALL {
                    assert_eq!(run_on(c, Summed(x, cols)), want, "{c:?} n {n}, cols {cols}");
                }
            }
        }
    }

    /// A sum is close to the `f64` sum of its values.
    #[test]
    fn sums_are_accurate() {
        let mut sum = Sum::new();
        let mut want = 0.0f64;
        for i in 0..10_000 {
            let v = ((i * 37) % 101) as f32 * 1e-3 - 0.05;
            sum.add_value(v);
            want += f64::from(v);
        }
        assert!((f64::from(sum.total()) - want).abs() < 1e-6, "{want}");
    }
}
