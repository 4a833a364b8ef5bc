//! The decimal value of an `f32` hyper-parameter as an `f64` ([`decimal_f64`]), in integer
//! arithmetic alone (no float formatting or parsing, which would pull tens of kilobytes of
//! `core` into a microcontroller's flash), and [`Decimal`], which keeps one such value for as
//! long as its `f32` does not change.

use core::cmp::Ordering;

/// Widens an `f32` hyper-parameter to the `f64` a user meant by it: the `f64` nearest to the
/// shortest decimal that round-trips the `f32`. `0.999_f32` becomes `0.999_f64`, as the same
/// literal typed into Python would, where `f64::from` gives `0.99900001287...`. PyTorch computes
/// its per-step scalars from such Python floats.
///
/// The result is the one of writing `x` with `{:e}` and parsing that as an `f64`, for every
/// `f32`; zeros, infinities and NaNs are widened as they are.
///
/// ```
/// assert_eq!(fusegraph_runtime::math::decimal_f64(0.999), 0.999_f64);
/// assert_eq!(fusegraph_runtime::math::decimal_f64(1e-8), 1e-8_f64);
/// ```
pub fn decimal_f64(x: f32) -> f64 {
    match shortest_decimal(x) {
        Some(w) => w,
        None => exact_decimal(x),
    }
}

/// [`decimal_f64`] of one `f32`, kept for as long as that `f32` keeps its bits: a rule's step
/// part reads its hyper-parameters' decimals through these, so that they are computed when a
/// hyper-parameter changes rather than at every step.
///
/// ```
/// use fusegraph_runtime::math::Decimal;
/// let mut beta = Decimal::default();
/// assert_eq!(beta.of(0.9), 0.9_f64);
/// assert_eq!(beta.of(0.99), 0.99_f64);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Decimal {
    /// The bits of the `f32` that `value` is the decimal of (`0`, for `+0.0`, at first).
    bits: u32,
    /// `decimal_f64` of the `f32` of `bits`.
    value: f64,
}

impl Decimal {
    /// [`decimal_f64`] of `x`: the kept value when `x` has the bits it was computed for, else
    /// computed now and kept.
    #[inline]
    pub fn of(&mut self, x: f32) -> f64 {
        if x.to_bits() != self.bits {
            *self = Decimal {
                bits: x.to_bits(),
                value: decimal_f64(x),
            };
        }
        self.value
    }
}

/// `10^p` for `p <= 22`: the powers of ten that `f64` holds exactly.
const EXACT_POWERS_OF_TEN: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// [`decimal_f64`] in `u128`, where the answer is quick to prove; `None` where it is not
/// (subnormals, `|x|` outside `[2^-41, 2^24)`, a shortest decimal with more than 22 digits
/// after the point, or two shortest decimals to choose from), and for zeros and non-finite
/// values. A learning rate that a schedule changes every step takes this path.
///
/// The values that round to `x = M * 2^E` lie between the midpoints to its neighbours, `lo`
/// and `hi` (included when `M` is even: ties go to even). Trying `p = 0, 1, 2...` digits after
/// the point, the first `p` at which one integer `d` has `d / 10^p` between them gives the
/// shortest decimal: had a shorter one `D / 10^q` existed, it would have been found at `q <
/// p`, or the power of ten between it and `d / 10^p` would be a second candidate at `p`. The
/// comparisons `d * 2^(2 - E)` against `4 lo` and `4 hi` times `10^p` are exact in `u128`, and
/// `d / 10^p`, with `d < 2^53` and `10^p` exact in `f64`, is one correctly rounded division.
fn shortest_decimal(x: f32) -> Option<f64> {
    let bits = x.to_bits() & 0x7FFF_FFFF;
    let (biased, fraction) = (bits >> 23, bits & 0x7F_FFFF);
    if biased == 0 || biased == 0xFF {
        return None;
    }
    let m = u128::from(fraction | 1 << 23);
    let e = biased as i32 - 150;
    if !(-64..=0).contains(&e) {
        return None;
    }
    // Scaled by 2^shift, so that x is 4m and its neighbours' midpoints are integers.
    let shift = (2 - e) as u32;
    let below = if fraction == 0 && biased > 1 { 1 } else { 2 };
    let (lo, hi) = (4 * m - below, 4 * m + 2);
    let inclusive = m % 2 == 0;
    let mut ten_to_p = 1u128;
    for &power in &EXACT_POWERS_OF_TEN {
        let (l, h) = (lo * ten_to_p, hi * ten_to_p);
        let exact = |v: u128| v & ((1u128 << shift) - 1) == 0;
        let first = if inclusive && exact(l) {
            l >> shift
        } else {
            (l >> shift) + 1
        };
        let last = if inclusive || !exact(h) {
            h >> shift
        } else {
            (h >> shift) - 1
        };
        if first == last && first < 1 << 53 {
            let w = first as f64 / power;
            return Some(if x.is_sign_negative() { -w } else { w });
        }
        if first < last {
            return None;
        }
        ten_to_p *= 10;
    }
    None
}

