//! The fused pass: one sweep over parameters, gradients, slots (and the EMA buffer) that applies
//! gradient transforms, weight decay, the rule and the EMA in lanes, on the lane type that
//! [`lane::dispatch`] picks for each piece (AVX-512 or AVX2 registers where the CPU has them);
//! every lane type gives the same bits.
//!
//! Every element goes through the same lane code: the loop runs blocks of sixteen values (one or
//! two lanes), and the last partial block of a piece is copied into a zero-padded block,
//! updated, and copied back. Since the update is element-wise, the
//! result does not depend on the length, the alignment, the segment bounds or how the buffer is
//! split across threads.

use super::mode::{Every, UpdateSet};
use super::rule::{Rule, MAX_SLOTS};
use crate::kernels::parallel::{join, pool_threads};
use crate::lane::{self, Lane, OnLanes, MAX_LANES};
use core::mem::take;

/// [`Optimizer::step`](super::Optimizer::step) splits buffers of at least this many elements
/// across the rayon pool (feature `parallel`); smaller ones never touch it. A hand-off into the
/// pool costs about 15 us on a 2-core machine: `bench_optim` measured fused Adam on two threads
/// 1.2x faster than on one at 2^19 elements and 0.85x at 2^18.
pub const PARALLEL_THRESHOLD: usize = 1 << 19;
/// A train step's update splits buffers of at least this many elements across the pool: there
/// the gradient has just been written by the pool's threads, each its part of the weight
/// gradients' products, and a thread that updates the part it wrote finds it in its own cache.
/// On one thread, the update of the 100k parameters of `bench_train`'s MLP (batch 256, two
/// threads) read half of its gradient from the other core's cache; split, the step gains 1.50x
/// from the second thread instead of 1.36-1.40x.
pub const STEP_PARALLEL_THRESHOLD: usize = 1 << 15;
/// Size of the pieces a long parallel pass is split into (a multiple of every lane type's
/// width); a pass shorter than the pool's threads times this is split into one piece a thread.
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
    /// Buffers of at least this many elements are split across the rayon pool when it has
    /// more than one thread ([`PARALLEL_THRESHOLD`] or [`STEP_PARALLEL_THRESHOLD`]).
    pub parallel_from: usize,
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

/// Runs the fused update of `rule` over `bufs`, with every part of the update compiled in.
///
/// `segments` cover the buffer in order (the last `end` equals the length). Panics if the
/// buffers disagree in length, which is a bug in the caller (an
/// [`Optimizer`](super::Optimizer) keeps them together).
#[inline]
pub fn apply<R: Rule>(segments: &[Segment<R>], pass: &Pass, bufs: Buffers<'_>) {
    apply_only::<R, Every>(segments, pass, bufs);
}

