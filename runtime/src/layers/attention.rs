//! Causal multi-head self-attention: [`CausalSelfAttention`], whose sizes are constants, over
//! [`attention_forward`] and [`attention_backward`], which take them at run time
//! ([`AttentionDims`]).
//!
//! Per sample, with `x` of `[seq, dim]` and `hd = dim / heads`:
//! `q = x·Wq + bq`, `k = x·Wk + bk`, `v = x·Wv + bv`; for head `h` (feature columns
//! `h*hd .. (h+1)*hd`), `s[i][j] = q_h[i]·k_h[j] / sqrt(hd)` for `j <= i`, `p[i] = softmax(s[i])`
//! over `j <= i` (0 past `i`: position `i` attends to `0..=i`), `c_h[i] = Σ_j p[i][j] v_h[j]`;
//! the heads side by side form `c`, and `y = c·Wo + bo`. The projections are GEMMs over every
//! position of the batch at once; scores and mixing are GEMMs per sample and head.
//!
//! With lengths ([`Ctx::lengths`]), sample `b`'s keys from `lengths[b]` on are padding and
//! masked (PyTorch's `key_padding_mask`): query `i` attends to the keys `j <= i` with
//! `j < lengths[b]`. The padded queries are computed as the others (right padding leaves them
//! the real keys), not zeroed; the padded keys' and values' gradients are 0.

use super::dense::{dense_backward, dense_forward, DenseDims};
use super::{
    buffers, Backward, Ctx, Forward, Frozen, Grad, Identity, Init, Layer, Softmax, Tensor, Torch,
};
use crate::kernels::gemm::{gemm, workspace_len_threads, MatMut, MatRef, Product, Scaled};
use crate::kernels::parallel::{for_sample_runs, PerSample, Samples};
use crate::math;
use core::ops::Range;

/// The sizes and biases of a causal self-attention layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionDims {
    /// Positions per sample.
    pub seq: usize,
    /// Features per position (the model width).
    pub dim: usize,
    /// Heads; `dim` is a multiple of it.
    pub heads: usize,
    /// Whether the query, key, value and output projections have a bias, in that order.
    pub bias: [bool; 4],
}

impl AttentionDims {
    /// Features per head.
    pub const fn head_dim(&self) -> usize {
        self.dim / self.heads
    }

    /// The sizes of projection `i` (query, key, value, output) as a dense layer.
    pub const fn projection(&self, i: usize) -> DenseDims {
        DenseDims {
            inputs: self.dim,
            outputs: self.dim,
            bias: self.bias[i],
        }
    }

    /// Parameters: each projection's weight `[dim, dim]` and, if it has one, its bias.
    pub const fn params(&self) -> usize {
        let mut n = 0;
        let mut i = 0;
        while i < 4 {
            n += self.projection(i).params();
            i += 1;
        }
        n
    }

    /// The first of projection `i`'s tensors (its weight, then its bias if it has one) among
    /// the layer's, which are the projections' one after the other.
    const fn first_tensor(&self, i: usize) -> usize {
        let (mut first, mut j) = (0, 0);
        while j < i {
            first += 1 + self.bias[j] as usize;
            j += 1;
        }
        first
    }

    /// The part of `frozen` (a mask over the layer's tensors) over projection `i`'s, as
    /// [`projection`](Self::projection)`(i)`'s dense layer sees it.
    pub const fn projection_frozen(&self, frozen: Frozen, i: usize) -> Frozen {
        frozen.part(self.first_tensor(i), 1 + self.bias[i] as usize)
    }

    /// The values of the gradients of projection `i`'s tensors that `frozen` does not freeze.
    fn projection_trainable(&self, frozen: Frozen, i: usize) -> usize {
        let lens = self.projection(i).tensor_lens();
        self.projection_frozen(frozen, i).trainable_values(&lens)
    }

    /// The values of the gradients of the tensors that `frozen` does not freeze:
    /// [`params`](Self::params) with none frozen.
    pub fn trainable(&self, frozen: Frozen) -> usize {
        (0..4).map(|i| self.projection_trainable(frozen, i)).sum()
    }

    /// Values per sample `forward` saves: `q`, `k`, `v`, the heads' mixed values `c` (`seq *
    /// dim` each) and the attention weights (`heads * seq * seq`).
    pub const fn saved(&self) -> usize {
        4 * self.seq * self.dim + self.heads * self.seq * self.seq
    }

    /// Scratch values per sample: for `backward`, the gradients of `c`, `q`, `k`, `v`, then
    /// [`head_scratch`](Self::head_scratch); `forward` uses the latter alone.
    pub const fn scratch(&self) -> usize {
        4 * self.seq * self.dim + self.head_scratch()
    }

    /// Scratch per sample for its heads, one at a time: the gradient of a head's scores
    /// (`seq * seq`) and the GEMM workspace of the per-head products, so that samples can
    /// run on different threads.
    pub const fn head_scratch(&self) -> usize {
        let (s, hd) = (self.seq, self.head_dim());
        let a = workspace_len_threads(s, hd, s, 1);
        let b = workspace_len_threads(s, s, hd, 1);
        s * s + if a > b { a } else { b }
    }

    /// `1 / sqrt(head_dim)`, the scale of the scores.
    fn scale(&self) -> f32 {
        1.0 / math::sqrt(self.head_dim() as f32)
    }
}

/// The products of [`attention_forward`] and [`attention_backward`] that use the GEMM
/// workspace: each projection's `x·W` and `dy·Wᵀ` over `seq` rows a sample, and `xᵀ·dy`. (The
/// per-sample, per-head products take their workspace from the scratch:
/// [`AttentionDims::head_scratch`].)
pub const fn attention_products(d: AttentionDims) -> [Product; 2] {
    let (s, m) = (d.seq, d.dim);
    [
        Product {
            m: s,
            k: m,
            n: m,
            scaled: Scaled::M,
        },
        Product {
            m,
            k: s,
            n: m,
            scaled: Scaled::K,
        },
    ]
}