/// [`decimal_f64`] for every `f32`: its shortest decimal ([`shortest_digits`]) rounded to the
/// nearest `f64` ([`nearest_f64`]); zeros and non-finite values widened as they are.
fn exact_decimal(x: f32) -> f64 {
    let bits = x.to_bits() & 0x7FFF_FFFF;
    if bits == 0 || bits >= 0x7F80_0000 {
        return f64::from(x);
    }
    let (digits, exponent) = shortest_digits(bits);
    let w = nearest_f64(digits, exponent);
    if x.is_sign_negative() {
        -w
    } else {
        w
    }
}

/// The shortest decimal `digits * 10^exponent` that rounds to the positive finite `f32` of
/// `bits`, and of those the nearest to it: `core`'s shortest formatting (its Dragon4 fallback,
/// whose answer its Grisu path gives whenever that one answers), step by step, on [`Big`].
///
/// As `core::num::flt2dec` decodes it, the value is `mant * 2^exp`, and the values that round
/// to it lie from `(mant - minus) * 2^exp` to `(mant + plus) * 2^exp`, bounds included when
/// the `f32`'s own mantissa is even (subnormals' always are, as `core` decodes them). The digits
/// are generated from the position of the upper bound's leading one until the rest of the value
/// lies within the bounds (the digits so far are a decimal in range: round down) or the next
/// decimal at the last digit does (round up); when both do, the nearer one, up on a tie.
fn shortest_digits(bits: u32) -> (u64, i32) {
    let (biased, fraction) = (bits >> 23, bits & 0x7F_FFFF);
    let (mant, minus, plus, exp) = if biased == 0 {
        (u64::from(fraction) << 1, 1, 1, -150)
    } else if fraction == 0 {
        (1 << 25, 1, 2, biased as i32 - 152)
    } else {
        (
            u64::from(fraction | 1 << 23) << 1,
            1,
            1,
            biased as i32 - 151,
        )
    };
    let inclusive = biased == 0 || fraction % 2 == 0;
    // `a < b`, or `a <= b` when the bounds are included.
    let within = |a: &Big, b: &Big| match a.cmp(b) {
        Ordering::Less => true,
        Ordering::Equal => inclusive,
        Ordering::Greater => false,
    };
    // 10^(k-1) < high <= 10^(k+1), from floor(2^32 log10(2)).
    let high_bits = i64::from(64 - (mant + plus - 1).leading_zeros());
    let mut k = (((high_bits + i64::from(exp)) * 1_292_913_986) >> 32) as i32;
    // mant / scale is the value, (mant - minus) / scale and (mant + plus) / scale its bounds,
    // all over 10^k.
    let (mut mant, mut minus, mut plus) = (Big::from(mant), Big::from(minus), Big::from(plus));
    let mut scale = Big::from(1);
    if exp < 0 {
        scale.mul_pow2(exp.unsigned_abs());
    } else {
        for b in [&mut mant, &mut minus, &mut plus] {
            b.mul_pow2(exp.unsigned_abs());
        }
    }
    if k >= 0 {
        scale.mul_pow10(k.unsigned_abs());
    } else {
        for b in [&mut mant, &mut minus, &mut plus] {
            b.mul_pow10(k.unsigned_abs());
        }
    }
    if within(&scale, &mant.plus(&plus)) {
        k += 1;
    } else {
        for b in [&mut mant, &mut minus, &mut plus] {
            b.mul_small(10);
        }
    }
    let (mut digits, mut count) = (0u64, 0);
    let (down, up) = loop {
        digits = digits * 10 + u64::from(mant.take_digit(&scale));
        count += 1;
        let down = within(&mant, &minus);
        let up = within(&scale, &mant.plus(&plus));
        if down || up {
            break (down, up);
        }
        for b in [&mut mant, &mut minus, &mut plus] {
            b.mul_small(10);
        }
    };
    if up && (!down || mant.plus(&mant) >= scale) {
        digits += 1;
    }
    (digits, k - count)
}

