//! The fused pass: one sweep over parameters, gradients, slots (and the EMA buffer) that applies
//! gradient transforms, weight decay, the rule and the EMA in `f32x8` lanes.
//!
//! Every element goes through the same lane code: the last partial lane of a piece is copied
//! into a zero-padded lane, updated, and copied back. Since the update is element-wise, the
//! result does not depend on the length, the alignment, the segment bounds or how the buffer is
//! split across threads.

use super::rule::{Rule, MAX_SLOTS};
use crate::kernels::parallel::join;
use crate::kernels::simd;
use crate::LANES;
use wide::f32x8;

/// Buffers of at least this many elements are split across the rayon pool (feature
/// `parallel`); smaller ones never touch it. A hand-off into the pool costs about 15 us on a
/// 2-core machine: `bench_optim` measured fused Adam on two threads 1.2x faster than on one at
/// 2^19 elements and 0.85x at 2^18.
pub const PARALLEL_THRESHOLD: usize = 1 << 19;
/// Size of the pieces a parallel pass is split into (a multiple of [`LANES`]).
pub const PARALLEL_CHUNK: usize = 1 << 16;

/// One parameter tensor's part of the flat buffer, with its per-step values.
pub struct Segment<R: Rule> {
    /// Exclusive end of the segment in the pass's buffers (the start is the previous end, or
    /// 0); a segment may cover several tensors that share their per-step values.
    pub end: usize,
    /// The rule's per-step scalars for this tensor (they differ when its hyper-parameters are
    /// overridden).
    pub step: R::Step,
    /// Factor on the gradient: norm clipping and `maximize` (`-1`) folded together.
    pub grad_scale: f32,
    /// Coupled weight decay: `g += l2 * p`.
    pub l2: f32,
    /// Decoupled weight decay: `p -= p * decay` before the rule.
    pub decay: f32,
}

impl<R: Rule> Clone for Segment<R> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<R: Rule> Copy for Segment<R> {}

/// Per-step values shared by every segment.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pass {
    /// Element-wise gradient clipping to `[-v, v]`.
    pub clip_value: Option<f32>,
    /// EMA momentum of this step (`0` on the first step); `None` without EMA.
    pub ema_momentum: Option<f32>,
    /// Overwrite the weights with their EMA after this step.
    pub ema_overwrite: bool,
}

/// The buffers one pass reads and writes, all as long as `params`: the slots (one slice each,
/// in slot order; the ones past the rule's slots are empty) and the EMA buffer (empty without
/// EMA).
pub struct Buffers<'a> {
    /// Parameters, updated in place.
    pub params: &'a mut [f32],
    /// Gradients, read only.
    pub grads: &'a [f32],
    /// The rule's slots.
    pub slots: [&'a mut [f32]; MAX_SLOTS],
    /// EMA of the parameters.
    pub ema: &'a mut [f32],
}

/// Runs the fused update of `rule` over `bufs`.
///
/// `segments` cover the buffer in order (the last `end` equals the length). Panics if the
/// buffers disagree in length, which is a bug in the caller (an
/// [`Optimizer`](super::Optimizer) keeps them together).
pub fn apply<R: Rule>(segments: &[Segment<R>], pass: &Pass, bufs: Buffers<'_>) {
    let n = bufs.params.len();
    let n_slots = R::SLOTS.len();
    assert!(n_slots <= MAX_SLOTS, "at most {MAX_SLOTS} slots");
    assert_eq!(
        bufs.grads.len(),
        n,
        "gradient length differs from parameters"
    );
    assert!(
        bufs.slots[..n_slots].iter().all(|s| s.len() == n),
        "slot storage length"
    );
    assert!(
        bufs.ema.len() == n || (bufs.ema.is_empty() && pass.ema_momentum.is_none()),
        "EMA buffer length"
    );
    assert_eq!(
        segments.last().map_or(0, |s| s.end),
        n,
        "segments must cover the buffer"
    );

    let lanes = Lanes {
        p: bufs.params,
        g: bufs.grads,
        s: bufs.slots,
        e: bufs.ema,
    };
    let gt = pass.clip_value.is_some() || segments.iter().any(|s| s.grad_scale != 1.0);
    let l2 = segments.iter().any(|s| s.l2 != 0.0);
    let dwd = segments.iter().any(|s| s.decay != 0.0);
    let ema = pass.ema_momentum.is_some();
    let par = n >= PARALLEL_THRESHOLD;
    macro_rules! go {
        ($($gt:literal $l2:literal $dwd:literal $ema:literal),*) => {
            match (gt, l2, dwd, ema) {
                $(($gt, $l2, $dwd, $ema) => split::<R, $gt, $l2, $dwd, $ema>(segments, pass, lanes, 0, par),)*
            }
        };
    }
    go!(
        false false false false, false false false true, false false true false, false false true true,
        false true false false, false true false true, false true true false, false true true true,
        true false false false, true false false true, true false true false, true false true true,
        true true false false, true true false true, true true true false, true true true true
    );
}