/// Panics, naming the pass, unless the scratch holds `need` values.
fn enough_scratch(pass: &str, scratch: &[f32], need: usize) {
    assert!(
        scratch.len() >= need,
        "{pass}: the scratch holds {} values, {need} needed (AttentionDims::scratch a sample)",
        scratch.len()
    );
}

/// Projection `i`'s parameters within the layer's.
fn projection_params(d: AttentionDims, params: &[f32], i: usize) -> &[f32] {
    let start: usize = (0..i).map(|j| d.projection(j).params()).sum();
    &params[start..start + d.projection(i).params()]
}

/// The four projections' gradients within the layer's (of the tensors `frozen` does not
/// freeze).
fn projection_grads(d: AttentionDims, frozen: Frozen, grads: &mut [f32]) -> [&mut [f32]; 4] {
    let mut rest = grads;
    core::array::from_fn(|i| {
        let len = d.projection_trainable(frozen, i);
        let (head, tail) = core::mem::take(&mut rest).split_at_mut(len);
        rest = tail;
        head
    })
}

/// `y = x·W + b` of projection `i` over `rows` positions.
fn project(
    ctx: &mut Ctx<'_>,
    d: AttentionDims,
    params: &[f32],
    i: usize,
    x: &[f32],
    y: &mut [f32],
) {
    let rows = x.len() / d.dim;
    let io = Forward {
        params: projection_params(d, params, i),
        state: &mut [],
        x,
        y,
        saved: &mut [],
        batch: rows,
    };
    dense_forward::<Identity>(ctx, d.projection(i), io);
}

/// Head `h`'s `hd` columns of `rows` of a sample's `[seq, dim]` rows.
fn head(d: AttentionDims, sample: &[f32], h: usize, rows: Range<usize>) -> MatRef<'_> {
    let at = rows.start * d.dim + h * d.head_dim();
    MatRef::new(&sample[at..], rows.len(), d.head_dim(), d.dim, 1)
}

/// Head `h`'s `hd` columns of `rows` of a sample's `[seq, dim]` rows, writable.
fn head_mut(d: AttentionDims, sample: &mut [f32], h: usize, rows: Range<usize>) -> MatMut<'_> {
    let at = rows.start * d.dim + h * d.head_dim();
    MatMut::new(&mut sample[at..], rows.len(), d.head_dim(), d.dim, 1)
}

/// Query rows per block of a head's products. A block of queries `i0..i1` sees the keys
/// `0..i1` only (the weights of later keys are 0), so each block multiplies that much: about
/// 5/8 of the whole product for 4 blocks, 3/4 for 2. Skipping a weight of 0 leaves every sum
/// as it was (adding `0 * x` changes no finite sum, at most the sign of a zero).
const CAUSAL_BLOCK: usize = 32;

/// The blocks of `seq` positions, `start..end` each, [`CAUSAL_BLOCK`] long but the last.
fn causal_blocks(seq: usize) -> impl Iterator<Item = Range<usize>> {
    (0..seq)
        .step_by(CAUSAL_BLOCK)
        .map(move |i0| i0..(i0 + CAUSAL_BLOCK).min(seq))
}

/// The block `rows` x `cols` of a row-major `[seq, seq]` matrix of weights.
fn weights(p: &[f32], seq: usize, rows: Range<usize>, cols: Range<usize>) -> MatRef<'_> {
    MatRef::new(
        &p[rows.start * seq + cols.start..],
        rows.len(),
        cols.len(),
        seq,
        1,
    )
}

/// The keys the queries of block `b` see in a sample of `keys` real keys: `0..b.end`, the
/// padded keys from `keys` on left out.
fn seen_keys(b: &Range<usize>, keys: usize) -> Range<usize> {
    0..b.end.min(keys)
}

/// The real keys of block `b` in a sample of `keys` real keys (none when the block is
/// padding).
fn real_keys(b: &Range<usize>, keys: usize) -> Range<usize> {
    b.start..b.end.min(keys).max(b.start)
}

/// The weights of the queries of block `b` for the keys they see ([`seen_keys`]).
fn seen<'p>(p: &'p [f32], seq: usize, b: &Range<usize>, keys: usize) -> MatRef<'p> {
    weights(p, seq, b.clone(), seen_keys(b, keys))
}

/// The weights of the keys `b` from the queries that see them, `b.start..seq`, transposed:
/// one row per key.
fn seen_by<'p>(p: &'p [f32], seq: usize, b: &Range<usize>) -> MatRef<'p> {
    weights(p, seq, b.start..seq, b.clone()).t()
}

/// [`weights`], writable.
fn weights_mut(p: &mut [f32], seq: usize, rows: Range<usize>, cols: Range<usize>) -> MatMut<'_> {
    MatMut::new(
        &mut p[rows.start * seq + cols.start..],
        rows.len(),
        cols.len(),
        seq,
        1,
    )
}

/// `dp` becomes the gradient of the scores: `p * (dp - Σ_j p[j] dp[j])` over each row's first
/// `min(i + 1, keys)` values, 0 where masked.
fn causal_softmax_backward(p: &[f32], dp: &mut [f32], seq: usize, keys: usize) {
    for (i, (p, dp)) in p
        .chunks_exact(seq)
        .zip(dp.chunks_exact_mut(seq))
        .enumerate()
    {
        let (seen, masked) = dp.split_at_mut((i + 1).min(keys));
        Softmax::row_backward(&p[..seen.len()], seen);
        masked.fill(0.0);
    }
}

