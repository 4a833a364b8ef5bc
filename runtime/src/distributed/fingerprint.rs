//! [`Fingerprint`]: what the processes of a data-parallel job must agree on before its first
//! step (the data, the seed, the shards, the model, the optimizer, the kernels), compared
//! across the processes so that a job whose processes disagree stops with a message naming
//! what differs and where, instead of hanging or training a state that no process asked for.

use super::communicator::Communicator;
use crate::lane::Capability;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;

/// How a fingerprint shows a value in a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shown {
    /// A count or a setting, in decimal.
    Number,
    /// A hash, in 16 hex digits.
    Hash,
    /// The kernels' choice ([`Fingerprint::kernels`]), by name.
    Kernels,
}

/// One thing that every process must have the same of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// What it is, as a message names it ("the training data's samples").
    pub what: &'static str,
    /// Its value on this process.
    pub value: u64,
    /// How a message shows the value.
    pub shown: Shown,
}

impl Entry {
    /// A count or a setting.
    pub const fn number(what: &'static str, value: u64) -> Self {
        Entry {
            what,
            value,
            shown: Shown::Number,
        }
    }

    /// A hash of something too large to compare whole.
    pub const fn hash(what: &'static str, value: u64) -> Self {
        Entry {
            what,
            value,
            shown: Shown::Hash,
        }
    }

    /// Writes `value` as this entry shows its values.
    fn show(&self, value: u64, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.shown {
            Shown::Number => write!(f, "{value}"),
            Shown::Hash => write!(f, "{value:016x}"),
            Shown::Kernels => {
                let lanes = match value >> 8 {
                    0 => "portable lanes",
                    1 => "AVX2 and FMA",
                    2 => "AVX-512F",
                    _ => "unknown lanes",
                };
                write!(f, "{lanes} with {}-bit accumulators", value & 0xff)
            }
        }
    }
}

/// The entries a job's processes compare, in order: the first that differs is the one a
/// [`Mismatch`] names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fingerprint {
    entries: Vec<Entry>,
}

impl Fingerprint {
    /// No entries yet.
    pub fn new() -> Self {
        Fingerprint::default()
    }

    /// Adds an entry.
    pub fn with(mut self, entry: Entry) -> Self {
        self.entries.push(entry);
        self
    }

    /// The kernels this process runs: the lanes of [`Capability::active`] (the GEMM's
    /// instructions, among them whether a multiply-add rounds once) and the accumulators'
    /// width ([`Wide`](crate::accumulate::Wide)). Processes on different kernels would compute
    /// other bits.
    pub fn kernels() -> Entry {
        let lanes = match Capability::active() {
            Capability::Portable => 0,
            Capability::Avx2Fma => 1,
            Capability::Avx512 => 2,
        };
        let bits = 8 * core::mem::size_of::<crate::accumulate::Wide>() as u64;
        Entry {
            what: "the kernels (set every process's FUSEGRAPH_CPU_CAPABILITY to the same)",
            value: lanes << 8 | bits,
            shown: Shown::Kernels,
        }
    }

    /// The entries.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Compares this process's entries with every other's (one gather of their values): the
    /// first entry, in order, on which a process differs from rank 0, and the first such
    /// process. Every process gets the same answer, so that all of them stop, or none.
    pub fn compare<C: Communicator + ?Sized>(&self, comm: &C) -> Result<(), Mismatch> {
        let n = self.entries.len();
        let mine: Vec<u64> = self.entries.iter().map(|e| e.value).collect();
        let mut all = vec![0; n * comm.size()];
        comm.all_gather_u64(&mine, &mut all);
        let first = &all[..n];
        for (i, entry) in self.entries.iter().enumerate() {
            let other = all.chunks_exact(n).enumerate().skip(1);
            if let Some((rank, values)) = other.into_iter().find(|(_, v)| v[i] != first[i]) {
                return Err(Mismatch {
                    entry: *entry,
                    rank,
                    value: values[i],
                    first: first[i],
                });
            }
        }
        Ok(())
    }
}

/// Processes of one job that do not agree on an entry of their [`Fingerprint`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mismatch {
    /// The entry, with this process's value.
    pub entry: Entry,
    /// The first rank whose value differs from rank 0's.
    pub rank: usize,
    /// That rank's value.
    pub value: u64,
    /// Rank 0's value.
    pub first: u64,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the processes differ in {}: rank {} has ",
            self.entry.what, self.rank
        )?;
        self.entry.show(self.value, f)?;
        f.write_str(", rank 0 has ")?;
        self.entry.show(self.first, f)?;
        f.write_str(
            "; every process must run the same program on the same data with the same options",
        )
    }
}

#[cfg(feature = "std")]
impl std::error::Error for Mismatch {}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::distributed::Solo;
    use std::string::ToString;

    /// Two processes in one: rank 0 holds `first`, the communicator's rank 1 `second`.
    struct Pair(Vec<u64>);

    impl Communicator for Pair {
        fn rank(&self) -> usize {
            1
        }
        fn size(&self) -> usize {
            2
        }
        fn all_gather(&self, _: &[f32], _: &mut [f32]) {
            unreachable!()
        }
        fn all_gather_u64(&self, mine: &[u64], all: &mut [u64]) {
            all[..mine.len()].copy_from_slice(&self.0);
            all[mine.len()..].copy_from_slice(mine);
        }
        fn all_to_all(&self, _: &[f32], _: &mut [f32]) {
            unreachable!()
        }
        fn broadcast(&self, _: &mut [f32]) {}
        fn broadcast_u64(&self, _: &mut [u64]) {}
        fn abort(&self, _: i32) -> ! {
            unreachable!()
        }
    }

    fn print(samples: u64, data: u64, seed: u64) -> Fingerprint {
        Fingerprint::new()
            .with(Entry::number("the training data's samples", samples))
            .with(Entry::hash("the training data", data))
            .with(Entry::number("the fit's seed", seed))
            .with(Fingerprint::kernels())
    }

    #[test]
    fn the_first_entry_that_differs_is_named_with_both_values() {
        let rank0 = print(1797, 0xabc, 1);
        let same = Pair(rank0.entries().iter().map(|e| e.value).collect());
        assert_eq!(rank0.compare(&same), Ok(()));
        assert_eq!(rank0.compare(&Solo), Ok(()));

        let e = print(1697, 0xdef, 2).compare(&same).unwrap_err();
        assert_eq!((e.rank, e.value, e.first), (1, 1697, 1797));
        assert_eq!(
            e.to_string(),
            "the processes differ in the training data's samples: rank 1 has 1697, rank 0 has \
             1797; every process must run the same program on the same data with the same \
             options"
        );
        let e = print(1797, 0xdef, 1).compare(&same).unwrap_err();
        assert!(
            e.to_string().contains(
                "the training data: rank 1 has 0000000000000def, rank 0 has 0000000000000abc"
            ),
            "{e}"
        );
        let e = print(1797, 0xabc, 2).compare(&same).unwrap_err();
        assert_eq!(e.entry.what, "the fit's seed");
    }

    #[test]
    fn kernels_are_named() {
        let k = Fingerprint::kernels();
        let e = Mismatch {
            entry: k,
            rank: 3,
            value: 2 << 8 | 64,
            first: 64,
        };
        assert!(
            e.to_string().contains(
                "rank 3 has AVX-512F with 64-bit accumulators, rank 0 has portable lanes with \
                 64-bit accumulators"
            ),
            "{e}"
        );
    }
}
