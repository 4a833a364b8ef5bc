//! Token and position embeddings: [`Embedding`] looks up a row of its table per token id,
//! [`PositionalEmbedding`] adds a learned row per position. Both are constant-size types over
//! functions that take their sizes at run time ([`EmbeddingDims`], [`PositionalDims`]).

use super::token::OutsideVocabulary;
use super::{buffers, Backward, Ctx, Forward, Grad, Init, Layer, Tensor, TokenLayer};
use core::fmt;

/// [`Embedding`]'s `PAD` when no token is padding.
pub const NO_PADDING: usize = usize::MAX;

/// The sizes of a token embedding, for [`embedding_forward`] and [`embedding_backward`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EmbeddingDims {
    /// Rows of the table: ids run over `0..vocab`.
    pub vocab: usize,
    /// Values per row.
    pub dim: usize,
    /// Token ids per sample.
    pub seq: usize,
    /// The id whose row gets no gradient, if any.
    pub padding: Option<usize>,
}

impl EmbeddingDims {
    /// Values of the table, `vocab * dim`.
    pub const fn params(&self) -> usize {
        self.vocab * self.dim
    }
}

/// A token id as an input holds it: a `u32` from a model's input, or a whole number written
/// as `f32` in a layer's `f32` input.
trait Id: Copy + fmt::Display {
    /// The table row the id names, if it is one of `0..vocab`.
    fn row(self, vocab: usize) -> Option<usize>;
}

impl Id for u32 {
    fn row(self, vocab: usize) -> Option<usize> {
        usize::try_from(self).ok().filter(|&r| r < vocab)
    }
}

impl Id for f32 {
    fn row(self, vocab: usize) -> Option<usize> {
        let r = self as usize;
        (self >= 0.0 && r < vocab && r as f32 == self).then_some(r)
    }
}

/// The table row of the id at flat index `at` of a batch of `dims.seq` ids a sample.
///
/// # Panics
/// If the id is not one of `0..vocab`, naming its sample, its position and the id as given: a
/// wrong id is the caller's bug, never a read of another row.
fn row_of<I: Id>(id: I, dims: &EmbeddingDims, at: usize) -> usize {
    match id.row(dims.vocab) {
        Some(r) => r,
        None => panic!(
            "Embedding: {}",
            OutsideVocabulary {
                sample: at / dims.seq,
                position: at % dims.seq,
                id,
                vocab: dims.vocab,
            }
        ),
    }
}

/// `y[s] = table[x[s]]` for each of the `batch * seq` ids of `io.x`.
fn gather<I: Id>(dims: EmbeddingDims, io: Forward<'_, I>) {
    let d = dims.dim;
    let ids = &io.x[..io.batch * dims.seq];
    for (at, (&id, y)) in ids.iter().zip(io.y.chunks_exact_mut(d)).enumerate() {
        let r = row_of(id, &dims, at);
        y.copy_from_slice(&io.params[r * d..(r + 1) * d]);
    }
}

/// The output gradient of every position added into the row of its id, in sample and
/// position order, the padding row left at 0 (nothing when the table is frozen); `io.dx`, if
/// asked for, gets zeros.
fn scatter<I: Id>(dims: EmbeddingDims, io: Backward<'_, I>) {
    let d = dims.dim;
    let [Some(dtable)] = io.frozen.split(io.dparams, [dims.params()]) else {
        return zero_input_grad(io.dx);
    };
    dtable.fill(0.0);
    let ids = &io.x[..io.batch * dims.seq];
    for (at, (&id, dy)) in ids.iter().zip(io.dy.chunks_exact(d)).enumerate() {
        let r = row_of(id, &dims, at);
        if Some(r) == dims.padding {
            continue;
        }
        for (g, &dy) in dtable[r * d..(r + 1) * d].iter_mut().zip(dy) {
            *g += dy;
        }
    }
    zero_input_grad(io.dx);
}

/// The gradient of ids, which have none: zeros into `dx` if it is overwritten.
fn zero_input_grad(dx: Grad<'_>) {
    if let Some((dx, false)) = dx.destination() {
        dx.fill(0.0);
    }
}