/// `p = causal softmax(q_h·k_hᵀ * scale)` and `c_h = p·v_h` for every head of one sample of
/// `keys` real keys (query `i` attends to keys `j <= i` with `j < keys`: the padded keys are
/// masked, the padded queries computed as the others), with `ws` as GEMM workspace; each block
/// of queries multiplies the keys and values it sees ([`CAUSAL_BLOCK`], [`seen_keys`]).
fn attend(
    d: AttentionDims,
    qkv: [&[f32]; 3],
    keys: usize,
    p: &mut [f32],
    c: &mut [f32],
    ws: &mut [f32],
) {
    let [q, k, v] = qkv;
    let (s, scale) = (d.seq, d.scale());
    for (h, p) in p.chunks_exact_mut(s * s).enumerate() {
        for b in causal_blocks(s) {
            let seen = seen_keys(&b, keys);
            let (q, k) = (head(d, q, h, b.clone()), head(d, k, h, seen.clone()));
            gemm(scale, q, k.t(), 0.0, weights_mut(p, s, b, seen), ws);
        }
        Softmax::rows(p, s, Some(keys));
        for b in causal_blocks(s) {
            let v = head(d, v, h, seen_keys(&b, keys));
            gemm(1.0, seen(p, s, &b, keys), v, 0.0, head_mut(d, c, h, b), ws);
        }
    }
}

/// Runs `f(sample, outputs)` for every sample of the batch, the samples cut into runs across
/// the pool when the heads' work is large enough ([`for_sample_runs`]); each sample's work is
/// the same wherever it runs, so the bits are too.
fn each_sample<O, F>(d: AttentionDims, batch: usize, out: O, f: F)
where
    O: Samples,
    F: Fn(usize, O) + Sync,
{
    let work = batch * d.heads * d.seq * d.seq;
    for_sample_runs(batch, work, out, &|samples: Range<usize>, mut rest: O| {
        for b in samples {
            let (one, tail) = rest.split_at(1);
            rest = tail;
            f(b, one);
        }
    });
}

/// The buffers `forward` saves, cut out of `saved`: `q`, `k`, `v`, `c` and the weights.
fn saved_parts(d: AttentionDims, saved: &[f32], batch: usize) -> [&[f32]; 5] {
    let n = batch * d.seq * d.dim;
    let (q, rest) = saved.split_at(n);
    let (k, rest) = rest.split_at(n);
    let (v, rest) = rest.split_at(n);
    let (c, p) = rest.split_at(n);
    [q, k, v, c, p]
}

/// Of the four projections' `[weight, bias]` entries, each weight and the biases `bias` keeps,
/// in storage order, and how many that is.
const fn with_biases<T: Copy>(all: [[T; 2]; 4], bias: [bool; 4]) -> ([T; 8], usize) {
    let mut out = [all[0][0]; 8];
    let (mut n, mut i) = (0, 0);
    while i < 4 {
        out[n] = all[i][0];
        n += 1;
        if bias[i] {
            out[n] = all[i][1];
            n += 1;
        }
        i += 1;
    }
    (out, n)
}

/// The forward pass over `io.batch` samples of `[seq, dim]`; saves `q`, `k`, `v`, `c` and the
/// attention weights ([`AttentionDims::saved`] per sample) for [`attention_backward`].
///
/// # Panics
/// If a buffer's length does not follow from `dims` and the batch, or `ctx.gemm` is shorter
/// than the products need.
pub fn attention_forward(ctx: &mut Ctx<'_>, d: AttentionDims, io: Forward<'_>) {
    let Forward {
        params,
        x,
        y,
        saved,
        batch,
        ..
    } = io;
    let name = "attention_forward";
    buffers::expect(name, "params", params.len(), d.params());
    buffers::expect(name, "saved", saved.len(), batch * d.saved());
    let n = batch * d.seq * d.dim;
    let (q, rest) = saved.split_at_mut(n);
    let (k, rest) = rest.split_at_mut(n);
    let (v, rest) = rest.split_at_mut(n);
    let (c, p) = rest.split_at_mut(n);
    for (i, out) in [&mut *q, &mut *k, &mut *v].into_iter().enumerate() {
        project(ctx, d, params, i, x, out);
    }
    let (q, k, v) = (&*q, &*k, &*v);
    let (per, weights) = (d.seq * d.dim, d.heads * d.seq * d.seq);
    let lengths = ctx.lengths;
    enough_scratch(name, ctx.scratch, batch * d.head_scratch());
    let heads = &mut ctx.scratch[..batch * d.head_scratch()];
    let out = (
        PerSample {
            data: p,
            per: weights,
        },
        (
            PerSample { data: c, per },
            PerSample {
                data: heads,
                per: d.head_scratch(),
            },
        ),
    );
    each_sample(d, batch, out, |b, (p, (c, hs))| {
        let at = b * per..(b + 1) * per;
        let qkv = [&q[at.clone()], &k[at.clone()], &v[at]];
        let keys = lengths.of(b, d.seq);
        attend(d, qkv, keys, p.data, c.data, &mut hs.data[d.seq * d.seq..]);
    });
    project(ctx, d, params, 3, c, y);
}

/// Where one sample's input-projection gradients go, and scratch for one head's scores.
struct HeadGrads<'a> {
    /// d loss / d q, `[seq, dim]`.
    dq: &'a mut [f32],
    /// d loss / d k.
    dk: &'a mut [f32],
    /// d loss / d v.
    dv: &'a mut [f32],
    /// One head's score gradient, `[seq, seq]`.
    ds: &'a mut [f32],
    /// GEMM workspace.
    ws: &'a mut [f32],
}