/// [`apply`] with only the variants of the update that `V` allows compiled in: one for each
/// combination of the parts it allows. Panics if `segments` or `pass` need a part that `V`
/// leaves out, which is a bug in the caller (an [`Optimizer`](super::Optimizer) is refused
/// such a configuration when it is built).
#[inline]
pub(crate) fn apply_only<R: Rule, V: UpdateSet>(
    segments: &[Segment<R>],
    pass: &Pass,
    bufs: Buffers<'_>,
) {
    let n = bufs.params.len();
    let n_slots = R::SLOTS.len();
    assert!(
        !R::TENSOR_WISE,
        "`{}` updates a tensor at a time: step it through an `Optimizer`",
        R::NAME
    );
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

    let mut lanes = Lanes {
        p: bufs.params,
        g: bufs.grads,
        s: bufs.slots,
        e: bufs.ema,
    };
    let gt = pass.clip_value.is_some() || segments.iter().any(|s| s.grad_scale != 1.0);
    let l2 = segments.iter().any(|s| s.l2 != 0.0);
    let dwd = segments.iter().any(|s| s.decay != 0.0);
    let ema = pass.ema_momentum.is_some();
    let pieces = parallel_pieces(n, pass.parallel_from);
    // A variant that `V` leaves out sits behind a constant `false`, so it is never compiled.
    macro_rules! go {
        ($($gt:literal $l2:literal $dwd:literal $ema:literal),*) => {
            match (gt, l2, dwd, ema) {
                $(($gt, $l2, $dwd, $ema) => {
                    if const {
                        (V::GRADIENT_TRANSFORM || !$gt)
                            && (V::L2 || !$l2)
                            && (V::DECOUPLED_DECAY || !$dwd)
                            && (V::EMA || !$ema)
                    } {
                        split::<R, $gt, $l2, $dwd, $ema>(segments, pass, &mut lanes, 0, pieces)
                    } else {
                        left_out()
                    }
                })*
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

/// A pass that needs a part of the update its set leaves out.
#[cold]
#[inline(never)]
fn left_out() -> ! {
    panic!("the pass needs a part of the update that its update set leaves out")
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

    /// The buffers, leaving empty ones in their place.
    fn take(&mut self) -> Lanes<'a> {
        Lanes {
            p: take(&mut self.p),
            g: take(&mut self.g),
            s: take(&mut self.s),
            e: take(&mut self.e),
        }
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

/// Into how many pieces a pass over `n` elements is split: one without a second thread or
/// below `from`, else pieces of [`PARALLEL_CHUNK`], and at least one a thread.
fn parallel_pieces(n: usize, from: usize) -> usize {
    if n < from {
        return 1;
    }
    match pool_threads() {
        0 | 1 => 1,
        threads => n.div_ceil(PARALLEL_CHUNK).max(threads),
    }
}

/// Runs the pass over `lanes` (which start at `base` in the segments' buffer) in `pieces`
/// pieces across the pool: halves at a block boundary, the first half on this thread, as the
/// products split their rows, so that a thread updates what it wrote. The buffers are
/// borrowed down to the lanes' loop, and moved only where they are cut.
fn split<R: Rule, const GT: bool, const L2: bool, const DWD: bool, const EMA: bool>(
    segments: &[Segment<R>],
    pass: &Pass,
    lanes: &mut Lanes<'_>,
    base: usize,
    pieces: usize,
) {
    let n = lanes.len();
    let left = pieces / 2;
    let mid = n / BLOCK * left / pieces.max(1) * BLOCK;
    if pieces > 1 && mid > 0 {
        let (mut a, mut b) = lanes.take().split_at(mid);
        join(
            true,
            || split::<R, GT, L2, DWD, EMA>(segments, pass, &mut a, base, left),
            || split::<R, GT, L2, DWD, EMA>(segments, pass, &mut b, base + mid, pieces - left),
        );
        return;
    }
    let mut pos = base;
    let end = base + n;
    for seg in segments {
        if seg.end >= end && pos < end {
            // The last piece: the rest whole, without splitting every buffer once more.
            piece::<R, GT, L2, DWD, EMA>(seg, pass, lanes);
            break;
        }
        if seg.end > pos {
            let take = seg.end - pos;
            let (mut cur, rest) = lanes.take().split_at(take);
            piece::<R, GT, L2, DWD, EMA>(seg, pass, &mut cur);
            *lanes = rest;
            pos += take;
        }
    }
}

/// Values splatted once per piece.
#[derive(Clone, Copy)]
struct Consts<L> {
    scale: L,
    lo: L,
    hi: L,
    l2: L,
    decay: L,
    ema_keep: L,
    ema_take: L,
    overwrite: bool,
}

impl<L: Lane> Consts<L> {
    /// The values of `seg` and `pass`, splatted.
    #[inline(always)]
    fn new<R: Rule>(seg: &Segment<R>, pass: &Pass) -> Self {
        let clip = pass.clip_value.unwrap_or(f32::INFINITY);
        let mom = pass.ema_momentum.unwrap_or(0.0);
        Consts {
            scale: L::splat(seg.grad_scale),
            lo: L::splat(-clip),
            hi: L::splat(clip),
            l2: L::splat(seg.l2),
            decay: L::splat(seg.decay),
            ema_keep: L::splat(mom),
            ema_take: L::splat(1.0 - mom),
            overwrite: pass.ema_overwrite,
        }
    }
}

#[inline(always)]
fn update_lane<
    L: Lane,
    R: Rule,
    const GT: bool,
    const L2: bool,
    const DWD: bool,
    const EMA: bool,
>(
    step: &R::Step,
    k: &Consts<L>,
    p: &mut L,
    g: L,
    s: &mut [L],
    e: &mut L,
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

/// Values one turn of the pass's loop updates: a whole number of lanes of every lane type.
const BLOCK: usize = MAX_LANES;

/// A piece's buffers as whole blocks, all of one length (the slots past the rule's, and the
/// EMA buffer without EMA, are empty).
struct Blocks<'a> {
    p: &'a mut [[f32; BLOCK]],
    g: &'a [[f32; BLOCK]],
    s: [&'a mut [[f32; BLOCK]]; MAX_SLOTS],
    e: &'a mut [[f32; BLOCK]],
}

/// Updates block `c` of `b`, lane by lane: loads a lane from every buffer, runs
/// [`update_lane`], stores it.
///
/// The slots are indexed by number: zipping an iterator over the slot array with the blocks
/// loses the slices' known length and brings back a bounds check per block.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
fn block_at<L: Lane, R: Rule, const GT: bool, const L2: bool, const DWD: bool, const EMA: bool>(
    step: &R::Step,
    k: &Consts<L>,
    b: &mut Blocks<'_>,
    c: usize,
) {
    let ns = R::SLOTS.len();
    for h in 0..BLOCK / L::LANES {
        let at = h * L::LANES;
        let mut sl = [L::ZERO; MAX_SLOTS];
        let mut pl = L::load(&b.p[c][at..]);
        let gl = L::load(&b.g[c][at..]);
        for j in 0..ns {
            sl[j] = L::load(&b.s[j][c][at..]);
        }
        let mut el = if EMA { L::load(&b.e[c][at..]) } else { L::ZERO };
        update_lane::<L, R, GT, L2, DWD, EMA>(step, k, &mut pl, gl, &mut sl[..ns], &mut el);
        pl.store(&mut b.p[c][at..]);
        for j in 0..ns {
            sl[j].store(&mut b.s[j][c][at..]);
        }
        if EMA {
            el.store(&mut b.e[c][at..]);
        }
    }
}

/// `x` split into its first `blocks` whole blocks and the values left over. The blocks are cut
/// to exactly `blocks` so that the compiler knows every buffer's length in the loop and drops
/// the bounds checks from it.
#[inline(always)]
fn whole_mut(x: &mut [f32], blocks: usize) -> (&mut [[f32; BLOCK]], &mut [f32]) {
    let (w, rest) = x.split_at_mut(blocks * BLOCK);
    (&mut w.as_chunks_mut().0[..blocks], rest)
}

/// Updates the last values of a piece, fewer than a block, a lane at a time by the lane code of
/// [`block_at`]: the last, shorter lane zero-padded ([`Lane::load_padded`]) and only its valid
/// values stored back ([`Lane::store_partial`]). Nothing is copied into a block, so a target
/// with one-value lanes has no padding to clear.
#[inline(always)]
fn tail<L: Lane, R: Rule, const GT: bool, const L2: bool, const DWD: bool, const EMA: bool>(
    step: &R::Step,
    k: &Consts<L>,
    rest: Lanes<'_>,
) {
    let ns = R::SLOTS.len();
    let Lanes { p, g, s, e } = rest;
    for (at, _) in lane::pieces::<L>(p.len()) {
        let mut pl = L::load_padded(&p[at..]);
        let gl = L::load_padded(&g[at..]);
        let mut sl = [L::ZERO; MAX_SLOTS];
        for j in 0..ns {
            sl[j] = L::load_padded(&s[j][at..]);
        }
        let mut el = if EMA {
            L::load_padded(&e[at..])
        } else {
            L::ZERO
        };
        update_lane::<L, R, GT, L2, DWD, EMA>(step, k, &mut pl, gl, &mut sl[..ns], &mut el);
        pl.store_partial(&mut p[at..]);
        for j in 0..ns {
            sl[j].store_partial(&mut s[j][at..]);
        }
        if EMA {
            el.store_partial(&mut e[at..]);
        }
    }
}

/// One segment's piece, to run on any lane type.
struct Piece<'s, 'a, R: Rule, const GT: bool, const L2: bool, const DWD: bool, const EMA: bool> {
    seg: &'s Segment<R>,
    pass: &'s Pass,
    /// Borrowed rather than moved: the dispatch then hands over one pointer instead of
    /// copying every buffer's slice through the stack (a copy that the compiler makes with
    /// wide loads of what was just stored narrow, which stall).
    lanes: &'s mut Lanes<'a>,
}

impl<R: Rule, const GT: bool, const L2: bool, const DWD: bool, const EMA: bool> OnLanes
    for Piece<'_, '_, R, GT, L2, DWD, EMA>
{
    type Output = ();
    #[inline(always)]
    fn run<L: Lane>(self) {
        piece_on::<L, R, GT, L2, DWD, EMA>(self.seg, self.pass, self.lanes);
    }
}

/// Updates one segment's piece on the lane type [`lane::dispatch`] picks.
fn piece<R: Rule, const GT: bool, const L2: bool, const DWD: bool, const EMA: bool>(
    seg: &Segment<R>,
    pass: &Pass,
    lanes: &mut Lanes<'_>,
) {
    lane::dispatch(Piece::<R, GT, L2, DWD, EMA> { seg, pass, lanes });
}

/// Updates one segment's piece on lanes of type `L`: its whole blocks in one loop (every buffer
/// cut to the same number of lanes first, so that the loop indexes them without bounds
/// checks), then its [`tail`].
#[inline(always)]
fn piece_on<L: Lane, R: Rule, const GT: bool, const L2: bool, const DWD: bool, const EMA: bool>(
    seg: &Segment<R>,
    pass: &Pass,
    lanes: &mut Lanes<'_>,
) {
    let ns = R::SLOTS.len();
    let k = Consts::<L>::new(seg, pass);
    let (p, g, e) = (take(&mut lanes.p), take(&mut lanes.g), take(&mut lanes.e));
    let s = &mut lanes.s;
    let nc = p.len() / BLOCK;
    let (pw, pr) = whole_mut(p, nc);
    let (gw, gr) = g.split_at(nc * BLOCK);
    let mut sw: [&mut [[f32; BLOCK]]; MAX_SLOTS] = Default::default();
    let mut sr: [&mut [f32]; MAX_SLOTS] = Default::default();
    for (j, x) in s.iter_mut().enumerate().take(ns) {
        (sw[j], sr[j]) = whole_mut(take(x), nc);
    }
    let (ew, er) = if EMA {
        whole_mut(e, nc)
    } else {
        (&mut [][..], e)
    };
    let mut b = Blocks {
        p: pw,
        g: &gw.as_chunks().0[..nc],
        s: sw,
        e: ew,
    };
    // A local copy: the loop's stores cannot reach it, so its values stay in registers
    // instead of being read again for every block.
    let step = seg.step;
    for c in 0..nc {
        block_at::<L, R, GT, L2, DWD, EMA>(&step, &k, &mut b, c);
    }
    if !pr.is_empty() {
        let rest = Lanes {
            p: pr,
            g: gr,
            s: sr,
            e: er,
        };
        tail::<L, R, GT, L2, DWD, EMA>(&step, &k, rest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lane::Tested;
    use crate::optim::{keras, torch, MAX_CARRIED};
    extern crate std;
    use std::vec::Vec;

    /// A deterministic value in `±[0.1, 1.1)`.
    fn value(i: usize, salt: usize) -> f32 {
        let h = ((i * 31 + salt * 7919) as u32).wrapping_mul(0x9E37_79B9) >> 8;
        let v = 0.1 + h as f32 / (1u32 << 24) as f32;
        if h.is_multiple_of(3) {
            -v
        } else {
            v
        }
    }

    /// Three steps of `rule` with every option of the pass on (clipping, a gradient scale,
    /// coupled and decoupled decay, the EMA) over a length with a tail, on `lanes`: the bits of
    /// the parameters, the slots and the EMA.
    fn three_steps<R: Rule>(rule: R, lanes: Tested) -> Vec<u32> {
        let n = 16 * 19 + 13;
        let g: Vec<f32> = (0..n).map(|i| value(i, 1)).collect();
        let mut p: Vec<f32> = (0..n).map(|i| value(i, 2)).collect();
        let mut ema: Vec<f32> = (0..n).map(|i| value(i, 3)).collect();
        let mut slots: Vec<Vec<f32>> = (0..R::SLOTS.len())
            .map(|j| (0..n).map(|i| value(i, 4 + j).abs()).collect())
            .collect();
        let mut carried = [0.0; MAX_CARRIED];
        for (i, c) in carried.iter_mut().enumerate().take(R::CARRIED.len()) {
            *c = rule.carried_init(i);
        }
        let mut decimals = R::Decimals::default();
        for t in 1..=3 {
            let step = rule.begin_step(t, &mut carried[..R::CARRIED.len()], &mut decimals);
            let seg = Segment::<R> {
                end: n,
                step,
                grad_scale: 0.5,
                l2: 0.01,
                decay: 0.001,
            };
            let pass = Pass {
                clip_value: Some(0.4),
                ema_momentum: Some(0.9),
                ema_overwrite: t == 3,
                parallel_from: PARALLEL_THRESHOLD,
            };
            let mut each = slots.iter_mut();
            let s = core::array::from_fn(|_| each.next().map_or(&mut [][..], |v| &mut v[..]));
            let mut bufs = Lanes {
                p: &mut p,
                g: &g,
                s,
                e: &mut ema,
            };
            let piece = Piece::<R, true, true, true, true> {
                seg: &seg,
                pass: &pass,
                lanes: &mut bufs,
            };
            lanes.run(piece);
        }
        // Every NaN as one: Rust leaves a NaN's sign and payload to the compiler.
        let all = p.iter().chain(slots.iter().flatten()).chain(&ema);
        all.map(|x| if x.is_nan() { u32::MAX } else { x.to_bits() })
            .collect()
    }

    /// The fused pass gives the same bits on every lane type this build and CPU can run, for
    /// rules that use selects, `sqrt`, `abs`, `max`, `sign` and `powf`.
    #[test]
    fn every_lane_type_gives_the_same_bits_for_every_rule() {
        fn check<R: Rule>(rule: R) {
            let want = three_steps(rule, Tested::One);
            for lanes in Tested::every() {
                assert!(three_steps(rule, lanes) == want, "{} on {lanes:?}", R::NAME);
            }
        }
        check(keras::Adam::default());
        check(keras::AdamAmsgrad::default());
        check(keras::Adamax::default());
        check(keras::Nadam::default());
        check(keras::Lion::default());
        check(keras::Ftrl::default());
        check(keras::Adadelta::default());
        check(keras::RmsPropCenteredMomentum::default());
        check(torch::RAdam::default());
        check(torch::AdamW::default());
        check(torch::SgdNesterov::default());
    }

    /// Adam over `n` values from `parallel_from` on a pool of `threads`: the parameters and
    /// slots after two steps.
    #[cfg(feature = "parallel")]
    fn split_steps(n: usize, parallel_from: usize, threads: usize) -> Vec<u32> {
        let rule = keras::Adam::default();
        let g: Vec<f32> = (0..n).map(|i| value(i, 1)).collect();
        let mut p: Vec<f32> = (0..n).map(|i| value(i, 2)).collect();
        let (mut m, mut v) = (std::vec![0.0; n], std::vec![0.0; n]);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("pool");
        for t in 1..=2 {
            let seg = Segment::<keras::Adam> {
                end: n,
                step: rule.begin_step(t, &mut [], &mut Default::default()),
                grad_scale: 1.0,
                l2: 0.0,
                decay: 0.0,
            };
            let pass = Pass {
                clip_value: None,
                ema_momentum: None,
                ema_overwrite: false,
                parallel_from,
            };
            let mut slots: [&mut [f32]; MAX_SLOTS] = Default::default();
            (slots[0], slots[1]) = (&mut m[..], &mut v[..]);
            let bufs = Buffers {
                params: &mut p,
                grads: &g,
                slots,
                ema: &mut [],
            };
            pool.install(|| apply(&[seg], &pass, bufs));
        }
        [p, m, v].iter().flatten().map(|x| x.to_bits()).collect()
    }

    #[cfg(feature = "parallel")]
    #[test]
    fn a_pass_split_into_pieces_across_the_pool_gives_the_bits_of_one_piece() {
        for n in [0, 5, 16, 1000, 4099] {
            let whole = split_steps(n, usize::MAX, 1);
            for threads in [2, 3] {
                assert!(
                    split_steps(n, 0, threads) == whole,
                    "{n} on {threads} threads"
                );
            }
        }
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .expect("pool");
        pool.install(|| {
            assert_eq!(parallel_pieces(100, 101), 1, "below the threshold");
            assert_eq!(parallel_pieces(100, 100), 3, "one piece a thread");
            assert_eq!(parallel_pieces(1 << 20, 0), 16, "pieces of PARALLEL_CHUNK");
        });
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .expect("pool");
        assert_eq!(one.install(|| parallel_pieces(1 << 20, 0)), 1, "one thread");
    }
}