/// `y[s] = table[x[s]]` for each of the `batch * seq` ids of `io.x`.
///
/// # Panics
/// If an id is not in `0..vocab` (see [`Embedding`]).
pub fn embedding_forward(dims: EmbeddingDims, io: Forward<'_, u32>) {
    gather(dims, io);
}

/// d loss / d table: the output gradient of every position added into the row of its id, in
/// sample and position order, the padding row left at 0; nothing when `io.frozen` freezes the
/// table (`io.dparams` is then empty). Ids have no gradient: `io.dx`, if asked for, gets zeros.
///
/// # Panics
/// If an id is not in `0..vocab` (see [`Embedding`]).
pub fn embedding_backward(dims: EmbeddingDims, io: Backward<'_, u32>) {
    scatter(dims, io);
}

/// A token embedding, PyTorch's `nn.Embedding(VOCAB, DIM, padding_idx=PAD)` over `SEQ` ids
/// per sample: `[SEQ]` ids in, `[SEQ, DIM]` rows out.
///
/// The first layer of a model with `input = u32`, which hands it the ids as they are
/// ([`TokenLayer`]); in a layer's `f32` input ([`Layer::forward`]) an id is a whole number.
/// Parameter: `weight` `[VOCAB, DIM]` (PyTorch's name and layout),
/// initialized from `N(0, 1)` as PyTorch does, with the padding row at 0. The padding id's row
/// is read like any other but its gradient is always 0, so it stays where it starts. Ids have
/// no gradient; an input gradient through this layer is 0.
///
/// A vocabulary of no ids or of more than a `u32` addresses (2^32), or a `PAD` outside it,
/// does not compile.
///
/// # Panics
/// Its forward and backward passes panic on an id outside `0..VOCAB`, naming its sample, its
/// position and the id: a wrong id is the caller's bug and is never read as another row.
///
/// ```
/// use fusegraph_runtime::layers::{Ctx, Embedding, Forward, Mode, TokenLayer};
/// use fusegraph_runtime::rng::{Rng, Seed};
///
/// type Tok = Embedding<3, 2, 2>;
/// let table = [0.0, 1.0, 10.0, 11.0, 20.0, 21.0];
/// let ids: [u32; 2] = [2, 0];
/// let mut y = [0.0; 4];
/// let mut rng = Rng::new(Seed(0));
/// let mut ctx = Ctx { gemm: &mut [], scratch: &mut [], rng: &mut rng, first_sample: 0, mode: Mode::Eval, lengths: fusegraph_runtime::layers::Lengths::FULL };
/// let io = Forward { params: &table, state: &mut [], x: &ids, y: &mut y, saved: &mut [], batch: 1 };
/// Tok::forward_ids(&mut ctx, io);
/// assert_eq!(y, [20.0, 21.0, 0.0, 1.0]);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Embedding<
    const VOCAB: usize,
    const DIM: usize,
    const SEQ: usize,
    const PAD: usize = NO_PADDING,
>;

impl<const VOCAB: usize, const DIM: usize, const SEQ: usize, const PAD: usize>
    Embedding<VOCAB, DIM, SEQ, PAD>
{
    /// The sizes, for [`embedding_forward`] and [`embedding_backward`]; checked when the
    /// layer is used.
    pub const DIMS: EmbeddingDims = {
        assert!(
            VOCAB > 0 && VOCAB - 1 <= u32::MAX as usize,
            "Embedding: VOCAB must be in 1..=4294967296 (2^32), the ids a u32 addresses"
        );
        assert!(
            PAD == NO_PADDING || PAD < VOCAB,
            "Embedding: the padding id PAD must be below VOCAB (or NO_PADDING)"
        );
        EmbeddingDims {
            vocab: VOCAB,
            dim: DIM,
            seq: SEQ,
            padding: if PAD == NO_PADDING { None } else { Some(PAD) },
        }
    };

    /// The layer (it holds no data: parameters live in the model's flat buffer).
    pub const fn new() -> Self {
        Embedding
    }
}

