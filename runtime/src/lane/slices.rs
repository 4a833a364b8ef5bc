//! Element-wise slice operations that many passes share: sums and copies of whole slices, on
//! the lanes [`dispatch_for`](super::dispatch_for) picks. Each adds in a fixed order, element by element, so it gives
//! the same bits on every lane type.

use super::{dispatch_for, pieces, Lane, OnLanes, Portable};

/// `dst[i] += src[i]`, on the lanes [`dispatch_for`] picks.
///
/// # Panics
/// If the lengths differ.
pub(crate) fn add_assign(dst: &mut [f32], src: &[f32]) {
    assert_eq!(dst.len(), src.len(), "add_assign: lengths differ");
    if !dst.is_empty() {
        dispatch_for(dst.len(), AddToRows { y: dst, row: src });
    }
}

/// `y[r * row.len() + j] += row[j]` for every row `r` of `y` (a bias added to every sample, a
/// gradient to every position), on the lanes [`dispatch_for`] picks.
///
/// # Panics
/// If `y` is not whole rows of `row.len()` values.
pub(crate) fn add_to_each_row(y: &mut [f32], row: &[f32]) {
    assert!(
        row.is_empty() && y.is_empty() || !row.is_empty() && y.len().is_multiple_of(row.len()),
        "add_to_each_row: {} values are not rows of {}",
        y.len(),
        row.len()
    );
    if !y.is_empty() {
        dispatch_for(y.len(), AddToRows { y, row });
    }
}

/// [`add_to_each_row`], on any lane type.
struct AddToRows<'a> {
    y: &'a mut [f32],
    row: &'a [f32],
}

impl OnLanes for AddToRows<'_> {
    type Output = ();
    #[inline(always)]
    fn run<L: Lane>(self) {
        for y in self.y.chunks_exact_mut(self.row.len()) {
            for (i, n) in pieces::<L>(y.len()) {
                let v = L::load_padded(&y[i..i + n]) + L::load_padded(&self.row[i..i + n]);
                v.store_partial(&mut y[i..i + n]);
            }
        }
    }
}

/// `dst.copy_from_slice(src)` a lane at a time, without a call to `memmove`: for the short
/// copies of unknown length that a pass makes many of (a row of a receptive field is a few
/// pixels), where the call costs more than the copy. A copy has the same bits on every lane
/// type, so it runs on the portable lanes, without a dispatch per call.
///
/// # Panics
/// If the lengths differ.
#[inline(always)]
pub(crate) fn copy(dst: &mut [f32], src: &[f32]) {
    assert_eq!(dst.len(), src.len(), "copy: lengths differ");
    let mut d = dst.chunks_exact_mut(Portable::LANES);
    let mut s = src.chunks_exact(Portable::LANES);
    for (d, s) in (&mut d).zip(&mut s) {
        Portable::load(s).store(d);
    }
    let (d, s) = (d.into_remainder(), s.remainder());
    if !d.is_empty() {
        Portable::load_padded(s).store_partial(d);
    }
}

/// `acc[j] += row[j]` for every `row` of `rows` (each `acc.len()` values long), row after
/// row: the column sums of a row-major matrix, in a fixed order. Runs on the lanes
/// [`dispatch_for`] picks, a block of columns in registers while every row is added to it (the
/// same additions in the same order, so the same bits on every lane type).
pub(crate) fn add_rows(acc: &mut [f32], rows: &[f32]) {
    if !acc.is_empty() {
        dispatch_for(rows.len(), ColumnSums { acc, rows });
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
            let rows = self.rows.chunks_exact(width);
            if acc.len() == block {
                // Whole vectors: loaded as they are, with one bounds check a row.
                for row in rows {
                    let row = &row[b * block..][..block];
                    for (v, sum) in sums.iter_mut().enumerate() {
                        *sum += L::load(&row[v * L::LANES..]);
                    }
                }
            } else {
                for row in rows {
                    let row = &row[b * block..b * block + acc.len()];
                    for (sum, &(lo, hi)) in sums.iter_mut().zip(&vectors) {
                        *sum += L::load_padded(&row[lo..hi]);
                    }
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
    use crate::lane::Tested;
    extern crate std;
    use std::vec::Vec;

    /// The bits of each value.
    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    #[test]
    fn column_sums_add_the_rows_in_order_on_every_lane_type() {
        let value = |i: usize| ((i * 37 % 101) as f32 - 50.0) * 0.173 + (i % 7) as f32 * 1e-5;
        for width in [1, 7, 16, 17, 63, 64, 65, 130, 192] {
            let rows: Vec<f32> = (0..5 * width).map(value).collect();
            let start: Vec<f32> = (0..width).map(|j| value(j + 999)).collect();
            let mut want = start.clone();
            for row in rows.chunks_exact(width) {
                for (a, &r) in want.iter_mut().zip(row) {
                    *a += r;
                }
            }
            for lanes in Tested::every() {
                let mut acc = start.clone();
                lanes.run(ColumnSums {
                    acc: &mut acc,
                    rows: &rows,
                });
                assert_eq!(bits(&acc), bits(&want), "{lanes:?}, width {width}");
            }
        }
    }

    #[test]
    fn rows_take_the_row_on_every_lane_type_and_copies_touch_only_their_slice() {
        let value =
            |i: usize| ((i * 53 % 89) as f32 - 44.0) * 0.31 - if i == 5 { 0.0 } else { 1e-7 };
        for width in [1, 7, 8, 16, 17, 33] {
            let y: Vec<f32> = (0..3 * width).map(value).collect();
            let row: Vec<f32> = (0..width).map(|j| value(j + 7)).collect();
            let want: Vec<f32> = y
                .iter()
                .enumerate()
                .map(|(i, v)| v + row[i % width])
                .collect();
            for lanes in Tested::every() {
                let mut got = y.clone();
                lanes.run(AddToRows {
                    y: &mut got,
                    row: &row,
                });
                assert_eq!(bits(&got), bits(&want), "{lanes:?}, width {width}");
            }
            let mut sum = y[..width].to_vec();
            add_assign(&mut sum, &row);
            assert_eq!(bits(&sum), bits(&want[..width]));
            let mut dst = std::vec![-1.0; width + 2];
            copy(&mut dst[1..=width], &row);
            assert_eq!(bits(&dst[1..=width]), bits(&row));
            assert_eq!((dst[0], dst[width + 1]), (-1.0, -1.0));
        }
    }
}
