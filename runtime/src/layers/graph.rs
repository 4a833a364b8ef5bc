//! Element-wise operations between nodes of a graph model, forward and backward side by side.
//! Each works on `batch` rows; gradients go to a [`Grad`] (set or accumulated).

use crate::lane::add_assign;
use crate::layers::Grad;

/// `y = a + b` (a residual connection).
pub fn add(a: &[f32], b: &[f32], y: &mut [f32]) {
    for ((y, &a), &b) in y.iter_mut().zip(a).zip(b) {
        *y = a + b;
    }
}

/// `y = a * b`, element-wise.
pub fn mul(a: &[f32], b: &[f32], y: &mut [f32]) {
    for ((y, &a), &b) in y.iter_mut().zip(a).zip(b) {
        *y = a * b;
    }
}

/// One input's gradient of [`mul`]: `dy * other`, where `other` is the other factor.
pub fn product_grad(dst: Grad<'_>, dy: &[f32], other: &[f32]) {
    match dst {
        Grad::Skip => {}
        Grad::Set(d) => {
            for ((d, &g), &o) in d.iter_mut().zip(dy).zip(other) {
                *d = g * o;
            }
        }
        Grad::Add(d) => {
            for ((d, &g), &o) in d.iter_mut().zip(dy).zip(other) {
                *d += g * o;
            }
        }
    }
}

/// Per sample, `y = [a, b]`: rows of `wa` and `wb` values side by side.
pub fn concat(a: &[f32], wa: usize, b: &[f32], wb: usize, y: &mut [f32]) {
    for ((y, a), b) in y
        .chunks_exact_mut(wa + wb)
        .zip(a.chunks_exact(wa.max(1)))
        .zip(b.chunks_exact(wb.max(1)))
    {
        y[..wa].copy_from_slice(&a[..wa]);
        y[wa..].copy_from_slice(&b[..wb]);
    }
}

/// One input's gradient of [`concat()`]: its columns of `dy` (`part` 0 for the first input,
/// 1 for the second).
pub fn concat_grad(dy: &[f32], wa: usize, wb: usize, part: usize, dst: Grad<'_>) {
    let (lo, w) = if part == 0 { (0, wa) } else { (wa, wb) };
    let rows = dy.chunks_exact(wa + wb);
    match dst {
        Grad::Skip => {}
        Grad::Set(d) => {
            for (d, r) in d.chunks_exact_mut(w.max(1)).zip(rows) {
                d[..w].copy_from_slice(&r[lo..lo + w]);
            }
        }
        Grad::Add(d) => {
            for (d, r) in d.chunks_exact_mut(w.max(1)).zip(rows) {
                add_assign(&mut d[..w], &r[lo..lo + w]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concat_and_its_gradient_are_inverse() {
        let a = [1.0, 2.0, 3.0, 4.0];
        let b = [5.0, 6.0];
        let mut y = [0.0; 6];
        concat(&a, 2, &b, 1, &mut y);
        assert_eq!(y, [1.0, 2.0, 5.0, 3.0, 4.0, 6.0]);
        let (mut da, mut db) = ([0.0; 4], [1.0; 2]);
        concat_grad(&y, 2, 1, 0, Grad::Set(&mut da));
        concat_grad(&y, 2, 1, 1, Grad::Add(&mut db));
        assert_eq!(da, a);
        assert_eq!(db, [6.0, 7.0]);
    }

    #[test]
    fn products_route_the_other_factor() {
        let (a, b, dy) = ([2.0, 3.0], [5.0, 7.0], [1.0, 10.0]);
        let mut y = [0.0; 2];
        mul(&a, &b, &mut y);
        assert_eq!(y, [10.0, 21.0]);
        let (mut da, mut db) = ([0.0; 2], [0.0; 2]);
        product_grad(Grad::Set(&mut da), &dy, &b);
        product_grad(Grad::Set(&mut db), &dy, &a);
        assert_eq!((da, db), ([5.0, 70.0], [2.0, 30.0]));
        let mut s = [1.0; 2];
        add(&a, &b, &mut s);
        let mut d = [1.0; 2];
        Grad::Add(&mut d).give(&dy);
        assert_eq!((s, d), ([7.0, 10.0], [2.0, 11.0]));
    }
}
