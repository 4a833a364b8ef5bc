//! A character-level transformer language model trained on the shipped word list.
//!
//! ```text
//! cargo run --release --example char_lm
//! ```
//!
//! The corpus is `data/words.txt` (Debian's `wamerican`, see `data/README.md`): its words, in an
//! order shuffled with a fixed seed, one a line, 90% of them for training and 10% for
//! validation. Characters map to 55 ids (newline, apostrophe, the 52 ASCII letters, and one id
//! for the 274 accented letters). The model reads 32 characters and predicts the next one at
//! every position: token and learned position embeddings of width 32, one pre-LayerNorm
//! transformer block (causal self-attention with 4 heads, a GELU MLP of width 128, each with a
//! residual), a final LayerNorm and a per-position head to the 55 logits, trained with AdamW on
//! random windows of the training text.
//!
//! It prints the validation loss in bits per character against a bigram model counted from
//! the same training text (add-one smoothing, which conditions on one character where the
//! transformer sees up to 32), samples a few lines, and fails unless the transformer beats
//! the bigram model.

use fusegraph::layers::{CausalSelfAttention, PerPosition};
use fusegraph::loss::SequenceCrossEntropy;
use fusegraph::optim::torch::AdamW;
use fusegraph::prelude::*;
use std::error::Error;

/// Character ids: newline, apostrophe, `a..z`, `A..Z`, and one for every other character.
const VOCAB: usize = 55;
/// Characters the model reads at once.
const SEQ: usize = 32;
/// Model width.
const DIM: usize = 32;
/// Attention heads.
const HEADS: usize = 4;
/// Training windows per step.
const BATCH: usize = 32;
/// Training steps.
const STEPS: usize = 1500;

/// The language model, in the graph form.
#[fusegraph::model(loss = SequenceCrossEntropy<VOCAB>, input = u32, graph(
    e = pos(tok(x)),
    a = attn(ln1(e)) + e,
    m = fc2(fc1(ln2(a)).gelu()) + a,
    logits = head(ln_f(m))
))]
struct CharLm {
    tok: Embedding<VOCAB, DIM, SEQ>,
    pos: PositionalEmbedding<SEQ, DIM, SEQ>,
    ln1: PerPosition<LayerNorm<DIM>, SEQ>,
    attn: CausalSelfAttention<SEQ, DIM, HEADS>,
    ln2: PerPosition<LayerNorm<DIM>, SEQ>,
    fc1: PerPosition<Dense<DIM, { 4 * DIM }>, SEQ>,
    fc2: PerPosition<Dense<{ 4 * DIM }, DIM>, SEQ>,
    ln_f: PerPosition<LayerNorm<DIM>, SEQ>,
    head: PerPosition<Dense<DIM, VOCAB>, SEQ>,
}

/// The id of a character.
fn id(c: char) -> u32 {
    match c {
        '\n' => 0,
        '\'' => 1,
        'a'..='z' => 2 + (c as u32 - 'a' as u32),
        'A'..='Z' => 28 + (c as u32 - 'A' as u32),
        _ => 54,
    }
}

/// The character of an id (`?` for the accented letters' shared id).
fn char_of(id: u32) -> char {
    match id {
        0 => '\n',
        1 => '\'',
        2..=27 => char::from(b'a' + (id - 2) as u8),
        28..=53 => char::from(b'A' + (id - 28) as u8),
        _ => '?',
    }
}

/// The word list shuffled with `seed`, split into training and validation text, as ids.
fn corpus(seed: Seed) -> Result<(Vec<u32>, Vec<u32>), Box<dyn Error>> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/words.txt");
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let mut words: Vec<&str> = text.lines().filter(|w| !w.is_empty()).collect();
    Rng::new(seed).shuffle(&mut words);
    let cut = words.len() * 9 / 10;
    let ids = |words: &[&str]| -> Vec<u32> {
        words
            .iter()
            .flat_map(|w| w.chars().chain(['\n']))
            .map(id)
            .collect()
    };
    Ok((ids(&words[..cut]), ids(&words[cut..])))
}

/// Windows of `SEQ` ids starting at `starts`, with the next id at every position as targets.
fn windows(text: &[u32], starts: &[usize], x: &mut Vec<u32>, y: &mut Vec<u32>) {
    x.clear();
    y.clear();
    for &s in starts {
        x.extend_from_slice(&text[s..s + SEQ]);
        y.extend_from_slice(&text[s + 1..s + SEQ + 1]);
    }
}