/// The backward pass of [`attend`] for one sample of `keys` real keys (`saved`: its `q`, `k`,
/// `v` and attention weights; `dc`: d loss / d the mixed heads), head by head: `dv_h =
/// pᵀ·dc_h`, the gradient of the weights `dc_h·v_hᵀ` through the softmax into `ds`, then
/// `dq_h = ds·k_h * scale` and `dk_h = dsᵀ·q_h * scale`; each block multiplies only what its
/// weights do not mask ([`CAUSAL_BLOCK`]): queries `i0..i1` the keys `0..i1` below `keys`,
/// keys `j0..j1` below `keys` the queries `j0..`. The padded keys' `dk` and `dv` are 0.
fn attend_backward(
    d: AttentionDims,
    saved: [&[f32]; 4],
    keys: usize,
    dc: &[f32],
    g: HeadGrads<'_>,
) {
    let [q, k, v, p] = saved;
    let (s, scale) = (d.seq, d.scale());
    for (h, p) in p.chunks_exact(s * s).enumerate() {
        for b in causal_blocks(s) {
            let real = real_keys(&b, keys);
            if !real.is_empty() {
                let dc_seen = head(d, dc, h, real.start..s);
                let dv = head_mut(d, g.dv, h, real.clone());
                gemm(1.0, seen_by(p, s, &real), dc_seen, 0.0, dv, g.ws);
            }
            let seen = seen_keys(&b, keys);
            let (dc, v) = (head(d, dc, h, b.clone()), head(d, v, h, seen.clone()));
            let dp = weights_mut(g.ds, s, b, seen);
            gemm(1.0, dc, v.t(), 0.0, dp, g.ws);
        }
        causal_softmax_backward(p, g.ds, s, keys);
        let ds = &*g.ds;
        for b in causal_blocks(s) {
            let k = head(d, k, h, seen_keys(&b, keys));
            let dq = head_mut(d, g.dq, h, b.clone());
            gemm(scale, seen(ds, s, &b, keys), k, 0.0, dq, g.ws);
            let real = real_keys(&b, keys);
            if !real.is_empty() {
                let (q, dk) = (
                    head(d, q, h, real.start..s),
                    head_mut(d, g.dk, h, real.clone()),
                );
                gemm(scale, seen_by(ds, s, &real), q, 0.0, dk, g.ws);
            }
        }
    }
    g.dk[keys * d.dim..].fill(0.0);
    g.dv[keys * d.dim..].fill(0.0);
}

/// The buffers of a projection's backward pass over every position of the batch.
struct ProjectionBackward<'a> {
    /// The projection's input.
    x: &'a [f32],
    /// Its output.
    y: &'a [f32],
    /// d loss / d output.
    dy: &'a mut [f32],
    /// Where d loss / d input goes.
    dx: Grad<'a>,
    /// Which of the projection's weight and bias are frozen.
    frozen: Frozen,
    /// d loss / d the projection's weight and bias, those not frozen.
    dparams: &'a mut [f32],
}

/// Backward through projection `i` (query, key, value, output) as a dense layer.
fn project_backward(
    ctx: &mut Ctx<'_>,
    d: AttentionDims,
    params: &[f32],
    i: usize,
    io: ProjectionBackward<'_>,
) {
    let io = Backward {
        params: projection_params(d, params, i),
        x: io.x,
        y: io.y,
        saved: &[],
        dy: io.dy,
        dx: io.dx,
        frozen: io.frozen,
        dparams: io.dparams,
        batch: io.x.len() / d.dim,
    };
    dense_backward::<Identity>(ctx, d.projection(i), io);
}

/// The backward pass of [`attention_forward`]: d loss / d params into `io.dparams`
/// (overwritten; without the tensors `io.frozen` names, [`AttentionDims::trainable`] values),
/// d loss / d x into `io.dx` (the sum of the three input projections'), with `ctx.scratch`
/// holding [`AttentionDims::scratch`] values per sample. A frozen tensor's GEMM or sum is not
/// computed; with the query, key and value projections frozen and no `io.dx` wanted, the pass
/// ends after the output projection's gradients.
///
/// # Panics
/// As [`attention_forward`], also for `dy`, `dparams`, `dx` and `ctx.scratch`.
pub fn attention_backward(ctx: &mut Ctx<'_>, d: AttentionDims, io: Backward<'_>) {
    let batch = io.batch;
    let name = "attention_backward";
    buffers::expect(name, "params", io.params.len(), d.params());
    let trainable = match io.frozen.any() {
        true => d.trainable(io.frozen),
        false => d.params(),
    };
    buffers::expect(name, "dparams", io.dparams.len(), trainable);
    buffers::expect(name, "saved", io.saved.len(), batch * d.saved());
    let n = batch * d.seq * d.dim;
    let scratch = core::mem::take(&mut ctx.scratch);
    enough_scratch(name, scratch, batch * d.scratch());
    let (dc, rest) = scratch[..batch * d.scratch()].split_at_mut(n);
    let (dq, rest) = rest.split_at_mut(n);
    let (dk, rest) = rest.split_at_mut(n);
    let (dv, heads) = rest.split_at_mut(n);
    let [q, k, v, c, p] = saved_parts(d, io.saved, batch);
    let [gq, gk, gv, go] = projection_grads(d, io.frozen, io.dparams);
    // Backward goes on through the heads unless no input projection trains and no `dx` is
    // wanted.
    let through_heads =
        !(io.frozen.freezes_first(d.first_tensor(3)) && matches!(io.dx, Grad::Skip));
    let to_c = ProjectionBackward {
        x: c,
        y: io.y,
        dy: io.dy,
        dx: if through_heads {
            Grad::Set(&mut *dc)
        } else {
            Grad::Skip
        },
        frozen: d.projection_frozen(io.frozen, 3),
        dparams: go,
    };
    project_backward(ctx, d, io.params, 3, to_c);
    if !through_heads {
        ctx.scratch = scratch;
        return;
    }
    let (per, weights) = (d.seq * d.dim, d.heads * d.seq * d.seq);
    let (dc, lengths) = (&*dc, ctx.lengths);
    let out = (
        (
            PerSample {
                data: &mut *dq,
                per,
            },
            PerSample {
                data: &mut *dk,
                per,
            },
        ),
        (
            PerSample {
                data: &mut *dv,
                per,
            },
            PerSample {
                data: heads,
                per: d.head_scratch(),
            },
        ),
    );
    each_sample(d, batch, out, |b, ((dq, dk), (dv, hs))| {
        let at = b * per..(b + 1) * per;
        let (ds, ws) = hs.data.split_at_mut(d.seq * d.seq);
        let g = HeadGrads {
            dq: dq.data,
            dk: dk.data,
            dv: dv.data,
            ds,
            ws,
        };
        let p = &p[b * weights..(b + 1) * weights];
        attend_backward(
            d,
            [&q[at.clone()], &k[at.clone()], &v[at.clone()], p],
            lengths.of(b, d.seq),
            &dc[at],
            g,
        );
    });
    let mut dx = io.dx.destination();
    let inputs = [(&mut *dq, q, gq), (&mut *dk, k, gk), (&mut *dv, v, gv)];
    for (i, (dy, y, dparams)) in inputs.into_iter().enumerate() {
        let dx = match dx.as_mut() {
            None => Grad::Skip,
            Some((dx, false)) if i == 0 => Grad::Set(dx),
            Some((dx, _)) => Grad::Add(dx),
        };
        let to_x = ProjectionBackward {
            x: io.x,
            y,
            dy,
            dx,
            frozen: d.projection_frozen(io.frozen, i),
            dparams,
        };
        project_backward(ctx, d, io.params, i, to_x);
    }
    ctx.scratch = scratch;
}

