//! A character-level transformer language model trained on the shipped word list through the
//! `Trainer`, saved with its vocabulary, and sampled from the reloaded file.
//!
//! ```text
//! cargo run --release --example char_lm
//! ```
//!
//! The corpus is `data/words.txt` (Debian's `wamerican`, see `data/README.md`): its words, in an
//! order shuffled with a fixed seed, one a line, 90% of them for training and 10% for
//! validation. A `Vocabulary` built from the training text gives the 55 characters seen at
//! least 50 times their ids (newline, apostrophe, the 52 ASCII letters and `é`), after padding
//! (0) and one id for every rarer character (1). `NextTokens` cuts the text into windows of 32
//! characters side by side, each with the next character at every position as its targets.
//! The model reads 32 characters and predicts the next one at every position: token and learned
//! position embeddings of width 32, one pre-LayerNorm transformer block (causal self-attention
//! with 4 heads, a GELU MLP of width 128, each with a residual), a final LayerNorm and a
//! per-position head to the 57 logits, trained with AdamW through the `Trainer`.
//!
//! It saves the model with the vocabulary in the checkpoint's metadata, loads both into a new
//! model, prints the validation loss in bits per character against a bigram model counted
//! from the same training text (add-one smoothing, which conditions on one character where
//! the transformer sees up to 32), samples a few lines through the loaded vocabulary, and fails
//! unless the transformer beats the bigram model.

use fusegraph::checkpoint;
use fusegraph::data::{Dataset, NextTokens, Vocabulary};
use fusegraph::fit::{FitOptions, Trainer, Verbose};
use fusegraph::layers::{CausalSelfAttention, PerPosition};
use fusegraph::loss::SequenceCrossEntropy;
use fusegraph::optim::torch::AdamW;
use fusegraph::prelude::*;
use std::error::Error;

/// Character ids: padding, unknown, and the 55 characters of the training text seen at least
/// [`MIN_COUNT`] times.
const VOCAB: usize = 57;
/// How often a character is seen in the training text to have an id of its own.
const MIN_COUNT: usize = 50;
/// Characters the model reads at once.
const SEQ: usize = 32;
/// Model width.
const DIM: usize = 32;
/// Attention heads.
const HEADS: usize = 4;
/// Training windows per step.
const BATCH: usize = 32;
/// Epochs over the training windows.
const EPOCHS: usize = 2;

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

/// The word list shuffled with `seed`, split into training and validation text, one word a
/// line.
fn corpus(seed: Seed) -> Result<(String, String), Box<dyn Error>> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/words.txt");
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let mut words: Vec<&str> = text.lines().filter(|w| !w.is_empty()).collect();
    Rng::new(seed).shuffle(&mut words);
    let cut = words.len() * 9 / 10;
    let lines = |words: &[&str]| words.iter().map(|w| format!("{w}\n")).collect::<String>();
    Ok((lines(&words[..cut]), lines(&words[cut..])))
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

/// Bits per character of the model on the windows of `data`.
fn model_bits(
    trainer: &mut Trainer<CharLm, AdamW, BATCH>,
    data: &Dataset<u32, u32>,
) -> Result<f64, Box<dyn Error>> {
    let nats = trainer.evaluate(data)?.loss;
    Ok(f64::from(nats) / std::f64::consts::LN_2)
}

/// `count` words sampled after a newline at temperature 0.8, through `vocabulary`.
fn sample(
    step: &mut TrainStep<CharLm, AdamW, BATCH>,
    model: &CharLm,
    vocabulary: &Vocabulary,
    count: usize,
) -> String {
    let mut rng = Rng::new(Seed(11));
    let mut context = vocabulary.encode("\n");
    let mut out = String::new();
    while out.matches('\n').count() < count {
        let start = context.len().saturating_sub(SEQ);
        let mut x = context[start..].to_vec();
        let at = x.len() - 1;
        x.resize(SEQ, Vocabulary::PAD);
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
        out.push_str(&vocabulary.decode(&[next]));
        context.push(next);
    }
    out
}

fn main() -> Result<(), Box<dyn Error>> {
    let (train_text, valid_text) = corpus(Seed(7))?;
    let vocabulary = Vocabulary::from_text_min_count(&train_text, MIN_COUNT);
    if vocabulary.size() != VOCAB {
        return Err(format!(
            "the vocabulary has {} ids, the model {VOCAB}",
            vocabulary.size()
        )
        .into());
    }
    let (train, valid) = (
        vocabulary.encode(&train_text),
        vocabulary.encode(&valid_text),
    );
    let windows = NextTokens::new(SEQ).stride(SEQ);
    let (train_windows, valid_windows) = (windows.dataset(&train)?, windows.dataset(&valid)?);
    let bigram = Bigram::count(&train);

    let model = CharLm::init(Seed(3));
    let opt = AdamW::default().with_lr(3e-3).with_weight_decay(0.01);
    let step = TrainStep::<CharLm, AdamW, BATCH>::new(&model, opt);
    let mut trainer = Trainer::new(model, step).verbose(Verbose::Epochs);
    let options = FitOptions::new(EPOCHS)
        .validation_data(&valid_windows)
        .seed(Seed(5));
    trainer.fit(&train_windows, &options, &mut [])?;

    let path = std::env::temp_dir().join("fusegraph_char_lm.safetensors");
    let saved = vocabulary.to_metadata();
    let (model, step) = (trainer.model(), trainer.step());
    checkpoint::save_with(&path, model, step, &[(Vocabulary::METADATA_KEY, &saved)])?;
    let mut loaded = CharLm::init(Seed(0));
    let metadata = checkpoint::load_model(&path, &mut loaded)?;
    let text = metadata
        .get(Vocabulary::METADATA_KEY)
        .ok_or("the checkpoint has no vocabulary")?;
    let loaded_vocabulary = Vocabulary::from_metadata(text)?;
    std::fs::remove_file(&path)?;

    let (xs, ys) = (&valid[..valid.len() - 1], &valid[1..]);
    let (lm, base) = (
        model_bits(&mut trainer, &valid_windows)?,
        bigram.bits(xs, ys),
    );
    println!(
        "validation: transformer {lm:.3} bits/char, bigram {base:.3} bits/char \
         ({} parameters, {} training characters)",
        loaded.params().len(),
        train.len()
    );
    let step = trainer.step_mut();
    println!("samples:\n{}", sample(step, &loaded, &loaded_vocabulary, 8));
    if lm >= base {
        return Err(
            format!("the transformer ({lm:.3}) did not beat the bigram model ({base:.3})").into(),
        );
    }
    Ok(())
}
