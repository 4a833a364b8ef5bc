//! W5 for `bench_train`: the step of a causal transformer language model (vocabulary 64, width
//! 64, 4 heads, 2 pre-LayerNorm blocks with a GELU MLP of width 256, sequence 64, batch 16,
//! PyTorch's AdamW), against the GEMM on the step's largest product. Included with
//! `#[path = "support/w5.rs"] mod w5;` beside `timing`.

use crate::against_gemm::against_gemm;
use crate::timing::{value, Variant};
use fusegraph::kernels::gemm::{gemm, workspace_len, MatMut, MatRef};
use fusegraph::optim::torch::AdamW;
use fusegraph::prelude::*;
use std::hint::black_box;

/// Vocabulary, width, heads, MLP width, sequence and batch.
const VOCAB: usize = 64;
const DIM: usize = 64;
const HEADS: usize = 4;
const MLP: usize = 4 * DIM;
const SEQ: usize = 64;
const BATCH: usize = 16;

/// Workload W5: two pre-LayerNorm blocks over token and position embeddings.
#[fusegraph::model(loss = SequenceCrossEntropy<VOCAB>, input = u32, graph(
    e = pos(tok(x)),
    a1 = attn1(ln11(e)) + e,
    m1 = fc12(fc11(ln12(a1))) + a1,
    a2 = attn2(ln21(m1)) + m1,
    m2 = fc22(fc21(ln22(a2))) + a2,
    logits = head(ln_f(m2))
))]
struct W5 {
    tok: Embedding<VOCAB, DIM, SEQ>,
    pos: PositionalEmbedding<SEQ, DIM, SEQ>,
    ln11: PerPosition<LayerNorm<DIM>, SEQ>,
    attn1: CausalSelfAttention<SEQ, DIM, HEADS>,
    ln12: PerPosition<LayerNorm<DIM>, SEQ>,
    fc11: PerPosition<Dense<DIM, MLP, Gelu>, SEQ>,
    fc12: PerPosition<Dense<MLP, DIM>, SEQ>,
    ln21: PerPosition<LayerNorm<DIM>, SEQ>,
    attn2: CausalSelfAttention<SEQ, DIM, HEADS>,
    ln22: PerPosition<LayerNorm<DIM>, SEQ>,
    fc21: PerPosition<Dense<DIM, MLP, Gelu>, SEQ>,
    fc22: PerPosition<Dense<MLP, DIM>, SEQ>,
    ln_f: PerPosition<LayerNorm<DIM>, SEQ>,
    head: PerPosition<Dense<DIM, VOCAB>, SEQ>,
}

/// The matrix-product FLOPs of one W5 step, `2·m·k·n` each, over `R = batch·seq` rows: per
/// block, the four attention projections (forward, weight and input gradients: `24·R·D²`),
/// scores and mixing per sample and head (forward `4·T²·hd`, backward `8·T²·hd`: `12·B·T²·D`)
/// and the MLP's two layers (`12·R·D·F`); the head (`6·R·D·V`). 729 MFLOP.
fn w5_flops() -> f64 {
    let (r, d, f, v) = (BATCH * SEQ, DIM, MLP, VOCAB);
    let block = 24 * r * d * d + 12 * BATCH * SEQ * SEQ * d + 12 * r * d * f;
    (2 * block + 6 * r * d * v) as f64
}

fn w5_variant<'a>() -> Variant<'a> {
    let mut model = W5::init(Seed(5));
    let opt = AdamW::default();
    let mut step = TrainStep::<W5, AdamW, BATCH>::new(&model, opt);
    let x: Vec<u32> = (0..BATCH * SEQ).map(|i| (i * 7 % VOCAB) as u32).collect();
    let y: Vec<u32> = (0..BATCH * SEQ)
        .map(|i| ((i * 7 + 3) % VOCAB) as u32)
        .collect();
    Variant::new(format!("train step, batch {BATCH}, adamw"), move || {
        black_box(step.run(&mut model, &x, &y));
    })
}

/// W5's largest product alone, as the MLP's first layer makes it: `X·W` over every position,
/// `batch·seq` x 64 by 64 x 256.
fn w5_gemm_variant<'a>() -> Variant<'a> {
    let r = BATCH * SEQ;
    let x: Vec<f32> = (0..r * DIM).map(value).collect();
    let w: Vec<f32> = (0..DIM * MLP).map(|i| value(i + 3)).collect();
    let mut y = vec![0.0f32; r * MLP];
    let mut ws = vec![0.0f32; workspace_len(r, DIM, MLP)];
    Variant::new(format!("gemm {r}x{DIM} · {DIM}x{MLP}"), move || {
        gemm(
            1.0,
            MatRef::row_major(&x, r, DIM),
            MatRef::row_major(&w, DIM, MLP),
            0.0,
            MatMut::row_major(&mut y, r, MLP),
            &mut ws,
        );
        black_box(&y);
    })
}

/// W5 on `threads` threads; returns the step's fraction of the GEMM's rate.
pub fn w5_table(threads: usize) -> f64 {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    let title = format!(
        "W5 transformer LM (vocabulary {VOCAB}, width {DIM}, {HEADS} heads, 2 blocks, sequence \
         {SEQ}), sequence cross-entropy, AdamW, {threads} thread(s)"
    );
    let gemm_flops = 2.0 * (BATCH * SEQ * DIM * MLP) as f64;
    pool.install(|| {
        let (gemm, step) = (w5_gemm_variant(), w5_variant());
        against_gemm(&title, gemm, step, [gemm_flops, w5_flops()], 2)
    })
}
