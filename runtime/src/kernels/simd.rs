//! Moving `f32` slices in and out of [`f32x8`] lanes, and the element-wise slice sums built on
//! them: the floor under the layers' passes, the GEMM's packing and write-back, and the
//! optimizers' update.
//!
//! A pass walks a slice eight values at a time; the last, shorter piece is padded into a full
//! lane ([`load_padded`]) and only its valid lanes are written back ([`store_partial`]), so it
//! runs the same lane code and a value's result never depends on where it sits. (The lane
//! *math* that generated code calls, `sigmoid`, `erf` and the like, is in
//! [`lane`](crate::lane), whose dispatched lanes also run the column sums, [`add_rows`].)

use crate::lane::{self, Lane, OnLanes};
use crate::LANES;
use wide::f32x8;

/// The first eight values of `s`.
///
/// # Panics
/// If `s` holds fewer than eight values.
#[inline(always)]
pub(crate) fn load(s: &[f32]) -> f32x8 {
    let a: [f32; LANES] = s[..LANES].try_into().expect("eight floats");
    f32x8::from(a)
}

/// Stores `v` into the first eight values of `s`.
///
/// # Panics
/// If `s` holds fewer than eight values.
#[inline(always)]
pub(crate) fn store(s: &mut [f32], v: f32x8) {
    s[..LANES].copy_from_slice(v.as_array());
}

/// The first `min(s.len(), 8)` values of `s`, the other lanes set to `pad`.
#[inline(always)]
pub(crate) fn load_padded(s: &[f32], pad: f32) -> f32x8 {
    if s.len() >= LANES {
        load(s)
    } else {
        // A guarded loop of constant length, not `copy_from_slice`: a copy of unknown length
        // becomes a call to `memmove`, which costs more than the lane itself.
        let mut a = [pad; LANES];
        for (j, d) in a.iter_mut().enumerate() {
            if j < s.len() {
                *d = s[j];
            }
        }
        f32x8::from(a)
    }
}

/// Stores the first `min(s.len(), 8)` lanes of `v` into `s`.
#[inline(always)]
pub(crate) fn store_partial(s: &mut [f32], v: f32x8) {
    if s.len() >= LANES {
        store(s, v);
    } else {
        let v = v.as_array();
        for j in 0..LANES {
            if j < s.len() {
                s[j] = v[j];
            }
        }
    }
}

/// Start and length of each lane-sized piece of `0..len`, in order.
#[inline(always)]
pub(crate) fn pieces(len: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..len)
        .step_by(LANES)
        .map(move |i| (i, (len - i).min(LANES)))
}

/// `dst[i] += src[i]`, a lane at a time (the same bits as one value at a time: the sum is
/// element-wise).
///
/// # Panics
/// If the lengths differ.
pub(crate) fn add_assign(dst: &mut [f32], src: &[f32]) {
    assert_eq!(dst.len(), src.len(), "add_assign: lengths differ");
    let mut d = dst.chunks_exact_mut(LANES);
    let mut s = src.chunks_exact(LANES);
    for (d, s) in (&mut d).zip(&mut s) {
        store(d, load(d) + load(s));
    }
    let (d, s) = (d.into_remainder(), s.remainder());
    if !d.is_empty() {
        store_partial(d, load_padded(d, 0.0) + load_padded(s, 0.0));
    }
}

/// `dst.copy_from_slice(src)` a lane at a time, without a call to `memmove`: for the short
/// copies of unknown length that a pass makes many of (a row of a receptive field is a few
/// pixels), where the call costs more than the copy.
///
/// # Panics
/// If the lengths differ.
#[inline(always)]
pub(crate) fn copy(dst: &mut [f32], src: &[f32]) {
    assert_eq!(dst.len(), src.len(), "copy: lengths differ");
    let mut d = dst.chunks_exact_mut(LANES);
    let mut s = src.chunks_exact(LANES);
    for (d, s) in (&mut d).zip(&mut s) {
        store(d, load(s));
    }
    let (d, s) = (d.into_remainder(), s.remainder());
    if !d.is_empty() {
        store_partial(d, load_padded(s, 0.0));
    }
}