/// The `f64` nearest to `digits * 10^exponent` (ties to even), as parsing the decimal gives
/// it, for a decimal within the range of `f32`: the quotient `value * 2^shift` over one
/// division of [`Big`]s, with 54 or 55 bits, rounded on its extra bits and the remainder.
fn nearest_f64(digits: u64, exponent: i32) -> f64 {
    let (mut num, mut den) = (Big::from(digits), Big::from(1));
    if exponent >= 0 {
        num.mul_pow10(exponent.unsigned_abs());
    } else {
        den.mul_pow10(exponent.unsigned_abs());
    }
    // num / den lies in (2^(a-b-1), 2^(a-b+1)) for bit lengths a and b: shifted by 54 - a + b,
    // the quotient has 54 or 55 bits.
    let shift = 54 - num.bits() as i32 + den.bits() as i32;
    if shift >= 0 {
        num.mul_pow2(shift.unsigned_abs());
    } else {
        den.mul_pow2(shift.unsigned_abs());
    }
    let quotient = num.div_small_quotient(den);
    let extra = 64 - quotient.leading_zeros() - 53;
    let kept = quotient >> extra;
    let (dropped, half) = (quotient & ((1 << extra) - 1), 1 << (extra - 1));
    let up = dropped > half || (dropped == half && (!num.is_zero() || kept % 2 == 1));
    let mantissa = kept + u64::from(up);
    // Exact: a mantissa of at most 2^53 times a power of two inside the normal range.
    let power = i64::from(extra as i32 - shift);
    mantissa as f64 * f64::from_bits(((1023 + power) as u64) << 52)
}

/// 32-bit limbs of a [`Big`]: 256 bits, more than any value [`shortest_digits`] and
/// [`nearest_f64`] reach (below 2^200: an `f32`'s mantissa times `2^151` and `10^8`, or
/// its integer value times ten).
const LIMBS: usize = 8;

/// An unsigned integer of [`LIMBS`] limbs, least significant first.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Big([u32; LIMBS]);

impl From<u64> for Big {
    fn from(v: u64) -> Self {
        let mut limbs = [0; LIMBS];
        (limbs[0], limbs[1]) = (v as u32, (v >> 32) as u32);
        Big(limbs)
    }
}

impl PartialOrd for Big {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Big {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.iter().rev().cmp(other.0.iter().rev())
    }
}

impl Big {
    fn is_zero(&self) -> bool {
        self.0.iter().all(|&l| l == 0)
    }

    /// Bit length: the position of the highest one plus one.
    fn bits(&self) -> u32 {
        let top = self.0.iter().rposition(|&l| l != 0).unwrap_or(0);
        32 * top as u32 + (32 - self.0[top].leading_zeros())
    }

    fn plus(&self, other: &Big) -> Big {
        let mut sum = [0; LIMBS];
        let mut carry = 0u64;
        for (s, (&a, &b)) in sum.iter_mut().zip(self.0.iter().zip(&other.0)) {
            let t = u64::from(a) + u64::from(b) + carry;
            (*s, carry) = (t as u32, t >> 32);
        }
        debug_assert_eq!(carry, 0, "a sum past {LIMBS} limbs");
        Big(sum)
    }

    /// `self -= other`, for `other <= self`.
    fn minus_assign(&mut self, other: &Big) {
        let mut borrow = false;
        for (a, &b) in self.0.iter_mut().zip(&other.0) {
            let (d, o1) = a.overflowing_sub(b);
            let (d, o2) = d.overflowing_sub(u32::from(borrow));
            (*a, borrow) = (d, o1 || o2);
        }
        debug_assert!(!borrow, "a difference below zero");
    }

    fn mul_small(&mut self, m: u32) {
        let mut carry = 0u64;
        for l in &mut self.0 {
            let t = u64::from(*l) * u64::from(m) + carry;
            (*l, carry) = (t as u32, t >> 32);
        }
        debug_assert_eq!(carry, 0, "a product past {LIMBS} limbs");
    }