/// A bigram model with add-one smoothing: `log2 P(next | current)`.
struct Bigram {
    log2p: Vec<f64>,
}

impl Bigram {
    fn count(text: &[u32]) -> Bigram {
        let mut counts = vec![1.0f64; VOCAB * VOCAB];
        for pair in text.windows(2) {
            counts[pair[0] as usize * VOCAB + pair[1] as usize] += 1.0;
        }
        let log2p = counts
            .chunks(VOCAB)
            .flat_map(|row| {
                let total: f64 = row.iter().sum();
                row.iter().map(move |c| (c / total).log2())
            })
            .collect();
        Bigram { log2p }
    }

    /// Bits per character of predicting `y` from `x`, position by position.
    fn bits(&self, x: &[u32], y: &[u32]) -> f64 {
        let total: f64 = x
            .iter()
            .zip(y)
            .map(|(&a, &b)| -self.log2p[a as usize * VOCAB + b as usize])
            .sum();
        total / x.len() as f64
    }
}

/// Bits per character of the model on every whole window of `text` (windows side by side).
fn model_bits(step: &mut TrainStep<CharLm, AdamW, BATCH>, model: &CharLm, text: &[u32]) -> f64 {
    let starts: Vec<usize> = (0..(text.len() - 1) / SEQ).map(|w| w * SEQ).collect();
    let (mut x, mut y) = (Vec::new(), Vec::new());
    windows(text, &starts, &mut x, &mut y);
    let nats = step.evaluate(model, &x, &y).loss;
    f64::from(nats) / std::f64::consts::LN_2
}

/// `count` words sampled after a newline at temperature 0.8.
fn sample(step: &mut TrainStep<CharLm, AdamW, BATCH>, model: &CharLm, count: usize) -> String {
    let mut rng = Rng::new(Seed(11));
    let mut context = vec![id('\n')];
    let mut out = String::new();
    while out.matches('\n').count() < count {
        let start = context.len().saturating_sub(SEQ);
        let mut x = context[start..].to_vec();
        let at = x.len() - 1;
        x.resize(SEQ, 0);
        let logits = &step.predict(model, &x)[at * VOCAB..(at + 1) * VOCAB];
        let top = logits.iter().cloned().fold(f32::MIN, f32::max);
        let weights: Vec<f32> = logits.iter().map(|z| ((z - top) / 0.8).exp()).collect();
        let mut r = rng.uniform(0.0, weights.iter().sum());
        let next = weights
            .iter()
            .position(|&w| {
                r -= w;
                r <= 0.0
            })
            .unwrap_or(VOCAB - 1) as u32;
        out.push(char_of(next));
        context.push(next);
    }
    out
}

fn main() -> Result<(), Box<dyn Error>> {
    let (train, valid) = corpus(Seed(7))?;
    let bigram = Bigram::count(&train);
    let mut model = CharLm::init(Seed(3));
    let opt = AdamW::default().with_lr(3e-3).with_weight_decay(0.01);
    let mut step = TrainStep::<CharLm, AdamW, BATCH>::new(&model, opt);
    let mut rng = Rng::new(Seed(5));
    let (mut x, mut y) = (Vec::new(), Vec::new());
    let mut starts = vec![0; BATCH];
    let mut recent = 0.0f64;
    let started = std::time::Instant::now();
    for t in 1..=STEPS {
        for s in starts.iter_mut() {
            *s = rng.below((train.len() - SEQ - 1) as u32) as usize;
        }
        windows(&train, &starts, &mut x, &mut y);
        recent += f64::from(step.run(&mut model, &x, &y));
        if t % 300 == 0 {
            println!(
                "step {t:>5}: training loss {:.3} bits/char ({:.1} s)",
                recent / 300.0 / std::f64::consts::LN_2,
                started.elapsed().as_secs_f64()
            );
            recent = 0.0;
        }
    }
    let (xs, ys) = (&valid[..valid.len() - 1], &valid[1..]);
    let (lm, base) = (model_bits(&mut step, &model, &valid), bigram.bits(xs, ys));
    println!(
        "validation: transformer {lm:.3} bits/char, bigram {base:.3} bits/char \
         ({} parameters, {} training characters)",
        model.params().len(),
        train.len()
    );
    println!("samples:\n{}", sample(&mut step, &model, 8));
    if lm >= base {
        return Err(
            format!("the transformer ({lm:.3}) did not beat the bigram model ({base:.3})").into(),
        );
    }
    Ok(())
}