/// Causal multi-head self-attention over `SEQ` positions of `DIM` features, with `HEADS`
/// heads of `DIM / HEADS` features (the module comment gives the formulas). `QB`, `KB`, `VB`
/// and `OB` say whether the query, key, value and output projections have a bias (all do by
/// default, as in PyTorch's `nn.MultiheadAttention`).
///
/// Parameters, in order, for each projection `q`, `k`, `v`, `o`: `{p}_weight` `[DIM, DIM]`
/// (`[in, out]`, as [`Dense`](super::Dense); [`Init::GlorotUniform`]) and, with its bias,
/// `{p}_bias` `[DIM]` (zeros), as `nn.MultiheadAttention` initializes them. PyTorch names them
/// as the `weight` and `bias` of four `nn.Linear` submodules `q`, `k`, `v`, `o` (the weight
/// transposed); `nn.MultiheadAttention`'s `in_proj_weight` is the three input weights'
/// transposes stacked. A model width that `HEADS` does not divide does not compile.
///
/// Forward saves `q`, `k`, `v`, the mixed heads and the attention weights
/// ([`AttentionDims::saved`] per sample); backward needs [`AttentionDims::scratch`] per sample.
///
/// The layer honours lengths ([`Layer::STEPS`] is `SEQ`): a padded key is masked, so a real
/// position's output does not depend on the padding (the module comment).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CausalSelfAttention<
    const SEQ: usize,
    const DIM: usize,
    const HEADS: usize,
    const QB: bool = true,
    const KB: bool = true,
    const VB: bool = true,
    const OB: bool = true,
>;

impl<
        const SEQ: usize,
        const DIM: usize,
        const HEADS: usize,
        const QB: bool,
        const KB: bool,
        const VB: bool,
        const OB: bool,
    > CausalSelfAttention<SEQ, DIM, HEADS, QB, KB, VB, OB>
{
    /// The sizes, for [`attention_forward`] and [`attention_backward`]; checked when the layer
    /// is used.
    pub const DIMS: AttentionDims = {
        assert!(
            SEQ > 0 && DIM > 0,
            "CausalSelfAttention<SEQ, DIM, HEADS>: the sequence length SEQ and the width DIM \
             must be at least 1"
        );
        assert!(
            HEADS > 0 && DIM.is_multiple_of(HEADS),
            "CausalSelfAttention<SEQ, DIM, HEADS>: HEADS heads of equal size must divide the \
             width DIM; write a DIM that HEADS divides, or HEADS that divide DIM"
        );
        AttentionDims {
            seq: SEQ,
            dim: DIM,
            heads: HEADS,
            bias: [QB, KB, VB, OB],
        }
    };

    /// The layer (it holds no data: parameters live in the model's flat buffer).
    pub const fn new() -> Self {
        CausalSelfAttention
    }

    /// The parameter tensors of the projections that have them, in storage order, and how
    /// many there are.
    const TENSOR_TABLE: ([Tensor; 8], usize) = {
        let w = Tensor {
            name: "",
            shape: &[DIM, DIM],
            fans: (DIM, DIM),
            init: Init::GlorotUniform,
        };
        let b = Tensor {
            shape: &[DIM],
            init: Init::Zeros,
            ..w
        };
        let all = [
            [
                Tensor {
                    name: "q_weight",
                    ..w
                },
                Tensor {
                    name: "q_bias",
                    ..b
                },
            ],
            [
                Tensor {
                    name: "k_weight",
                    ..w
                },
                Tensor {
                    name: "k_bias",
                    ..b
                },
            ],
            [
                Tensor {
                    name: "v_weight",
                    ..w
                },
                Tensor {
                    name: "v_bias",
                    ..b
                },
            ],
            [
                Tensor {
                    name: "o_weight",
                    ..w
                },
                Tensor {
                    name: "o_bias",
                    ..b
                },
            ],
        ];
        with_biases(all, Self::DIMS.bias)
    };

    /// PyTorch's names of [`TENSOR_TABLE`](Self::TENSOR_TABLE), in the same order.
    const TORCH_TABLE: ([Torch; 8], usize) = {
        let (w, b) = (
            Torch {
                name: "",
                axes: &[1, 0],
            },
            Torch {
                name: "",
                axes: &[],
            },
        );
        let all = [
            [
                Torch {
                    name: "q.weight",
                    ..w
                },
                Torch {
                    name: "q.bias",
                    ..b
                },
            ],
            [
                Torch {
                    name: "k.weight",
                    ..w
                },
                Torch {
                    name: "k.bias",
                    ..b
                },
            ],
            [
                Torch {
                    name: "v.weight",
                    ..w
                },
                Torch {
                    name: "v.bias",
                    ..b
                },
            ],
            [
                Torch {
                    name: "o.weight",
                    ..w
                },
                Torch {
                    name: "o.bias",
                    ..b
                },
            ],
        ];
        with_biases(all, Self::DIMS.bias)
    };
}

