//! Which language a word is written in: a bidirectional GRU over the word's characters,
//! trained through the `Trainer` on words of different lengths.
//!
//! ```text
//! cargo run --release --example languages
//! ```
//!
//! The data is `data/languages.tsv` (see `data/README.md`): 12,000 words, 2,000 of each of
//! English, French, German, Italian, Spanish and Dutch, 3 to 12 letters long, split 80/20 with
//! a fixed seed. Characters map to ids through a vocabulary built from the training words (0
//! is padding); each word is padded at the end to 12 ids and carries its length, so the GRU
//! reads its real letters only, in both directions.
//!
//! The model: an embedding of width 24, a bidirectional GRU of 48 units a direction whose
//! last states (the forward one after the word's last letter, the backward one after its
//! first) go through dropout (0.3) to a linear classifier over the six languages, trained with
//! Adam through the `Trainer`, 10% of the training words held back for early stopping on the
//! validation loss (the best weights restored). It prints the held-out accuracy beside two
//! baselines: a bag of characters (the same embedding averaged over the word's letters, then a
//! linear classifier, trained the same way), and a character-bigram naive Bayes classifier
//! counted from the training words, and fails unless the GRU beats both.

use fusegraph::data::{Dataset, Vocabulary};
use fusegraph::fit::{EarlyStopping, FitOptions, Metric, Monitor, Trainer, Verbose};
use fusegraph::layers::{BiGru, MeanOverTime};
use fusegraph::optim::torch::Adam;
use fusegraph::prelude::*;
use std::error::Error;

/// The longest word, in characters: every sample is padded to it.
const LEN: usize = 12;
/// Ids the embedding holds: at least padding, unknown and the characters of the training words
/// (50 ids in all).
const VOCAB: usize = 64;
/// Embedding width.
const DIM: usize = 24;
/// GRU units per direction.
const HIDDEN: usize = 48;
/// The languages.
const LANGUAGES: [&str; 6] = ["dutch", "english", "french", "german", "italian", "spanish"];
/// Words per batch.
const BATCH: usize = 32;
/// The most epochs of each model (early stopping ends them sooner).
const EPOCHS: usize = 30;

/// The classifier: characters, both directions of a GRU, the language.
#[fusegraph::model(loss = SoftmaxCrossEntropy, input = u32)]
struct Identifier {
    chars: Embedding<VOCAB, DIM, LEN>,
    gru: BiGru<LEN, DIM, HIDDEN>,
    drop: Dropout<{ 2 * HIDDEN }, 300>,
    head: Dense<{ 2 * HIDDEN }, { LANGUAGES.len() }>,
}

/// The baseline: the mean of the word's character embeddings, then a linear classifier.
#[fusegraph::model(loss = SoftmaxCrossEntropy, input = u32)]
struct BagOfCharacters {
    chars: Embedding<VOCAB, DIM, LEN>,
    mean: MeanOverTime<LEN, DIM>,
    head: Dense<DIM, { LANGUAGES.len() }>,
}

/// The words of `data/languages.tsv` with their language's index.
fn words() -> Result<Vec<(String, u32)>, Box<dyn Error>> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/languages.tsv");
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let mut words = Vec::new();
    for line in text.lines().skip(1) {
        let (language, word) = line.split_once('\t').ok_or("a line without a tab")?;
        let class = LANGUAGES
            .iter()
            .position(|&l| l == language)
            .ok_or_else(|| format!("unknown language {language}"))?;
        words.push((word.to_string(), class as u32));
    }
    Ok(words)
}

/// The words as samples of `LEN` ids padded with 0, with their lengths and languages.
fn dataset(
    words: &[(String, u32)],
    vocab: &Vocabulary,
) -> Result<Dataset<u32, u32>, Box<dyn Error>> {
    let mut ids = Vec::with_capacity(words.len() * LEN);
    let mut lengths = Vec::with_capacity(words.len());
    for (word, _) in words {
        let start = ids.len();
        ids.extend(vocab.encode(word));
        lengths.push((ids.len() - start) as u32);
        ids.resize(start + LEN, Vocabulary::PAD);
    }
    let labels = words.iter().map(|&(_, class)| class).collect();
    Ok(Dataset::new(ids, labels, LEN)?.with_lengths(lengths)?)
}

