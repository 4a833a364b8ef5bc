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
use crate::lane::{self, Lane, OnLanes, MAX_LANES};

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
            L::load(&s[self.at..self.at + L::LANES])
        } else {
            L::load_padded(&s[self.at..self.at + self.valid])
        }
    }

    /// Stores the valid values of `v` into `s` here.
    #[inline(always)]
    pub fn store<L: Lane>(self, v: L, s: &mut [f32]) {
        if self.valid == L::LANES {
            v.store(&mut s[self.at..self.at + L::LANES]);
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

/// Values of a group: a group adds one value to each of the eight `f32` sums.
const GROUP: usize = 8;

/// A sum over the values a pass reduces, in the order of the values whatever lanes the pass
/// runs on: value `i` (counted from the start) is added to the `i % 8`-th of eight `f32` sums,
/// as an `f32x8` pass adds its lanes ([`EightSums`](crate::lane::EightSums)), and every 256
/// values the eight sums are widened and added, in lane order, to an [`Accumulator`]. So a
/// sum gives the same bits on every lane type, and whether the pass runs flat or row by row.
///
/// On lanes of eight or sixteen the sums are kept turned by the place of the next value in
/// its group of eight (a row whose length is not a multiple of eight leaves the next row's
/// lanes there): lane `j` holds sum `(shift + j) % 8`, so that the next value always goes to
/// lane 0 and a whole lane is one addition per eight values (in a register of the pass's own
/// type on lanes of eight) wherever it starts. A partial lane adds its values with zeros in
/// the other lanes (adding a zero changes no sum's bits that the widening keeps: it only
/// turns `-0.0` into `+0.0`, and the widening starts from `+0.0`) and turns the sums by as
/// many places; a lane that crosses the 256th value of a block is added one value at a time.
#[derive(Clone, Copy, Debug)]
pub struct Sum<L: Lane> {
    /// The eight sums, turned, when `L` has eight lanes.
    lanes: L,
    /// The eight sums for the other lane types (turned when they have sixteen lanes).
    sums: [f32; GROUP],
    /// Values added since the sums were last widened; the place of the next value in its
    /// group (`count % 8`) is how far the sums are turned.
    count: usize,
    total: Accumulator,
}

impl<L: Lane> Default for Sum<L> {
    fn default() -> Self {
        Self::new()
    }
}

impl<L: Lane> Sum<L> {
    /// An empty sum.
    pub const fn new() -> Self {
        Sum {
            lanes: L::ZERO,
            sums: [0.0; GROUP],
            count: 0,
            total: Accumulator::ZERO,
        }
    }

    /// Adds the valid values of lane `v`, at `at`.
    #[inline(always)]
    pub fn add(&mut self, at: At, v: L) {
        let valid = at.valid;
        if L::LANES == 1 || self.count + valid > INNER {
            // One lane, or a lane that crosses the 256th value of the block.
            let mut values = [0.0; MAX_LANES];
            v.store(&mut values[..L::LANES]);
            self.add_each(&values[..valid]);
            return;
        }
        if L::LANES == GROUP {
            // The next value goes to lane 0 of the turned sums.
            if valid == GROUP {
                self.lanes += v;
            } else {
                self.lanes += first_lanes(v, valid);
                self.lanes = turned_lanes(self.lanes, valid);
            }
        } else {
            let mut values = [0.0; MAX_LANES];
            v.store(&mut values[..L::LANES]);
            for (j, &x) in values[..valid].iter().enumerate() {
                self.sums[j % GROUP] += x;
            }
            self.sums = turn_by(self.sums, valid % GROUP);
        }
        self.count += valid;
        if self.count == INNER {
            self.widen();
        }
    }

    /// Adds one value.
    #[inline(always)]
    pub fn add_value(&mut self, x: f32) {
        self.add(At { at: 0, valid: 1 }, L::splat(x));
    }

    /// Adds `values` one at a time (one lane, or across a widening).
    #[inline(always)]
    fn add_each(&mut self, values: &[f32]) {
        if L::LANES == 1 {
            for &x in values {
                self.sums[self.count % GROUP] += x;
                self.count += 1;
                if self.count == INNER {
                    self.widen();
                }
            }
            return;
        }
        let turned = add_turned(self.turned(), &mut self.count, &mut self.total, values);
        if L::LANES == GROUP {
            self.lanes = L::load(&turned);
        } else {
            self.sums = turned;
        }
    }

    /// The eight sums as they are kept (turned, but on one lane).
    #[inline(always)]
    fn turned(&self) -> [f32; GROUP] {
        if L::LANES == GROUP {
            let mut lanes = [0.0; MAX_LANES];
            self.lanes.store(&mut lanes[..GROUP]);
            core::array::from_fn(|i| lanes[i])
        } else {
            self.sums
        }
    }

    /// The eight sums in their order.
    #[inline(always)]
    fn in_order(&self) -> [f32; GROUP] {
        if L::LANES == 1 {
            self.sums
        } else {
            in_order(self.turned(), self.count % GROUP)
        }
    }

    /// Widens the sums into the total and starts them again, after 256 values.
    #[inline(always)]
    fn widen(&mut self) {
        let sums = self.in_order();
        widen_into(&mut self.total, &sums);
        self.lanes = L::ZERO;
        self.sums = [0.0; GROUP];
        self.count = 0;
    }

    /// The sum of every value added.
    pub fn total(self) -> f32 {
        let mut total = self.total;
        if self.count > 0 {
            widen_into(&mut total, &self.in_order());
        }
        narrow(total.total())
    }
}

/// Adds `values` one at a time to the sums `turned` by `count % 8` (`count` values in the
/// block of 256, widened into `total` when it fills), and returns the sums turned by the new
/// `count % 8`: the path of a lane that crosses the 256th value of a block, out of the lane
/// loops.
#[cold]
#[inline(never)]
fn add_turned(
    turned: [f32; GROUP],
    count: &mut usize,
    total: &mut Accumulator,
    values: &[f32],
) -> [f32; GROUP] {
    let mut sums = in_order(turned, *count % GROUP);
    for &x in values {
        sums[*count % GROUP] += x;
        *count += 1;
        if *count == INNER {
            widen_into(total, &sums);
            sums = [0.0; GROUP];
            *count = 0;
        }
    }
    turn_by(sums, *count % GROUP)
}

/// The first `valid` lanes of `v`, zeros in the others.
#[inline(always)]
fn first_lanes<L: Lane>(v: L, valid: usize) -> L {
    const INDEX: [f32; MAX_LANES] = [
        0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0,
    ];
    let index = L::load(&INDEX[..L::LANES]);
    index.simd_lt(L::splat(valid as f32)).select(v, L::ZERO)
}

/// The eight sums in the lanes of `lanes`, turned by `by` more places: lane `j` takes lane
/// `(j + by) % 8`.
#[inline(always)]
fn turned_lanes<L: Lane>(lanes: L, by: usize) -> L {
    let mut twice = [0.0; 2 * GROUP];
    lanes.store(&mut twice[..GROUP]);
    lanes.store(&mut twice[GROUP..]);
    L::load(&twice[by..by + GROUP])
}

/// `sums` turned by `by` more places: value `j` takes value `(j + by) % 8`.
#[inline(always)]
fn turn_by(sums: [f32; GROUP], by: usize) -> [f32; GROUP] {
    core::array::from_fn(|j| sums[(j + by) % GROUP])
}

/// The sums `turned` by `shift` (value `j` holds sum `(shift + j) % 8`) in their order.
#[inline(always)]
fn in_order(turned: [f32; GROUP], shift: usize) -> [f32; GROUP] {
    core::array::from_fn(|s| turned[(s + GROUP - shift) % GROUP])
}

/// Adds the eight `sums`, widened and added in order, to `total`.
fn widen_into(total: &mut Accumulator, sums: &[f32; GROUP]) {
    let mut lanes = Accumulator::ZERO;
    sums.iter().for_each(|&a| lanes.add(widen(a)));
    total.add(lanes.total());
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

    /// The sum of `x` by its definition: value `i` into the `i % 8`-th `f32` sum, the eight
    /// widened and added in order after every 256 values and at the end.
    fn by_definition(x: &[f32]) -> u32 {
        let mut total = Accumulator::ZERO;
        for block in x.chunks(INNER) {
            let mut sums = [0.0f32; GROUP];
            block
                .iter()
                .enumerate()
                .for_each(|(i, v)| sums[i % GROUP] += v);
            let mut lanes = Accumulator::ZERO;
            sums.iter().for_each(|&a| lanes.add(widen(a)));
            total.add(lanes.total());
        }
        narrow(total.total()).to_bits()
    }

    /// Sums of the lanes of every lane type, flat or in rows of any length, after values
    /// added one at a time or not, have the bits of the sum of the values in order.
    #[test]
    fn sums_do_not_depend_on_lanes_or_rows() {
        /// Sums `x`: its first `head` values one at a time, the rest in rows of `cols`.
        struct Summed<'a> {
            x: &'a [f32],
            head: usize,
            cols: usize,
        }
        impl OnLanes for Summed<'_> {
            type Output = u32;
            fn run<L: Lane>(self) -> u32 {
                let (head, rest) = self.x.split_at(self.head);
                let mut sum = Sum::<L>::new();
                head.iter().for_each(|&v| sum.add_value(v));
                for row in rest.chunks(self.cols) {
                    for at in lanes::<L>(row.len()) {
                        sum.add(at, at.load(row));
                    }
                }
                sum.total().to_bits()
            }
        }
        let x: [f32; 1031] = core::array::from_fn(|i| match i % 11 {
            5 => -0.0,
            _ => ((i * 7919) % 1000) as f32 / 250.0 - 2.0,
        });
        for n in [0, 1, 7, 8, 9, 16, 17, 255, 256, 257, 1031] {
            let x = &x[..n];
            let want = by_definition(x);
            for head in [0, 1, 3, 8, 9].into_iter().filter(|&h| h <= n) {
                for cols in [1, 3, 8, 13, 16, 64, 1031] {
                    let summed = || Summed { x, head, cols };
                    let got = summed().run::<f32>();
                    assert_eq!(got, want, "n {n}, head {head}, cols {cols}");
                    for c in Capability::ALL {
                        let got = run_on(c, summed());
                        assert_eq!(got, want, "{c:?} n {n}, head {head}, cols {cols}");
                    }
                }
            }
        }
    }

    /// A sum is close to the `f64` sum of its values.
    #[test]
    fn sums_are_accurate() {
        let mut sum = Sum::<f32>::new();
        let mut want = 0.0f64;
        for i in 0..10_000 {
            let v = ((i * 37) % 101) as f32 * 1e-3 - 0.05;
            sum.add_value(v);
            want += f64::from(v);
        }
        assert!((f64::from(sum.total()) - want).abs() < 1e-6, "{want}");
    }
}
