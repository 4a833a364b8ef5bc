//! Loading and storing [`f32x8`] lanes for the layers' element-wise passes.
//!
//! A pass walks a slice eight values at a time; the last, shorter piece is padded into a full
//! lane and runs the same lane code, so a value's result never depends on where it sits.

use crate::LANES;
use wide::f32x8;

/// The first `min(s.len(), 8)` values of `s`, the other lanes set to `pad`.
#[inline(always)]
pub(crate) fn load(s: &[f32], pad: f32) -> f32x8 {
    if s.len() >= LANES {
        let a: [f32; LANES] = s[..LANES].try_into().expect("eight floats");
        f32x8::from(a)
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
pub(crate) fn store(s: &mut [f32], v: f32x8) {
    if s.len() >= LANES {
        s[..LANES].copy_from_slice(v.as_array());
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

/// `acc[j] += row[j]` for every `row` of `rows` (each `acc.len()` values long), row after
/// row: the column sums of a row-major matrix, in a fixed order.
pub(crate) fn add_rows(acc: &mut [f32], rows: &[f32]) {
    let n = acc.len();
    if n == 0 {
        return;
    }
    for row in rows.chunks_exact(n) {
        for (i, k) in pieces(n) {
            let s = load(&acc[i..i + k], 0.0) + load(&row[i..i + k], 0.0);
            store(&mut acc[i..i + k], s);
        }
    }
}

/// `y[i] += x[i]`.
pub(crate) fn add_assign(y: &mut [f32], x: &[f32]) {
    assert_eq!(y.len(), x.len(), "add_assign: lengths differ");
    for (i, k) in pieces(y.len()) {
        let s = load(&y[i..i + k], 0.0) + load(&x[i..i + k], 0.0);
        store(&mut y[i..i + k], s);
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
        let v = load(&[1.0, 2.0], 9.0).to_array();
        assert_eq!(v, [1.0, 2.0, 9.0, 9.0, 9.0, 9.0, 9.0, 9.0]);
        let mut y = [0.0; 3];
        add_assign(&mut y, &[1.0, 2.0, 3.0]);
        assert_eq!(y, [1.0, 2.0, 3.0]);
        assert!(pieces(17).eq([(0, 8), (8, 8), (16, 1)]));
        assert_eq!(pieces(0).count(), 0);
    }
}
