//! Fork-join for the kernels: two closures on the rayon pool when the `parallel` feature is on
//! and the caller asks for it, else one after the other on this thread.

/// `rayon::join(a, b)` when `par` and the `parallel` feature are set, else `(a(), b())`. Either
/// way `a` and `b` see the same data and return the same values: only where they run changes.
pub(crate) fn join<A, B, RA, RB>(par: bool, a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    #[cfg(feature = "parallel")]
    if par {
        return rayon::join(a, b);
    }
    let _ = par;
    (a(), b())
}