struct Lanes<'a> {
    p: &'a mut [f32],
    g: &'a [f32],
    s: [&'a mut [f32]; MAX_SLOTS],
    e: &'a mut [f32],
}

impl<'a> Lanes<'a> {
    fn len(&self) -> usize {
        self.p.len()
    }

    fn split_at(self, mid: usize) -> (Lanes<'a>, Lanes<'a>) {
        let (p0, p1) = self.p.split_at_mut(mid);
        let (g0, g1) = self.g.split_at(mid);
        let (e0, e1) = self.e.split_at_mut(mid.min(self.e.len()));
        let mut s0: [&mut [f32]; MAX_SLOTS] = Default::default();
        let mut s1: [&mut [f32]; MAX_SLOTS] = Default::default();
        for (i, s) in self.s.into_iter().enumerate() {
            let (a, b) = s.split_at_mut(mid.min(s.len()));
            s0[i] = a;
            s1[i] = b;
        }
        (
            Lanes {
                p: p0,
                g: g0,
                s: s0,
                e: e0,
            },
            Lanes {
                p: p1,
                g: g1,
                s: s1,
                e: e1,
            },
        )
    }
}

fn split<R: Rule, const GT: bool, const L2: bool, const DWD: bool, const EMA: bool>(
    segments: &[Segment<R>],
    pass: &Pass,
    lanes: Lanes<'_>,
    base: usize,
    par: bool,
) {
    let n = lanes.len();
    if par && n > PARALLEL_CHUNK {
        let mid = n.div_ceil(PARALLEL_CHUNK) / 2 * PARALLEL_CHUNK;
        let (a, b) = lanes.split_at(mid);
        join(
            true,
            || split::<R, GT, L2, DWD, EMA>(segments, pass, a, base, par),
            || split::<R, GT, L2, DWD, EMA>(segments, pass, b, base + mid, par),
        );
        return;
    }
    let mut rest = lanes;
    let mut pos = base;
    let end = base + n;
    for seg in segments {
        if seg.end > pos {
            let take = seg.end.min(end) - pos;
            let (cur, tail) = rest.split_at(take);
            piece::<R, GT, L2, DWD, EMA>(seg, pass, cur);
            rest = tail;
            pos += take;
            if pos == end {
                break;
            }
        }
    }
}

/// Values splatted once per piece.
#[derive(Clone, Copy)]
struct Consts {
    scale: f32x8,
    lo: f32x8,
    hi: f32x8,
    l2: f32x8,
    decay: f32x8,
    ema_keep: f32x8,
    ema_take: f32x8,
    overwrite: bool,
}

#[inline(always)]
fn lane<R: Rule, const GT: bool, const L2: bool, const DWD: bool, const EMA: bool>(
    step: &R::Step,
    k: &Consts,
    p: &mut f32x8,
    g: f32x8,
    s: &mut [f32x8],
    e: &mut f32x8,
) {
    let mut g = g;
    if GT {
        g *= k.scale;
        // Compare-and-blend rather than `max`/`min`, so that a NaN gradient stays NaN.
        g = g.simd_lt(k.lo).select(k.lo, g);
        g = g.simd_gt(k.hi).select(k.hi, g);
    }
    if L2 {
        g += k.l2 * *p;
    }
    if DWD {
        *p -= *p * k.decay;
    }
    R::update(step, p, g, s);
    if EMA {
        *e = k.ema_keep * *e + k.ema_take * *p;
        if k.overwrite {
            *p = *e;
        }
    }
}

/// A piece's buffers as whole lanes of eight, all of one length (the slots past the rule's, and
/// the EMA buffer without EMA, are empty).
struct LaneBufs<'a> {
    p: &'a mut [[f32; LANES]],
    g: &'a [[f32; LANES]],
    s: [&'a mut [[f32; LANES]]; MAX_SLOTS],
    e: &'a mut [[f32; LANES]],
}

