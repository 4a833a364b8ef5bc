//! The operands of [`gemm`](super::gemm): strided views of `f32` matrices, read-only
//! ([`MatRef`]) and mutable ([`MatMut`]), with the sub-views and splits the product takes.

/// Span of a `rows`x`cols` view in its slice: one more than the offset of its last element.
fn span(rows: usize, cols: usize, row_stride: usize, col_stride: usize) -> usize {
    if rows == 0 || cols == 0 {
        return 0;
    }
    (rows - 1)
        .checked_mul(row_stride)
        .and_then(|r| {
            (cols - 1)
                .checked_mul(col_stride)
                .and_then(|c| r.checked_add(c))
        })
        .and_then(|s| s.checked_add(1))
        .unwrap_or(usize::MAX)
}

/// A read-only strided view of an `f32` matrix: element `(i, j)` is
/// `data[i * row_stride + j * col_stride]`.
#[derive(Clone, Copy, Debug)]
pub struct MatRef<'a> {
    pub(super) data: &'a [f32],
    pub(super) rows: usize,
    pub(super) cols: usize,
    pub(super) rs: usize,
    pub(super) cs: usize,
}

impl<'a> MatRef<'a> {
    /// A `rows`x`cols` view of `data` with the given strides.
    ///
    /// # Panics
    /// If the view reaches past the end of `data` (a bug in the caller).
    #[inline]
    pub fn new(
        data: &'a [f32],
        rows: usize,
        cols: usize,
        row_stride: usize,
        col_stride: usize,
    ) -> Self {
        assert!(
            span(rows, cols, row_stride, col_stride) <= data.len(),
            "MatRef: a {rows}x{cols} view with strides ({row_stride}, {col_stride}) does not fit \
             in a slice of {} elements",
            data.len()
        );
        MatRef {
            data,
            rows,
            cols,
            rs: row_stride,
            cs: col_stride,
        }
    }

    /// A row-major `rows`x`cols` view (row stride `cols`, column stride 1).
    #[inline]
    pub fn row_major(data: &'a [f32], rows: usize, cols: usize) -> Self {
        Self::new(data, rows, cols, cols, 1)
    }

    /// A column-major `rows`x`cols` view (row stride 1, column stride `rows`).
    #[inline]
    pub fn col_major(data: &'a [f32], rows: usize, cols: usize) -> Self {
        Self::new(data, rows, cols, 1, rows)
    }

    /// Element `(i, j)`.
    ///
    /// # Panics
    /// If `(i, j)` is outside the view.
    #[inline]
    pub fn at(&self, i: usize, j: usize) -> f32 {
        assert!(i < self.rows && j < self.cols, "MatRef::at out of bounds");
        self.data[i * self.rs + j * self.cs]
    }

    /// The `rows`x`cols` sub-matrix starting at `(r0, c0)`, which must lie inside `self`.
    #[inline]
    pub(super) fn sub(self, r0: usize, c0: usize, rows: usize, cols: usize) -> MatRef<'a> {
        debug_assert!(r0 + rows <= self.rows && c0 + cols <= self.cols);
        let data = if rows == 0 || cols == 0 {
            &self.data[..0]
        } else {
            &self.data[r0 * self.rs + c0 * self.cs..]
        };
        MatRef {
            data,
            rows,
            cols,
            rs: self.rs,
            cs: self.cs,
        }
    }
}

/// What one product `C = alpha * A·B + beta * C` computes from, besides `C`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Terms<'a> {
    /// The factor of the product.
    pub(super) alpha: f32,
    /// The left factor, `m`x`k`.
    pub(super) a: MatRef<'a>,
    /// The right factor, `k`x`n`.
    pub(super) b: MatRef<'a>,
    /// The factor of the old `C`.
    pub(super) beta: f32,
}

/// A mutable strided view of an `f32` matrix whose elements are distinct: element `(i, j)` is
/// `data[i * row_stride + j * col_stride]`.
#[derive(Debug)]
pub struct MatMut<'a> {
    pub(super) data: &'a mut [f32],
    pub(super) rows: usize,
    pub(super) cols: usize,
    pub(super) rs: usize,
    pub(super) cs: usize,
}

