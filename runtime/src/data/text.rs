//! Text for token models: a [`Vocabulary`] of the characters of a corpus, and next-token
//! windows over the encoded text ([`NextTokens`]).

use super::windows::{at_least_one, window_starts};
use super::{DataError, Dataset};
use std::collections::BTreeMap;
use std::string::String;
use std::vec::Vec;

/// The characters of a corpus and their ids: each character of the corpus has an id, in the
/// order of the characters' code points (so that the same corpus always gives the same ids),
/// after two reserved ids, as Keras' `StringLookup(mask_token=...)` numbers them:
/// [`Vocabulary::PAD`] (0, padding; Keras' `mask_zero=True`) and [`Vocabulary::UNKNOWN`] (1,
/// every character it does not hold).
/// A model's `Embedding` needs [`Vocabulary::size`] ids. Save it with the model, so that
/// inference maps text to the same ids: [`to_metadata`](Vocabulary::to_metadata) is a string
/// for a checkpoint's metadata (`checkpoint::save_with(path, &model, &step,
/// &[(Vocabulary::METADATA_KEY, &vocabulary.to_metadata())])`), and
/// [`from_metadata`](Vocabulary::from_metadata) reads it back from what `load_model` returns
/// (`metadata.get(Vocabulary::METADATA_KEY)`).
///
/// ```
/// use fusegraph_runtime::data::{NextTokens, Vocabulary};
/// let text = "abba cab\n";
/// let vocabulary = Vocabulary::from_text(text);
/// assert_eq!(vocabulary.size(), 7); // PAD, UNKNOWN, '\n', ' ', 'a', 'b', 'c'
/// let ids = vocabulary.encode(text);
/// assert_eq!(ids, [4, 5, 5, 4, 3, 6, 4, 5, 2]);
/// assert_eq!(vocabulary.decode(&vocabulary.encode("cabz")), "cab\u{fffd}");
///
/// let data = NextTokens::new(4).stride(2).dataset(&ids)?;
/// assert_eq!((data.len(), data.features(), data.targets_per_sample()), (3, 4, 4));
/// assert_eq!(data.sample(1), (&[5, 4, 3, 6][..], &[4, 3, 6, 4][..]));
///
/// let saved = vocabulary.to_metadata();
/// assert_eq!(Vocabulary::from_metadata(&saved)?, vocabulary);
/// # Ok::<(), fusegraph_runtime::data::DataError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vocabulary {
    chars: Vec<char>,
}

impl Vocabulary {
    /// The id of padding, which no character has.
    pub const PAD: u32 = 0;
    /// The id of every character the vocabulary does not hold.
    pub const UNKNOWN: u32 = 1;
    /// The key under which to save a vocabulary in a checkpoint's metadata.
    pub const METADATA_KEY: &'static str = "vocabulary";
    /// The id of the first character.
    const FIRST: u32 = 2;

    /// The vocabulary of every character of `text`.
    pub fn from_text(text: &str) -> Self {
        Self::from_text_min_count(text, 1)
    }

    /// The vocabulary of the characters that occur at least `min_count` times in `text`; the
    /// rarer ones map to [`UNKNOWN`](Self::UNKNOWN).
    pub fn from_text_min_count(text: &str, min_count: usize) -> Self {
        let mut counts = BTreeMap::new();
        for c in text.chars() {
            *counts.entry(c).or_insert(0usize) += 1;
        }
        let chars = counts
            .into_iter()
            .filter(|&(_, n)| n >= min_count)
            .map(|(c, _)| c)
            .collect();
        Vocabulary { chars }
    }

    /// Number of ids, the two reserved ones included: what an `Embedding` of this vocabulary
    /// needs.
    pub fn size(&self) -> usize {
        self.chars.len() + Self::FIRST as usize
    }

    /// The characters, in the order of their ids (from 2).
    pub fn chars(&self) -> &[char] {
        &self.chars
    }

    /// The id of `c`: [`UNKNOWN`](Self::UNKNOWN) if the vocabulary does not hold it.
    pub fn id(&self, c: char) -> u32 {
        self.chars
            .binary_search(&c)
            .map_or(Self::UNKNOWN, |i| i as u32 + Self::FIRST)
    }

    /// The character of `id`; `None` for [`PAD`](Self::PAD), [`UNKNOWN`](Self::UNKNOWN) and
    /// ids beyond the vocabulary.
    pub fn char(&self, id: u32) -> Option<char> {
        let i = id.checked_sub(Self::FIRST)?;
        self.chars.get(i as usize).copied()
    }