    fn mul_pow10(&mut self, n: u32) {
        for _ in 0..n / 9 {
            self.mul_small(1_000_000_000);
        }
        self.mul_small(10u32.pow(n % 9));
    }

    fn mul_pow2(&mut self, n: u32) {
        let (words, bits) = ((n / 32) as usize, n % 32);
        debug_assert!(
            self.bits() + n <= 32 * LIMBS as u32,
            "a shift past {LIMBS} limbs"
        );
        for i in (0..LIMBS).rev() {
            let at = |j: usize| if j < words { 0 } else { self.0[j - words] };
            let high = at(i) << bits;
            let low = match (bits, i) {
                (0, _) | (_, 0) => 0,
                _ => at(i - 1) >> (32 - bits),
            };
            self.0[i] = high | low;
        }
    }

    /// `self / 2`.
    fn halve(&mut self) {
        for i in 0..LIMBS {
            let next = self.0.get(i + 1).map_or(0, |&l| l << 31);
            self.0[i] = self.0[i] >> 1 | next;
        }
    }

    /// The digit `floor(self / scale)`, below ten while digits are generated; leaves the
    /// remainder in `self`.
    fn take_digit(&mut self, scale: &Big) -> u8 {
        let mut digit = 0;
        while *self >= *scale {
            self.minus_assign(scale);
            digit += 1;
        }
        digit
    }