/// A character-bigram naive Bayes classifier with add-one smoothing, `^` and `$` marking a
/// word's ends: the accuracy on `test` of the one counted from `train`.
fn bigram_accuracy(train: &[(String, u32)], test: &[(String, u32)]) -> f64 {
    use std::collections::HashMap;
    let pairs = |w: &str| -> Vec<(char, char)> {
        let chars: Vec<char> = std::iter::once('^').chain(w.chars()).chain(['$']).collect();
        chars.windows(2).map(|p| (p[0], p[1])).collect()
    };
    let mut counts: Vec<HashMap<(char, char), f64>> = vec![HashMap::new(); LANGUAGES.len()];
    let mut totals = vec![0.0; LANGUAGES.len()];
    for (word, class) in train {
        for pair in pairs(word) {
            *counts[*class as usize].entry(pair).or_default() += 1.0;
            totals[*class as usize] += 1.0;
        }
    }
    let kinds = counts
        .iter()
        .flat_map(|c| c.keys())
        .collect::<std::collections::HashSet<_>>();
    let score = |word: &str, c: usize| -> f64 {
        let denominator = totals[c] + kinds.len() as f64;
        let log_p =
            |pair| ((counts[c].get(&pair).copied().unwrap_or(0.0) + 1.0) / denominator).ln();
        pairs(word).into_iter().map(log_p).sum()
    };
    let right = test.iter().filter(|(word, class)| {
        let best = (0..LANGUAGES.len()).max_by(|&a, &b| score(word, a).total_cmp(&score(word, b)));
        best == Some(*class as usize)
    });
    right.count() as f64 / test.len() as f64
}

/// Trains `model` on `train` through the `Trainer` and returns its accuracy on `test`.
fn held_out_accuracy<M: Model<Input = u32, Loss = SoftmaxCrossEntropy> + Send>(
    model: M,
    train: &Dataset<u32, u32>,
    test: &Dataset<u32, u32>,
) -> Result<f64, Box<dyn Error>> {
    let step = TrainStep::<M, Adam, BATCH>::new(&model, Adam::default().with_lr(3e-3));
    let mut trainer = Trainer::new(model, step)
        .metrics(&[Metric::Accuracy])
        .verbose(Verbose::Silent);
    let mut stop = EarlyStopping::new(Monitor::ValLoss)
        .patience(2)
        .restore_best_weights();
    let options = FitOptions::new(EPOCHS).validation_split(0.1).seed(Seed(5));
    trainer.fit(train, &options, &mut [&mut stop])?;
    let metrics = trainer.evaluate(test)?;
    Ok(f64::from(
        metrics.get(Metric::Accuracy).ok_or("no accuracy")?,
    ))
}

fn main() -> Result<(), Box<dyn Error>> {
    let mut words = words()?;
    Rng::new(Seed(1)).shuffle(&mut words);
    let (test_words, train_words) = words.split_at(words.len() / 5);
    let text: String = train_words.iter().map(|(w, _)| w.as_str()).collect();
    let vocab = Vocabulary::from_text(&text);
    if vocab.size() > VOCAB {
        return Err(format!(
            "{} character ids do not fit the embedding's {VOCAB}",
            vocab.size()
        )
        .into());
    }
    let (train, test) = (dataset(train_words, &vocab)?, dataset(test_words, &vocab)?);
    println!(
        "{} training and {} held-out words, {} character ids",
        train.len(),
        test.len(),
        vocab.size()
    );
    let gru = held_out_accuracy(Identifier::init(Seed(2)), &train, &test)?;
    let bag = held_out_accuracy(BagOfCharacters::init(Seed(2)), &train, &test)?;
    let bigram = bigram_accuracy(train_words, test_words);
    println!("held-out accuracy: bidirectional GRU {:.1}%", 100.0 * gru);
    println!("baselines: bag of characters {:.1}%, character-bigram naive Bayes {:.1}%, one language {:.1}%",
        100.0 * bag, 100.0 * bigram, 100.0 / LANGUAGES.len() as f64);
    if gru <= bag.max(bigram) {
        return Err(format!("the GRU ({gru:.3}) did not beat the baselines").into());
    }
    Ok(())
}