    /// The ids of the characters of `text`.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        text.chars().map(|c| self.id(c)).collect()
    }

    /// The text of `ids`: padding left out, `U+FFFD` (the replacement character) for
    /// [`UNKNOWN`](Self::UNKNOWN) and for ids beyond the vocabulary.
    pub fn decode(&self, ids: &[u32]) -> String {
        ids.iter()
            .filter(|&&id| id != Self::PAD)
            .map(|&id| self.char(id).unwrap_or(char::REPLACEMENT_CHARACTER))
            .collect()
    }

    /// The vocabulary as a string for a checkpoint's metadata: its characters in the order of
    /// their ids.
    pub fn to_metadata(&self) -> String {
        self.chars.iter().collect()
    }

    /// The vocabulary that [`to_metadata`](Self::to_metadata) wrote: an error unless its
    /// characters are in the order of their code points, each once.
    pub fn from_metadata(text: &str) -> Result<Self, DataError> {
        let chars: Vec<char> = text.chars().collect();
        if let Some(i) = chars.windows(2).position(|w| w[0] >= w[1]) {
            return Err(DataError::Vocabulary {
                position: i + 1,
                found: chars[i + 1],
                before: chars[i],
            });
        }
        Ok(Vocabulary { chars })
    }
}

/// Next-token windows over a sequence of ids, as a causal language model trains on: a sample
/// is `context` consecutive ids, its targets the id after each of them (the sample shifted by
/// one: `[context]` targets, for a per-position cross-entropy), a window starting every
/// `stride` ids (by default 1). See [`Vocabulary`] for an example.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NextTokens {
    context: usize,
    stride: usize,
}

impl NextTokens {
    /// Windows of `context` ids, one starting at every id.
    pub fn new(context: usize) -> Self {
        NextTokens { context, stride: 1 }
    }

    /// A window starts every `stride` ids (from the first). With `stride = context`, the
    /// windows lie side by side, each id read once.
    pub fn stride(mut self, stride: usize) -> Self {
        self.stride = stride;
        self
    }

    /// The windows of `ids` (each id's target in a window is the id after it), in order.
    ///
    /// An error for a context or stride of 0, or fewer than `context + 1` ids.
    pub fn dataset(&self, ids: &[u32]) -> Result<Dataset<u32, u32>, DataError> {
        at_least_one(&[("context", self.context), ("stride", self.stride)])?;
        let starts = window_starts(ids.len(), self.context, 1, self.stride)?;
        let mut x = Vec::with_capacity(starts.len() * self.context);
        let mut y = Vec::with_capacity(starts.len() * self.context);
        for start in starts {
            x.extend_from_slice(&ids[start..start + self.context]);
            y.extend_from_slice(&ids[start + 1..start + self.context + 1]);
        }
        Dataset::new(x, y, self.context)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;

    #[test]
    fn ids_follow_the_code_points_after_the_reserved_two() {
        let v = Vocabulary::from_text("zébra zèbre\n");
        assert_eq!(v.chars(), &['\n', ' ', 'a', 'b', 'e', 'r', 'z', 'è', 'é']);
        assert_eq!(
            (v.id('\n'), v.id('é'), v.id('x')),
            (2, 10, Vocabulary::UNKNOWN)
        );
        assert_eq!(
            (v.char(0), v.char(1), v.char(2), v.char(11)),
            (None, None, Some('\n'), None)
        );
        assert_eq!(v, Vocabulary::from_text("èé\n zbrae"));
        assert_eq!(v.decode(&[7, 0, 6, 99, 1, 4]), "re\u{fffd}\u{fffd}a");
        let rare = Vocabulary::from_text_min_count("aab\nb\ncé", 2);
        assert_eq!(rare.chars(), &['\n', 'a', 'b']);
        assert_eq!(rare.encode("cab"), [Vocabulary::UNKNOWN, 3, 4]);
    }

    #[test]
    fn metadata_round_trips_and_is_checked() {
        let v = Vocabulary::from_text("the \"quick\"\n\tfox, ünïcødé");
        let text = v.to_metadata();
        assert_eq!(Vocabulary::from_metadata(&text).unwrap(), v);
        assert_eq!(Vocabulary::from_metadata("").unwrap().size(), 2);
        let err = Vocabulary::from_metadata("abca").unwrap_err().to_string();
        assert_eq!(
            err,
            "vocabulary: character 'a' at 3 is not after 'c' \
             (the characters must be in the order of code points, each once)"
        );
    }

    #[test]
    fn next_token_windows_shift_by_one() {
        let ids: Vec<u32> = (10..20).collect();
        let data = NextTokens::new(3).dataset(&ids).unwrap();
        assert_eq!(data.len(), 7);
        assert_eq!(data.sample(6), (&[16, 17, 18][..], &[17, 18, 19][..]));
        let side = NextTokens::new(3).stride(3).dataset(&ids).unwrap();
        assert_eq!(side.x(), &[10, 11, 12, 13, 14, 15, 16, 17, 18]);
        assert_eq!(side.y(), &[11, 12, 13, 14, 15, 16, 17, 18, 19]);
        let err = |w: NextTokens, n: usize| w.dataset(&ids[..n]).unwrap_err().to_string();
        assert_eq!(
            err(NextTokens::new(0), 10),
            "the context must be at least 1"
        );
        assert_eq!(
            err(NextTokens::new(2).stride(0), 10),
            "the stride must be at least 1"
        );
        assert_eq!(
            err(NextTokens::new(3), 3),
            "a series of 3 steps is shorter than a window of 3 steps and its horizon of 1"
        );
        assert_eq!(NextTokens::new(3).dataset(&ids[..4]).unwrap().len(), 1);
    }
}