/// `acc[j] += row[j]` for every `row` of `rows` (each `acc.len()` values long), row after
/// row: the column sums of a row-major matrix, in a fixed order. Runs on the lanes
/// [`lane::dispatch`] picks, a block of columns in registers while every row is added to it
/// (the same additions in the same order, so the same bits on every lane type).
pub(crate) fn add_rows(acc: &mut [f32], rows: &[f32]) {
    if !acc.is_empty() {
        lane::dispatch(ColumnSums { acc, rows });
    }
}

/// Vectors of columns that [`ColumnSums`] keeps in registers.
const COLUMN_VECTORS: usize = 4;

/// [`add_rows`], on any lane type.
struct ColumnSums<'a> {
    acc: &'a mut [f32],
    rows: &'a [f32],
}

impl OnLanes for ColumnSums<'_> {
    type Output = ();
    #[inline(always)]
    fn run<L: Lane>(self) {
        let width = self.acc.len();
        let block = COLUMN_VECTORS * L::LANES;
        for (b, acc) in self.acc.chunks_mut(block).enumerate() {
            let vectors: [(usize, usize); COLUMN_VECTORS] = core::array::from_fn(|v| {
                let start = (v * L::LANES).min(acc.len());
                (start, (start + L::LANES).min(acc.len()))
            });
            let mut sums = vectors.map(|(lo, hi)| L::load_padded(&acc[lo..hi]));
            for row in self.rows.chunks_exact(width) {
                let row = &row[b * block..b * block + acc.len()];
                for (sum, &(lo, hi)) in sums.iter_mut().zip(&vectors) {
                    *sum += L::load_padded(&row[lo..hi]);
                }
            }
            for (sum, &(lo, hi)) in sums.iter().zip(&vectors) {
                sum.store_partial(&mut acc[lo..hi]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_sums_and_padding() {
        let rows: [f32; 22] = core::array::from_fn(|i| i as f32);
        let mut acc = [1.0; 11];
        add_rows(&mut acc, &rows);
        for (j, a) in acc.iter().enumerate() {
            assert_eq!(*a, 1.0 + j as f32 + (11 + j) as f32);
        }
        let v = load_padded(&[1.0, 2.0], 9.0).to_array();
        assert_eq!(v, [1.0, 2.0, 9.0, 9.0, 9.0, 9.0, 9.0, 9.0]);
        let mut y = [0.0; 3];
        add_assign(&mut y, &[1.0, 2.0, 3.0]);
        assert_eq!(y, [1.0, 2.0, 3.0]);
        let mut z = [0.0; 19];
        copy(&mut z[1..], &rows[3..21]);
        assert_eq!(z[0], 0.0);
        assert!(z[1..].iter().zip(3..).all(|(v, i)| *v == i as f32));
        assert!(pieces(17).eq([(0, 8), (8, 8), (16, 1)]));
        assert_eq!(pieces(0).count(), 0);
    }

    #[test]
    fn column_sums_add_the_rows_in_order_on_every_lane_type() {
        extern crate std;
        use crate::lane::{run_on, Lanes};
        let value = |i: usize| ((i * 37 % 101) as f32 - 50.0) * 0.173 + (i % 7) as f32 * 1e-5;
        for width in [1, 7, 16, 17, 63, 64, 65, 130, 192] {
            let rows: std::vec::Vec<f32> = (0..5 * width).map(value).collect();
            let start: std::vec::Vec<f32> = (0..width).map(|j| value(j + 999)).collect();
            let mut want = start.clone();
            for row in rows.chunks_exact(width) {
                for (a, &r) in want.iter_mut().zip(row) {
                    *a += r;
                }
            }
            for lanes in Lanes::ALL.into_iter().filter(|l| l.available()) {
                let mut acc = start.clone();
                run_on(
                    lanes,
                    ColumnSums {
                        acc: &mut acc,
                        rows: &rows,
                    },
                );
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<std::vec::Vec<_>>();
                assert_eq!(bits(&acc), bits(&want), "{lanes:?}, width {width}");
            }
        }
    }

    #[test]
    fn partial_store_writes_only_its_lanes() {
        let mut s = [0.0; 10];
        store_partial(&mut s[..3], f32x8::splat(2.0));
        assert_eq!(s[..4], [2.0, 2.0, 2.0, 0.0]);
        store(&mut s[2..], f32x8::ONE);
        assert_eq!(s, [2.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]);
        assert_eq!(
            load(&s[1..]).to_array(),
            [2.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
        );
    }
}