    /// `floor(self / den)` for a quotient below `2^55`, by shifting and subtracting; leaves
    /// the remainder in `self`.
    fn div_small_quotient(&mut self, mut den: Big) -> u64 {
        den.mul_pow2(54);
        let mut quotient = 0;
        for bit in (0..55).rev() {
            if *self >= den {
                self.minus_assign(&den);
                quotient |= 1 << bit;
            }
            den.halve();
        }
        quotient
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;

    /// The reference: `x` written in its shortest round-trip form and read back, as
    /// [`decimal_f64`] was computed before it had an integer path for every `f32`.
    fn formatted_decimal(x: f32) -> f64 {
        let text = std::format!("{x:e}");
        text.parse::<f64>().expect("a formatted f32 parses")
    }

    /// Checks [`decimal_f64`] and [`exact_decimal`] against [`formatted_decimal`] on `x`.
    fn same_as_formatted(x: f32) {
        let want = formatted_decimal(x).to_bits();
        assert_eq!(
            exact_decimal(x).to_bits(),
            want,
            "{x:e} ({:#x})",
            x.to_bits()
        );
        assert_eq!(decimal_f64(x).to_bits(), want, "{x:e} ({:#x})", x.to_bits());
    }

    /// Checks the value of `bits` and its negation.
    fn both_signs(bits: u32) {
        same_as_formatted(f32::from_bits(bits));
        same_as_formatted(f32::from_bits(bits | 1 << 31));
    }

    #[test]
    fn decimal_widening_keeps_the_typed_value_and_round_trips() {
        for &x in &[
            0.9_f32, 0.999, 1e-7, 1e-8, 0.004, 3.0e38, -2.5e-40, 0.0, -0.0,
        ] {
            let w = decimal_f64(x);
            assert_eq!(w as f32, x, "{x} must round-trip");
        }
        assert_eq!(decimal_f64(0.9), 0.9_f64);
        assert_ne!(decimal_f64(0.9), f64::from(0.9_f32));
        assert!(decimal_f64(f32::NAN).is_nan());
        assert_eq!(decimal_f64(f32::INFINITY), f64::INFINITY);
        assert_eq!(decimal_f64(f32::NEG_INFINITY), f64::NEG_INFINITY);
        assert_eq!(decimal_f64(-0.0).to_bits(), (-0.0f64).to_bits());
        assert_eq!(decimal_f64(f32::MAX), 3.4028235e38_f64);
        assert_eq!(decimal_f64(f32::from_bits(1)), 1e-45_f64);
        assert_eq!(decimal_f64(f32::MIN_POSITIVE), 1.1754944e-38_f64);
    }

    /// Checks the quick path against the formatted one on `x`; returns whether it answered.
    fn quick_as_formatted(x: f32) -> bool {
        let Some(w) = shortest_decimal(x) else {
            return false;
        };
        assert_eq!(w.to_bits(), formatted_decimal(x).to_bits(), "{x:e}");
        true
    }

    #[test]
    fn the_quick_path_gives_the_formatted_decimal() {
        // Decimals of one to nine digits at every scale it covers, as hyper-parameters are typed.
        let mut answered = 0;
        for digits in [
            1u32,
            7,
            9,
            12,
            25,
            99,
            125,
            999,
            1234,
            65_537,
            3_333_333,
            123_456_789,
        ] {
            for p in 0..=22 {
                let x = (f64::from(digits) / 10f64.powi(p)) as f32;
                for y in [
                    x,
                    -x,
                    f32::from_bits(x.to_bits() + 1),
                    f32::from_bits(x.to_bits() - 1),
                ] {
                    answered += usize::from(quick_as_formatted(y));
                }
            }
        }
        // A sweep over the bit patterns of the positive finite values, powers of two included.
        for bits in (0..0x7F80_0000u32)
            .step_by(9_973)
            .chain((1..255).map(|e| e << 23))
        {
            answered += usize::from(quick_as_formatted(f32::from_bits(bits)));
        }
        assert!(
            answered > 20_000,
            "the quick path answered {answered} times"
        );
        for x in [
            0.9_f32, 0.999, 0.99, 0.95, 1e-7, 1e-8, 1e-3, 3e-4, 0.5, 1.0, 2.0, 1e6,
        ] {
            assert!(
                shortest_decimal(x).is_some(),
                "{x} should not need the exact path"
            );
        }
    }

    /// Every exponent, subnormals' included: the first and last eight mantissas of each, and
    /// sixteen spread between them, of both signs.
    #[test]
    fn every_exponent_gives_the_formatted_decimal() {
        for biased in 0..255u32 {
            let ends = (0..8).chain(0x7F_FFFF - 7..=0x7F_FFFF);
            for fraction in ends.chain((0..16).map(|i| i * 524_287 + 4_099)) {
                both_signs(biased << 23 | fraction);
            }
        }
    }

    /// Every bit pattern of `ranges` of length `2 * half` around the smallest subnormals, the
    /// boundary between subnormals and normals, `1e-3` (learning rates), `0.999` (betas) and
    /// the largest finite values.
    fn every_value_around(half: u32) {
        let ranges = [
            0..2 * half,
            0x80_0000 - half..0x80_0000 + half,
            0x3A83_126F - half..0x3A83_126F + half,
            0x3F7F_BE77 - half..0x3F7F_BE77 + half,
            0x7F80_0000 - 2 * half..0x7F80_0000,
        ];
        for bits in ranges.into_iter().flatten() {
            same_as_formatted(f32::from_bits(bits));
        }
    }

    /// `count` bit patterns spread over every `f32` (a full-period sequence of `u32`s, both
    /// signs), the non-finite ones skipped.
    fn scattered_values(count: u32) {
        let mut bits = 0x2545_F491u32;
        for _ in 0..count {
            bits = bits.wrapping_mul(0x0019_660D).wrapping_add(0x3C6E_F35F);
            if bits & 0x7F80_0000 != 0x7F80_0000 {
                same_as_formatted(f32::from_bits(bits));
            }
        }
    }

    #[test]
    fn every_value_of_five_ranges_gives_the_formatted_decimal() {
        every_value_around(1 << 10);
    }

    #[test]
    fn scattered_values_give_the_formatted_decimal() {
        scattered_values(1 << 14);
    }

    /// The same checks at a scale for an optimized build: `cargo test --release -p
    /// fusegraph-runtime --lib math::decimal -- --ignored` (two minutes).
    #[test]
    #[ignore = "minutes unoptimized: run with --release"]
    fn millions_of_values_give_the_formatted_decimal() {
        every_value_around(1 << 21);
        scattered_values(1 << 24);
    }

    #[test]
    fn a_decimal_is_kept_until_its_bits_change() {
        let mut d = Decimal::default();
        assert_eq!(d.of(0.0).to_bits(), 0.0f64.to_bits());
        assert_eq!(d.of(-0.0).to_bits(), (-0.0f64).to_bits());
        assert_eq!(d.of(0.999), 0.999);
        assert_eq!(
            d,
            Decimal {
                bits: 0.999f32.to_bits(),
                value: 0.999
            }
        );
        assert_eq!(d.of(1e-8), 1e-8);
        assert!(d.of(f32::NAN).is_nan());
        assert_eq!(d.of(0.999), 0.999);
    }
}
