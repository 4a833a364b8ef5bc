//! Deterministic buffers for the optimizer benches: values in `±[0.1, 1.1)` (no zeros, no
//! subnormals) in a cache-line-aligned buffer, as the optimizer's own slots start: where a
//! buffer starts changes the speed of a pass in cache by several percent, and a fused step and
//! the plain loop it is measured against must not differ in that. Included with
//! `#[path = ".../benches/support/buffers.rs"] mod buffers;`.

use fusegraph_runtime::aligned::AlignedFloats;

/// A deterministic value in `±[0.1, 1.1)`.
fn value(i: usize, salt: u64) -> f32 {
    let mut x = (i as u64 ^ salt).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 29;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 32;
    let u = (x >> 40) as f32 / (1u64 << 24) as f32;
    let sign = if x & 1 == 0 { 1.0 } else { -1.0 };
    sign * (0.1 + u)
}

/// `n` deterministic values (`salt` picks which) in an aligned buffer.
pub fn buffer(n: usize, salt: u64) -> AlignedFloats {
    let mut b = AlignedFloats::zeros(n);
    for (i, x) in b.iter_mut().enumerate() {
        *x = value(i, salt);
    }
    b
}
