//! Round-robin timing for the bench examples: a [`Variant`] is one piece of work to time,
//! [`measure`] times all the variants of a table interleaved, [`stats`] gives the median and
//! the best sample. Included with `#[path = "support/timing.rs"] mod timing;`.

use std::time::Instant;

/// Timed samples per variant.
pub const REPS: usize = 21;

/// A deterministic value in `[-1, 1)`.
pub fn value(i: usize) -> f32 {
    let x = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
    x as f32 / (1u64 << 23) as f32 - 1.0
}

/// A variant: `run` does one unit of work per call; `samples` are seconds per call.
pub struct Variant<'a> {
    /// The name the table prints.
    pub name: String,
    /// One unit of work.
    pub run: Box<dyn FnMut() + 'a>,
    /// Seconds per call, one per round of [`measure`].
    pub samples: Vec<f64>,
}

impl<'a> Variant<'a> {
    /// A variant without samples yet.
    pub fn new(name: impl Into<String>, run: impl FnMut() + 'a) -> Self {
        Variant {
            name: name.into(),
            run: Box::new(run),
            samples: Vec::new(),
        }
    }
}

/// Times every variant round-robin, `REPS` rounds after one warm-up call each; a sample is the
/// time of `iters` calls, in seconds per call. The order rotates every round.
pub fn measure(variants: &mut [Variant<'_>], iters: usize) {
    for v in variants.iter_mut() {
        (v.run)();
    }
    let n = variants.len();
    for round in 0..REPS {
        for k in 0..n {
            let v = &mut variants[(k + round) % n];
            let t = Instant::now();
            for _ in 0..iters {
                (v.run)();
            }
            v.samples.push(t.elapsed().as_secs_f64() / iters as f64);
        }
    }
}

/// The median and the best sample of a measured variant, in seconds per call.
pub fn stats(v: &Variant<'_>) -> (f64, f64) {
    let mut s = v.samples.clone();
    s.sort_by(f64::total_cmp);
    (s[s.len() / 2], s[0])
}