/// Updates lane `c` of `b`: loads it from every buffer, runs [`lane`], stores it.
///
/// The slots are indexed by number: zipping an iterator over the slot array with the lanes
/// loses the slices' known length and brings back a bounds check per lane.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
fn lane_at<R: Rule, const GT: bool, const L2: bool, const DWD: bool, const EMA: bool>(
    step: &R::Step,
    k: &Consts,
    b: &mut LaneBufs<'_>,
    c: usize,
) {
    let ns = R::SLOTS.len();
    let mut sl = [f32x8::ZERO; MAX_SLOTS];
    let mut pl = f32x8::from(b.p[c]);
    let gl = f32x8::from(b.g[c]);
    for j in 0..ns {
        sl[j] = f32x8::from(b.s[j][c]);
    }
    let mut el = if EMA {
        f32x8::from(b.e[c])
    } else {
        f32x8::ZERO
    };
    lane::<R, GT, L2, DWD, EMA>(step, k, &mut pl, gl, &mut sl[..ns], &mut el);
    b.p[c] = pl.to_array();
    for j in 0..ns {
        b.s[j][c] = sl[j].to_array();
    }
    if EMA {
        b.e[c] = el.to_array();
    }
}

/// `x` split into its first `lanes` whole lanes and the values left over. The lanes are cut to
/// exactly `lanes` so that the compiler knows every buffer's length in the loop and drops the
/// bounds checks from it.
#[inline(always)]
fn whole_mut(x: &mut [f32], lanes: usize) -> (&mut [[f32; LANES]], &mut [f32]) {
    let (w, rest) = x.split_at_mut(lanes * LANES);
    (&mut w.as_chunks_mut().0[..lanes], rest)
}

/// Updates the last values of a piece, fewer than eight, in zero-padded lanes: copied into a
/// buffer of one lane each, run through [`lane_at`], and their valid values copied back.
fn tail<R: Rule, const GT: bool, const L2: bool, const DWD: bool, const EMA: bool>(
    step: &R::Step,
    k: &Consts,
    rest: Lanes<'_>,
) {
    let ns = R::SLOTS.len();
    let pad = |x: &[f32]| [simd::load_padded(x, 0.0).to_array()];
    let mut p = pad(rest.p);
    let g = pad(rest.g);
    let mut s = [[[0.0; LANES]]; MAX_SLOTS];
    for (d, x) in s.iter_mut().zip(&rest.s).take(ns) {
        *d = pad(x);
    }
    let mut e = pad(rest.e);
    let mut b = LaneBufs {
        p: &mut p,
        g: &g,
        s: s.each_mut().map(|x| &mut x[..]),
        e: &mut e,
    };
    lane_at::<R, GT, L2, DWD, EMA>(step, k, &mut b, 0);
    simd::store_partial(rest.p, f32x8::from(p[0]));
    for (x, d) in rest.s.into_iter().zip(&s).take(ns) {
        simd::store_partial(x, f32x8::from(d[0]));
    }
    if EMA {
        simd::store_partial(rest.e, f32x8::from(e[0]));
    }
}

/// Updates one segment's piece: its whole lanes in one loop (every buffer cut to the same
/// number of lanes first, so that the loop indexes them without bounds checks), then its
/// [`tail`].
fn piece<R: Rule, const GT: bool, const L2: bool, const DWD: bool, const EMA: bool>(
    seg: &Segment<R>,
    pass: &Pass,
    lanes: Lanes<'_>,
) {
    let ns = R::SLOTS.len();
    let clip = pass.clip_value.unwrap_or(f32::INFINITY);
    let mom = pass.ema_momentum.unwrap_or(0.0);
    let k = Consts {
        scale: f32x8::splat(seg.grad_scale),
        lo: f32x8::splat(-clip),
        hi: f32x8::splat(clip),
        l2: f32x8::splat(seg.l2),
        decay: f32x8::splat(seg.decay),
        ema_keep: f32x8::splat(mom),
        ema_take: f32x8::splat(1.0 - mom),
        overwrite: pass.ema_overwrite,
    };
    let Lanes { p, g, s, e } = lanes;
    let nc = p.len() / LANES;
    let (pw, pr) = whole_mut(p, nc);
    let (gw, gr) = g.split_at(nc * LANES);
    let mut sw: [&mut [[f32; LANES]]; MAX_SLOTS] = Default::default();
    let mut sr: [&mut [f32]; MAX_SLOTS] = Default::default();
    for (j, x) in s.into_iter().enumerate().take(ns) {
        (sw[j], sr[j]) = whole_mut(x, nc);
    }
    let (ew, er) = if EMA {
        whole_mut(e, nc)
    } else {
        (&mut [][..], e)
    };
    let mut b = LaneBufs {
        p: pw,
        g: &gw.as_chunks().0[..nc],
        s: sw,
        e: ew,
    };
    for c in 0..nc {
        lane_at::<R, GT, L2, DWD, EMA>(&seg.step, &k, &mut b, c);
    }
    if !pr.is_empty() {
        let rest = Lanes {
            p: pr,
            g: gr,
            s: sr,
            e: er,
        };
        tail::<R, GT, L2, DWD, EMA>(&seg.step, &k, rest);
    }
}