impl<const VOCAB: usize, const DIM: usize, const SEQ: usize, const PAD: usize> Layer
    for Embedding<VOCAB, DIM, SEQ, PAD>
{
    fn describe(out: &mut dyn core::fmt::Write) -> core::fmt::Result {
        write!(out, "Embedding<{VOCAB} x {DIM}, {SEQ} positions, padding: ")?;
        match Self::DIMS.padding {
            Some(pad) => write!(out, "{pad}>"),
            None => out.write_str("none>"),
        }
    }

    const IN: usize = Self::DIMS.seq;
    const OUT: usize = SEQ * DIM;
    const PARAMS: usize = Self::DIMS.params();
    const STATE: usize = 0;
    const SAVED: usize = 0;
    const TENSORS: &'static [Tensor] = &[Tensor {
        name: "weight",
        shape: &[VOCAB, DIM],
        fans: (VOCAB, DIM),
        init: Init::StandardNormal,
    }];
    const FREEZABLE: bool = true;

    fn forward(_ctx: &mut Ctx<'_>, io: Forward<'_>) {
        buffers::forward::<Self>(&io);
        gather(Self::DIMS, io);
    }

    fn backward(_ctx: &mut Ctx<'_>, io: Backward<'_>) {
        buffers::backward::<Self>(&io);
        scatter(Self::DIMS, io);
    }

    fn finish_init(params: &mut [f32]) {
        if let Some(p) = Self::DIMS.padding {
            params[p * DIM..(p + 1) * DIM].fill(0.0);
        }
    }
}

impl<const VOCAB: usize, const DIM: usize, const SEQ: usize, const PAD: usize> TokenLayer
    for Embedding<VOCAB, DIM, SEQ, PAD>
{
    const VOCAB: usize = VOCAB;

    fn forward_ids(_ctx: &mut Ctx<'_>, io: Forward<'_, u32>) {
        buffers::forward::<Self>(&io);
        embedding_forward(Self::DIMS, io);
    }

    fn backward_ids(_ctx: &mut Ctx<'_>, io: Backward<'_, u32>) {
        buffers::backward::<Self>(&io);
        embedding_backward(Self::DIMS, io);
    }
}

/// The sizes of a learned positional embedding, for [`positional_forward`] and
/// [`positional_backward`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PositionalDims {
    /// Rows of the table: the longest sequence it serves.
    pub max_len: usize,
    /// Values per position.
    pub dim: usize,
    /// Positions per sample (at most `max_len`).
    pub seq: usize,
}

/// `y = x + table[0..seq]` for every sample.
pub fn positional_forward(dims: PositionalDims, io: Forward<'_>) {
    let n = dims.seq * dims.dim;
    let rows = &io.params[..n];
    let samples = io.x.chunks_exact(n).zip(io.y.chunks_exact_mut(n));
    for (x, y) in samples.take(io.batch) {
        for ((y, &x), &p) in y.iter_mut().zip(x).zip(rows) {
            *y = x + p;
        }
    }
}

/// d loss / d table: the output gradient summed over the batch in sample order for the first
/// `seq` rows, 0 for the rows past the sequence (nothing when `io.frozen` freezes the table);
/// d loss / d x is the output gradient.
pub fn positional_backward(dims: PositionalDims, io: Backward<'_>) {
    let n = dims.seq * dims.dim;
    if let [Some(dtable)] = io.frozen.split(io.dparams, [dims.max_len * dims.dim]) {
        dtable.fill(0.0);
        for dy in io.dy.chunks_exact(n).take(io.batch) {
            for (g, &dy) in dtable[..n].iter_mut().zip(dy) {
                *g += dy;
            }
        }
    }
    if let Some((dx, add)) = io.dx.destination() {
        match add {
            true => dx.iter_mut().zip(&*io.dy).for_each(|(d, &g)| *d += g),
            false => dx.copy_from_slice(io.dy),
        }
    }
}

/// A learned positional embedding, `[SEQ, DIM]` in and out: position `s` adds row `s` of a
/// `[MAX_LEN, DIM]` table (PyTorch: `x + pos(torch.arange(SEQ))` with
/// `pos = nn.Embedding(MAX_LEN, DIM)`). The table may be longer than the sequence; its rows
/// past `SEQ` get a zero gradient. Parameter: `weight` `[MAX_LEN, DIM]`, from `N(0, 1)`.
///
/// `SEQ > MAX_LEN` does not compile.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PositionalEmbedding<const MAX_LEN: usize, const DIM: usize, const SEQ: usize>;