impl<
        const SEQ: usize,
        const DIM: usize,
        const HEADS: usize,
        const QB: bool,
        const KB: bool,
        const VB: bool,
        const OB: bool,
    > Layer for CausalSelfAttention<SEQ, DIM, HEADS, QB, KB, VB, OB>
{
    fn describe(out: &mut dyn core::fmt::Write) -> core::fmt::Result {
        write!(
            out,
            "CausalSelfAttention<{SEQ} positions, {DIM}, heads: {HEADS}, biases q k v out: {QB} {KB} {VB} {OB}>"
        )
    }

    const IN: usize = Self::DIMS.seq * DIM;
    const OUT: usize = SEQ * DIM;
    const PARAMS: usize = Self::DIMS.params();
    const STATE: usize = 0;
    const SAVED: usize = Self::DIMS.saved();
    const TENSORS: &'static [Tensor] = Self::TENSOR_TABLE.0.split_at(Self::TENSOR_TABLE.1).0;
    const TORCH: &'static [Torch] = Self::TORCH_TABLE.0.split_at(Self::TORCH_TABLE.1).0;
    const SCRATCH_PER_SAMPLE: usize = Self::DIMS.scratch();
    const PRODUCTS: &'static [Product] = &attention_products(Self::DIMS);
    const FREEZABLE: bool = true;
    const STEPS: usize = SEQ;

    fn forward(ctx: &mut Ctx<'_>, io: Forward<'_>) {
        buffers::forward::<Self>(&io);
        attention_forward(ctx, Self::DIMS, io);
    }

    fn backward(ctx: &mut Ctx<'_>, io: Backward<'_>) {
        buffers::backward::<Self>(&io);
        attention_backward(ctx, Self::DIMS, io);
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::layers::gradcheck::{
        assert_same_bits, bits, forward_backward_padded, Check, Passes,
    };
    use crate::layers::{Lengths, Mode};
    use crate::rng::{Rng, Seed};
    use std::vec;
    use std::vec::Vec;

    /// `x·W + b` over `[rows, dim]` in `f64`, the projection's parameters at `params[at..]`;
    /// returns the result and where the next projection starts.
    fn project64(
        x: &[f64],
        params: &[f64],
        at: usize,
        dim: usize,
        bias: bool,
    ) -> (Vec<f64>, usize) {
        let w = &params[at..at + dim * dim];
        let b = bias.then(|| &params[at + dim * dim..at + dim * dim + dim]);
        let y = x
            .chunks(dim)
            .flat_map(|row| {
                (0..dim).map(move |o| {
                    let dot: f64 = (0..dim).map(|i| row[i] * w[i * dim + o]).sum();
                    dot + b.map_or(0.0, |b| b[o])
                })
            })
            .collect();
        (y, at + dim * dim + if bias { dim } else { 0 })
    }

    /// The layer in `f64`, written from the formulas.
    fn reference(d: AttentionDims) -> impl Fn(&[f64], &[f64], usize) -> Vec<f64> {
        padded_reference(d, Vec::new())
    }

    /// The layer in `f64` over samples of `lengths` (every step real where none is given):
    /// query `i` of sample `b` attends to the keys `0..=min(i, lengths[b] - 1)`.
    fn padded_reference(
        d: AttentionDims,
        lengths: Vec<u32>,
    ) -> impl Fn(&[f64], &[f64], usize) -> Vec<f64> {
        move |params, x, _| {
            let (s, m, hd) = (d.seq, d.dim, d.head_dim());
            let (q, at) = project64(x, params, 0, m, d.bias[0]);
            let (k, at) = project64(x, params, at, m, d.bias[1]);
            let (v, at) = project64(x, params, at, m, d.bias[2]);
            let mut c = vec![0.0; x.len()];
            for b in 0..x.len() / (s * m) {
                let row = |t: usize, i: usize| (b * s + i) * m + t;
                let keys = lengths.get(b).map_or(s, |&l| l as usize);
                for h in 0..d.heads {
                    for i in 0..s {
                        let last = i.min(keys - 1);
                        let score = |j: usize| {
                            let dot: f64 = (0..hd)
                                .map(|t| q[row(h * hd + t, i)] * k[row(h * hd + t, j)])
                                .sum();
                            dot / (hd as f64).sqrt()
                        };
                        let top = (0..=last).map(score).fold(f64::MIN, f64::max);
                        let e: Vec<f64> = (0..=last).map(|j| (score(j) - top).exp()).collect();
                        let sum: f64 = e.iter().sum();
                        for t in 0..hd {
                            c[row(h * hd + t, i)] =
                                (0..=last).map(|j| e[j] / sum * v[row(h * hd + t, j)]).sum();
                        }
                    }
                }
            }
            project64(&c, params, at, m, d.bias[3]).0
        }
    }

    fn check<const S: usize, const M: usize, const H: usize, const QB: bool, const KB: bool>(
        batch: usize,
    ) {
        type A<const S: usize, const M: usize, const H: usize, const QB: bool, const KB: bool> =
            CausalSelfAttention<S, M, H, QB, KB, true, QB>;
        let d = A::<S, M, H, QB, KB>::DIMS;
        Check::new(batch).run::<A<S, M, H, QB, KB>>(&reference(d));
    }

    /// Lengths in both causal blocks of 37 positions, the second block wholly padding in a
    /// sample of 5, and samples of one step.
    #[test]
    fn padded_attention_matches_finite_differences() {
        fn padded<const S: usize>(lengths: &[u32]) {
            let reference = padded_reference(Heads2::<S>::DIMS, lengths.to_vec());
            let check = Check {
                lengths: Some(lengths.to_vec()),
                ..Check::new(lengths.len())
            };
            check.run::<Heads2<S>>(&reference);
        }
        padded::<5>(&[5, 2, 1]);
        padded::<1>(&[1, 1]);
        padded::<37>(&[37, 33, 5, 1]);
    }

    /// Two heads over 4 features, no key bias, over `S` positions.
    type Heads2<const S: usize> = CausalSelfAttention<S, 4, 2, true, false>;

    /// Parameters of [`Heads2`], and an output gradient over `x` (samples of `seq` steps)
    /// that is 0 at the padded steps, as a loss that ignores them gives it.
    fn params_and_real_gradient(seq: usize, x: &[f32], lengths: &[u32]) -> (Vec<f32>, Vec<f32>) {
        let mut rng = Rng::new(Seed(3));
        let params = (0..Heads2::<1>::PARAMS)
            .map(|_| rng.uniform(-1.0, 1.0))
            .collect();
        let dy = (0..x.len())
            .map(|i| {
                let (b, t) = (i / (seq * 4), i / 4 % seq);
                let real = t < lengths[b] as usize;
                if real {
                    rng.uniform(-1.0, 1.0)
                } else {
                    0.0
                }
            })
            .collect();
        (params, dy)
    }

    /// Forward and backward of [`Heads2`] over `x` with `lengths`, from `params` and the
    /// output gradient `dy`.
    fn passes<const S: usize>(
        x: &[f32],
        lengths: Lengths<'_>,
        params: &[f32],
        dy: &[f32],
    ) -> Passes {
        let batch = x.len() / (S * 4);
        forward_backward_padded::<Heads2<S>>(Mode::Train, 0, params, &[], (x, lengths), dy, batch)
    }

    /// What a padded step holds changes no bit of a real position's output, no value of the
    /// parameters' gradients, and gets an input gradient of exactly 0 when the loss ignores
    /// it (the padded queries' outputs have no gradient); with lengths on one thread or two.
    #[test]
    fn the_padding_changes_no_real_position() {
        const S: usize = 40;
        let lengths = [40, 7, 33, 1];
        let mut rng = Rng::new(Seed(9));
        let x: Vec<f32> = (0..4 * S * 4).map(|_| rng.uniform(-1.0, 1.0)).collect();
        let is_real = |i: usize| i / 4 % S < lengths[i / (S * 4)] as usize;
        let mut other = x.clone();
        for (i, v) in other.iter_mut().enumerate() {
            if !is_real(i) {
                *v = rng.uniform(-50.0, 50.0);
            }
        }
        let (params, dy) = params_and_real_gradient(S, &x, &lengths);
        let run = |x: &[f32]| passes::<S>(x, Lengths::new(&lengths), &params, &dy);
        let (a, b) = (run(&x), run(&other));
        for i in 0..x.len() {
            if is_real(i) {
                assert_eq!(a.y[i].to_bits(), b.y[i].to_bits(), "y[{i}]");
            } else {
                // A padded query weighs the real keys by its own step (the one key of a
                // sample of length 1 weighs 1 whatever the query).
                if lengths[i / (S * 4)] > 1 {
                    assert_ne!(a.y[i], b.y[i], "the padded query {i} reads its own step");
                }
                assert_eq!((a.dx[i], b.dx[i]), (0.0, 0.0), "dx[{i}]");
            }
        }
        assert_eq!(a.dx, b.dx);
        assert_eq!(a.dparams, b.dparams);
        let pool = |n| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .build()
                .unwrap()
        };
        let one = pool(1).install(|| run(&x));
        let two = pool(2).install(|| run(&x));
        assert_same_bits(&one, &two);
        assert_same_bits(&one, &a);
    }

    /// A sample of `L` steps padded to 37 gives, at its real steps, the values of the same
    /// steps run as a sequence of `L` (the padded keys physically removed).
    fn masked_keys_are_keys_removed<const L: usize>() {
        const S: usize = 37;
        let mut rng = Rng::new(Seed(12));
        let x: Vec<f32> = (0..S * 4).map(|_| rng.uniform(-1.0, 1.0)).collect();
        let (params, dy) = params_and_real_gradient(S, &x, &[L as u32]);
        let padded = passes::<S>(&x, Lengths::new(&[L as u32]), &params, &dy);
        let real = ..L * 4;
        let short = passes::<L>(&x[real], Lengths::FULL, &params, &dy[real]);
        assert_eq!(bits(&short.y), bits(&padded.y[real]), "y, length {L}");
        assert_eq!(bits(&short.dx), bits(&padded.dx[real]), "dx, length {L}");
        for (g, w) in short.dparams.iter().zip(&padded.dparams) {
            assert!(
                (g - w).abs() <= 1e-5 * w.abs().max(1.0),
                "{g} vs {w}, length {L}"
            );
        }
    }

    #[test]
    fn masked_keys_are_keys_removed_in_either_block() {
        masked_keys_are_keys_removed::<1>();
        masked_keys_are_keys_removed::<6>();
        masked_keys_are_keys_removed::<32>();
        masked_keys_are_keys_removed::<33>();
        masked_keys_are_keys_removed::<36>();
    }

    #[test]
    fn attention_matches_finite_differences() {
        check::<4, 4, 1, true, true>(2);
        check::<5, 6, 2, true, false>(2);
        check::<3, 6, 3, false, false>(3);
        check::<1, 4, 2, true, true>(2);
        // Two causal blocks, the second one short.
        check::<37, 4, 2, true, true>(1);
    }

    /// [`attend`] and [`attend_backward`] with every product over the whole sequence, as
    /// they were before the causal blocks.
    fn whole_products(d: AttentionDims, qkv: [&[f32]; 3], dc: &[f32]) -> [Vec<f32>; 5] {
        let [q, k, v] = qkv;
        let (s, scale) = (d.seq, d.scale());
        let all = || 0..s;
        let ws = &mut vec![0.0; d.head_scratch()];
        let mut p = vec![0.0; d.heads * s * s];
        let mut c = vec![0.0; s * d.dim];
        let mut ds = vec![0.0; s * s];
        let [mut dq, mut dk, mut dv] = [c.clone(), c.clone(), c.clone()];
        for (h, p) in p.chunks_exact_mut(s * s).enumerate() {
            let scores = MatMut::row_major(p, s, s);
            gemm(
                scale,
                head(d, q, h, all()),
                head(d, k, h, all()).t(),
                0.0,
                scores,
                ws,
            );
            Softmax::rows(p, s, Some(s));
            let pm = MatRef::row_major(p, s, s);
            gemm(
                1.0,
                pm,
                head(d, v, h, all()),
                0.0,
                head_mut(d, &mut c, h, all()),
                ws,
            );
            let dcm = head(d, dc, h, all());
            gemm(1.0, pm.t(), dcm, 0.0, head_mut(d, &mut dv, h, all()), ws);
            let dp = MatMut::row_major(&mut ds, s, s);
            gemm(1.0, dcm, head(d, v, h, all()).t(), 0.0, dp, ws);
            causal_softmax_backward(p, &mut ds, s, s);
            let dsm = MatRef::row_major(&ds, s, s);
            let (kh, qh) = (head(d, k, h, all()), head(d, q, h, all()));
            gemm(scale, dsm, kh, 0.0, head_mut(d, &mut dq, h, all()), ws);
            gemm(scale, dsm.t(), qh, 0.0, head_mut(d, &mut dk, h, all()), ws);
        }
        [p, c, dq, dk, dv]
    }

    #[test]
    fn causal_blocks_give_the_values_of_the_whole_products() {
        for (seq, dim, heads) in [(70, 8, 2), (32, 4, 1), (33, 6, 3), (9, 4, 2)] {
            let d = AttentionDims {
                seq,
                dim,
                heads,
                bias: [true; 4],
            };
            let mut rng = Rng::new(Seed(seq as u64));
            let mut values =
                || -> Vec<f32> { (0..seq * dim).map(|_| rng.uniform(-2.0, 2.0)).collect() };
            let (q, k, v, dc) = (values(), values(), values(), values());
            let want = whole_products(d, [&q, &k, &v], &dc);
            let ws = &mut vec![0.0; d.head_scratch()];
            let mut p = vec![f32::NAN; heads * seq * seq];
            let mut c = vec![f32::NAN; seq * dim];
            attend(d, [&q, &k, &v], seq, &mut p, &mut c, ws);
            let [mut dq, mut dk, mut dv] = [c.clone(), c.clone(), c.clone()];
            let mut ds = vec![f32::NAN; seq * seq];
            let g = HeadGrads {
                dq: &mut dq,
                dk: &mut dk,
                dv: &mut dv,
                ds: &mut ds,
                ws,
            };
            attend_backward(d, [&q, &k, &v, &p], seq, &dc, g);
            let got = [p, c, dq, dk, dv];
            for (name, (g, w)) in ["p", "c", "dq", "dk", "dv"]
                .iter()
                .zip(got.iter().zip(&want))
            {
                // Equal values: a sum that skipped a zero weight may differ in a zero's sign.
                assert!(g == w, "{name} at sequence {seq}, {heads} heads");
            }
        }
    }

    #[test]
    fn the_tensor_tables_follow_the_biases() {
        type A = CausalSelfAttention<6, 8, 2, true, false, true, true>;
        let names: Vec<_> = A::TENSORS.iter().map(|t| t.name).collect();
        assert_eq!(
            names,
            ["q_weight", "q_bias", "k_weight", "v_weight", "v_bias", "o_weight", "o_bias"]
        );
        let torch: Vec<_> = A::TORCH.iter().map(|t| t.name).collect();
        assert_eq!(
            torch,
            ["q.weight", "q.bias", "k.weight", "v.weight", "v.bias", "o.weight", "o.bias"]
        );
        let total: usize = A::TENSORS.iter().map(Tensor::len).sum();
        assert_eq!(total, A::PARAMS);
        assert_eq!(A::PARAMS, 4 * 64 + 3 * 8);
    }

    /// The layer's output for `x`, with parameters from `seed`.
    fn outputs<L: Layer>(x: &[f32], batch: usize) -> Vec<f32> {
        let mut rng = Rng::new(Seed(4));
        let params: Vec<f32> = (0..L::PARAMS).map(|_| rng.uniform(-1.0, 1.0)).collect();
        let mut gemm = vec![0.0; L::gemm_len(batch)];
        let mut scratch = vec![0.0; L::scratch_len(batch)];
        let mut ctx = Ctx {
            gemm: &mut gemm,
            scratch: &mut scratch,
            rng: &mut rng,
            first_sample: 0,
            mode: Mode::Eval,
            lengths: crate::layers::Lengths::FULL,
        };
        let mut y = vec![0.0; batch * L::OUT];
        let mut saved = vec![0.0; batch * L::SAVED];
        let io = Forward {
            params: &params,
            state: &mut [],
            x,
            y: &mut y,
            saved: &mut saved,
            batch,
        };
        L::forward(&mut ctx, io);
        y
    }

    #[test]
    fn a_later_position_changes_no_earlier_output() {
        type A = CausalSelfAttention<6, 4, 2>;
        let mut rng = Rng::new(Seed(8));
        let x: Vec<f32> = (0..2 * 24).map(|_| rng.uniform(-1.0, 1.0)).collect();
        let base = outputs::<A>(&x, 2);
        for pos in 0..6 {
            let mut moved = x.clone();
            for f in 0..4 {
                moved[24 + pos * 4 + f] += 0.75;
            }
            let y = outputs::<A>(&moved, 2);
            assert_eq!(bits(&y[..24]), bits(&base[..24]), "another sample changed");
            assert_eq!(
                bits(&y[24..24 + pos * 4]),
                bits(&base[24..24 + pos * 4]),
                "position {pos}"
            );
            assert_ne!(
                y[24 + pos * 4..],
                base[24 + pos * 4..],
                "position {pos} is read"
            );
        }
    }
}