impl<'a> MatMut<'a> {
    /// A `rows`x`cols` view of `data` with the given strides.
    ///
    /// # Panics
    /// If the view reaches past the end of `data`, or if two elements could share a place in
    /// the slice: with more than one row and column, the larger stride must exceed the span of
    /// the other dimension (`row_stride >= (cols - 1) * col_stride + 1` for a row-major-like
    /// view), and a dimension longer than one needs a non-zero stride. Both are bugs in the
    /// caller.
    #[inline]
    pub fn new(
        data: &'a mut [f32],
        rows: usize,
        cols: usize,
        row_stride: usize,
        col_stride: usize,
    ) -> Self {
        assert!(
            span(rows, cols, row_stride, col_stride) <= data.len(),
            "MatMut: a {rows}x{cols} view with strides ({row_stride}, {col_stride}) does not fit \
             in a slice of {} elements",
            data.len()
        );
        let empty = rows == 0 || cols == 0;
        assert!(
            empty || ((rows == 1 || row_stride > 0) && (cols == 1 || col_stride > 0)),
            "MatMut: a zero stride would make elements share a place"
        );
        if rows > 1 && cols > 1 {
            let (inner, outer) = if row_stride >= col_stride {
                (span(1, cols, 0, col_stride), row_stride)
            } else {
                (span(rows, 1, row_stride, 0), col_stride)
            };
            assert!(
                outer >= inner,
                "MatMut: strides ({row_stride}, {col_stride}) make rows and columns overlap"
            );
        }
        MatMut {
            data,
            rows,
            cols,
            rs: row_stride,
            cs: col_stride,
        }
    }

    /// A row-major `rows`x`cols` view (row stride `cols`, column stride 1).
    #[inline]
    pub fn row_major(data: &'a mut [f32], rows: usize, cols: usize) -> Self {
        Self::new(data, rows, cols, cols, 1)
    }

    /// A column-major `rows`x`cols` view (row stride 1, column stride `rows`).
    #[inline]
    pub fn col_major(data: &'a mut [f32], rows: usize, cols: usize) -> Self {
        Self::new(data, rows, cols, 1, rows)
    }

    /// A shorter-lived view of the same elements.
    #[inline]
    pub fn rb(&mut self) -> MatMut<'_> {
        MatMut {
            data: self.data,
            rows: self.rows,
            cols: self.cols,
            rs: self.rs,
            cs: self.cs,
        }
    }

    /// The `rows`x`cols` sub-matrix starting at `(r0, c0)`, which must lie inside `self`.
    #[inline]
    pub(super) fn sub(&mut self, r0: usize, c0: usize, rows: usize, cols: usize) -> MatMut<'_> {
        debug_assert!(r0 + rows <= self.rows && c0 + cols <= self.cols);
        let data = if rows == 0 || cols == 0 {
            &mut self.data[..0]
        } else {
            &mut self.data[r0 * self.rs + c0 * self.cs..]
        };
        MatMut {
            data,
            rows,
            cols,
            rs: self.rs,
            cs: self.cs,
        }
    }

    /// Whether rows are the outer dimension: then the first `r` rows lie in `data[..r * rs]`
    /// (otherwise the first `c` columns lie in `data[..c * cs]`).
    pub(super) fn rows_outer(&self) -> bool {
        self.cols <= 1 || (self.rows > 1 && self.rs >= self.cs)
    }

    /// Splits into the rows `..mid` and `mid..` (rows must be the outer dimension).
    pub(super) fn split_rows(self, mid: usize) -> (MatMut<'a>, MatMut<'a>) {
        debug_assert!(self.rows_outer() && 0 < mid && mid < self.rows);
        let (top, bottom) = self.data.split_at_mut(mid * self.rs);
        let (rows, cols, rs, cs) = (self.rows, self.cols, self.rs, self.cs);
        (
            MatMut {
                data: top,
                rows: mid,
                cols,
                rs,
                cs,
            },
            MatMut {
                data: bottom,
                rows: rows - mid,
                cols,
                rs,
                cs,
            },
        )
    }

    /// Splits into the columns `..mid` and `mid..` (columns must be the outer dimension).
    pub(super) fn split_cols(self, mid: usize) -> (MatMut<'a>, MatMut<'a>) {
        let (l, r) = self.t().split_rows(mid);
        (l.t(), r.t())
    }
}

/// The methods [`MatRef`] and [`MatMut`] share: their shape and strides, and the transpose.
macro_rules! shape_methods {
    ($view:ident) => {
        impl<'a> $view<'a> {
            /// The transpose: the same elements with rows and columns (and their strides)
            /// swapped.
            #[inline]
            pub fn t(self) -> Self {
                $view {
                    data: self.data,
                    rows: self.cols,
                    cols: self.rows,
                    rs: self.cs,
                    cs: self.rs,
                }
            }

            /// Number of rows.
            #[inline]
            pub fn rows(&self) -> usize {
                self.rows
            }

            /// Number of columns.
            #[inline]
            pub fn cols(&self) -> usize {
                self.cols
            }

            /// Distance in the slice between `(i, j)` and `(i + 1, j)`.
            #[inline]
            pub fn row_stride(&self) -> usize {
                self.rs
            }

            /// Distance in the slice between `(i, j)` and `(i, j + 1)`.
            #[inline]
            pub fn col_stride(&self) -> usize {
                self.cs
            }
        }
    };
}

shape_methods!(MatRef);
shape_methods!(MatMut);