impl<const MAX_LEN: usize, const DIM: usize, const SEQ: usize>
    PositionalEmbedding<MAX_LEN, DIM, SEQ>
{
    /// The sizes, for [`positional_forward`] and [`positional_backward`]; checked when the
    /// layer is used.
    pub const DIMS: PositionalDims = {
        assert!(
            SEQ <= MAX_LEN,
            "PositionalEmbedding: the sequence (SEQ) is longer than the table (MAX_LEN)"
        );
        PositionalDims {
            max_len: MAX_LEN,
            dim: DIM,
            seq: SEQ,
        }
    };

    /// The layer (it holds no data: parameters live in the model's flat buffer).
    pub const fn new() -> Self {
        PositionalEmbedding
    }
}

impl<const MAX_LEN: usize, const DIM: usize, const SEQ: usize> Layer
    for PositionalEmbedding<MAX_LEN, DIM, SEQ>
{
    fn describe(out: &mut dyn core::fmt::Write) -> core::fmt::Result {
        write!(
            out,
            "PositionalEmbedding<{MAX_LEN} x {DIM}, {SEQ} positions>"
        )
    }

    const IN: usize = SEQ * DIM;
    const OUT: usize = Self::DIMS.seq * DIM;
    const PARAMS: usize = Self::DIMS.max_len * DIM;
    const STATE: usize = 0;
    const SAVED: usize = 0;
    const TENSORS: &'static [Tensor] = &[Tensor {
        name: "weight",
        shape: &[MAX_LEN, DIM],
        fans: (MAX_LEN, DIM),
        init: Init::StandardNormal,
    }];
    const FREEZABLE: bool = true;

    fn forward(_ctx: &mut Ctx<'_>, io: Forward<'_>) {
        buffers::forward::<Self>(&io);
        positional_forward(Self::DIMS, io);
    }

    fn backward(_ctx: &mut Ctx<'_>, io: Backward<'_>) {
        buffers::backward::<Self>(&io);
        positional_backward(Self::DIMS, io);
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::layers::gradcheck::{bits, Check};
    use crate::layers::{Grad, Mode};
    use crate::rng::{Rng, Seed};
    use std::vec;
    use std::vec::Vec;

    /// `table[round(x)]` per id, in `f64`: the ids do not move under a small perturbation, so
    /// their numeric gradient is 0, as the layer's.
    fn lookup(dim: usize) -> impl Fn(&[f64], &[f64], usize) -> Vec<f64> {
        move |table, ids, _| {
            ids.iter()
                .flat_map(|&v| {
                    let r = v.round() as usize;
                    table[r * dim..(r + 1) * dim].to_vec()
                })
                .collect()
        }
    }

    /// Ids that repeat (so rows gather several gradients) and leave some rows unused.
    fn ids(batch: usize, seq: usize, vocab: usize) -> Vec<f32> {
        (0..batch * seq)
            .map(|i| ((i * 7) % (vocab - 2)) as f32)
            .collect()
    }

    #[test]
    fn embedding_matches_finite_differences() {
        type E = Embedding<9, 3, 5>;
        let check = Check {
            x: Some(ids(3, 5, 9)),
            ..Check::new(3)
        };
        check.run::<E>(&lookup(3));
    }

    fn ctx(rng: &mut Rng) -> Ctx<'_> {
        Ctx {
            gemm: &mut [],
            scratch: &mut [],
            rng,
            first_sample: 0,
            mode: Mode::Train,
            lengths: crate::layers::Lengths::FULL,
        }
    }

    #[test]
    fn the_padding_row_is_read_but_gets_no_gradient() {
        type E = Embedding<6, 2, 4, 1>;
        let table: Vec<f32> = (0..12).map(|i| i as f32 + 0.5).collect();
        let ids: [u32; 4] = [1, 3, 1, 0];
        let (mut y, dy) = (vec![0.0; 8], vec![1.0; 8]);
        let mut rng = Rng::new(Seed(0));
        let io = Forward {
            params: &table,
            state: &mut [],
            x: &ids,
            y: &mut y,
            saved: &mut [],
            batch: 1,
        };
        E::forward_ids(&mut ctx(&mut rng), io);
        assert_eq!(y, [2.5, 3.5, 6.5, 7.5, 2.5, 3.5, 0.5, 1.5]);
        let mut dparams = vec![f32::NAN; 12];
        let io = Backward {
            params: &table,
            x: &ids,
            y: &y,
            saved: &[],
            dy: &mut dy.clone(),
            dx: Grad::Skip,
            frozen: crate::layers::Frozen::NONE,
            dparams: &mut dparams,
            batch: 1,
        };
        E::backward_ids(&mut ctx(&mut rng), io);
        let mut expected = vec![0.0; 12];
        expected[..2].fill(1.0);
        expected[6..8].fill(1.0);
        assert_eq!(dparams, expected);
        let mut params = vec![1.0; 12];
        E::finish_init(&mut params);
        assert_eq!(&params[..4], [1.0, 1.0, 0.0, 0.0]);
    }

    /// A frozen table over ids: no gradient (`dparams` empty), and the input gradient still
    /// zeros when overwritten, untouched when added to.
    #[test]
    fn a_frozen_table_over_ids_gives_the_input_gradient_only() {
        type E = Embedding<6, 2, 4>;
        let table: Vec<f32> = (0..12).map(|i| i as f32 + 0.5).collect();
        let ids: [u32; 4] = [1, 3, 5, 0];
        let y = [0.0; 8];
        let mut rng = Rng::new(Seed(0));
        let (mut set, mut added) = (vec![f32::NAN; 4], vec![2.0; 4]);
        for dx in [Grad::Set(&mut set), Grad::Add(&mut added)] {
            let io = Backward {
                params: &table,
                x: &ids,
                y: &y,
                saved: &[],
                dy: &mut [1.0; 8],
                dx,
                frozen: crate::layers::Frozen::all(1),
                dparams: &mut [],
                batch: 1,
            };
            E::backward_ids(&mut ctx(&mut rng), io);
        }
        assert_eq!((set, added), (vec![0.0; 4], vec![2.0; 4]));
    }

    /// The output and table gradient of layer `E` with table `table` on the inputs `x`,
    /// through `forward` and `backward`: its passes over `f32` values or over ids.
    fn pass<E: Layer, X>(
        table: &[f32],
        x: &[X],
        forward: fn(&mut Ctx<'_>, Forward<'_, X>),
        backward: fn(&mut Ctx<'_>, Backward<'_, X>),
    ) -> (Vec<f32>, Vec<f32>) {
        let batch = x.len() / E::IN;
        let (mut y, mut dparams) = (vec![0.0; batch * E::OUT], vec![0.0; E::PARAMS]);
        let mut dy: Vec<f32> = (0..y.len())
            .map(|i| ((i + 1) as f32 * 0.37).sin())
            .collect();
        let mut rng = Rng::new(Seed(0));
        let mut ctx = ctx(&mut rng);
        let (params, state, saved) = (table, &mut [][..], &mut [][..]);
        forward(
            &mut ctx,
            Forward {
                params,
                state,
                x,
                y: &mut y,
                saved,
                batch,
            },
        );
        let (saved, dx) = (&[][..], Grad::Skip);
        let io = Backward {
            params,
            x,
            y: &y,
            saved,
            dy: &mut dy,
            dx,
            frozen: crate::layers::Frozen::NONE,
            dparams: &mut dparams,
            batch,
        };
        backward(&mut ctx, io);
        (y, dparams)
    }

    /// [`pass`] of `E` over the ids `ids`.
    fn pass_ids<E: TokenLayer>(table: &[f32], ids: &[u32]) -> (Vec<f32>, Vec<f32>) {
        pass::<E, u32>(table, ids, E::forward_ids, E::backward_ids)
    }

    #[test]
    fn ids_and_whole_numbers_read_the_same_rows_and_give_the_same_gradient() {
        type E = Embedding<9, 3, 5, 2>;
        let table: Vec<f32> = (0..27).map(|i| (i as f32 * 0.61).cos()).collect();
        let ids: Vec<u32> = (0..15).map(|i| (i * 7) % 9).collect();
        let (y, dparams) = pass_ids::<E>(&table, &ids);
        let values: Vec<f32> = ids.iter().map(|&id| id as f32).collect();
        let (y_values, dparams_values) = pass::<E, f32>(&table, &values, E::forward, E::backward);
        assert_eq!(bits(&y), bits(&y_values));
        assert_eq!(bits(&dparams), bits(&dparams_values));
        assert_eq!(&y[3..6], &table[21..24], "sample 0, position 1 reads row 7");
    }

    #[test]
    fn ids_past_two_to_the_24_read_their_own_rows() {
        // 2^24 + 1 is not an `f32`: carried as one it would read row 2^24.
        const V: usize = (1 << 24) + 2;
        type E = Embedding<V, 1, 2>;
        let table: Vec<f32> = (0..V).map(|i| (i % 1000) as f32).collect();
        let ids = [(1u32 << 24) + 1, 1 << 24];
        let (y, dparams) = pass_ids::<E>(&table, &ids);
        assert_eq!(y, [table[(1 << 24) + 1], table[1 << 24]]);
        assert_eq!(y, [217.0, 216.0]);
        let touched: Vec<usize> = (0..V).filter(|&r| dparams[r] != 0.0).collect();
        assert_eq!(touched, [1 << 24, (1 << 24) + 1]);
    }

    fn forward_values(ids: &[f32]) {
        type E = Embedding<4, 2, 1>;
        let mut y = vec![0.0; 2 * ids.len()];
        let mut rng = Rng::new(Seed(0));
        let io = Forward {
            params: &[0.0; 8],
            state: &mut [],
            x: ids,
            y: &mut y,
            saved: &mut [],
            batch: ids.len(),
        };
        E::forward(&mut ctx(&mut rng), io);
    }

    #[test]
    #[should_panic(
        expected = "Embedding: sample 1, position 2: token id 4294967295 is outside the vocabulary of 4 ids (0..4)"
    )]
    fn an_id_past_the_vocabulary_is_refused_as_given_where_it_is() {
        type E = Embedding<4, 2, 3>;
        let ids = [0, 1, 2, 3, 0, u32::MAX];
        let mut rng = Rng::new(Seed(0));
        let io = Forward {
            params: &[0.0; 8],
            state: &mut [],
            x: &ids,
            y: &mut [0.0; 12],
            saved: &mut [],
            batch: 2,
        };
        E::forward_ids(&mut ctx(&mut rng), io);
    }

    #[test]
    #[should_panic(expected = "sample 1, position 0: token id 4 is outside the vocabulary of 4")]
    fn a_value_past_the_vocabulary_is_refused() {
        forward_values(&[3.0, 4.0]);
    }

    #[test]
    #[should_panic(expected = "sample 0, position 0: token id 1.5 is outside the vocabulary")]
    fn a_fractional_value_is_refused() {
        forward_values(&[1.5]);
    }

    #[test]
    #[should_panic(expected = "sample 0, position 0: token id -1 is outside the vocabulary")]
    fn a_negative_value_is_refused() {
        forward_values(&[-1.0]);
    }

    #[test]
    fn positional_embedding_matches_finite_differences() {
        type P = PositionalEmbedding<6, 3, 4>;
        let outcome = Check::new(3).run::<P>(&|table, x, batch| {
            let n = 4 * 3;
            (0..batch * n).map(|i| x[i] + table[i % n]).collect()
        });
        assert!(outcome.saved.is_empty());
    }

    #[test]
    fn positions_past_the_sequence_get_a_zero_gradient() {
        type P = PositionalEmbedding<5, 2, 3>;
        let mut dparams = vec![f32::NAN; 10];
        let dy: Vec<f32> = (0..12).map(|i| i as f32).collect();
        let mut rng = Rng::new(Seed(0));
        let mut ctx = Ctx {
            gemm: &mut [],
            scratch: &mut [],
            rng: &mut rng,
            first_sample: 0,
            mode: Mode::Train,
            lengths: crate::layers::Lengths::FULL,
        };
        let io = Backward {
            params: &[0.0; 10],
            x: &[0.0; 12],
            y: &[0.0; 12],
            saved: &[],
            dy: &mut dy.clone(),
            dx: Grad::Skip,
            frozen: crate::layers::Frozen::NONE,
            dparams: &mut dparams,
            batch: 2,
        };
        P::backward(&mut ctx, io);
        let sums: Vec<f32> = (0..6).map(|i| dy[i] + dy[i + 6]).collect();
        assert_eq!(bits(&dparams[..6]), bits(&sums));
        assert_eq!(&dparams[6..], [0.0; 4]);
    }
}
