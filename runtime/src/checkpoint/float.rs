//! The floating-point element types a PyTorch file may hold, read as `f32`: `F32` as it is,
//! `F16` and `BF16` exactly (every value of theirs is an `f32`), `F64` rounded to the nearest
//! `f32` (ties to even, as `tensor.float()` rounds; values beyond `f32`'s range become
//! infinities).

use safetensors::Dtype;
use std::vec::Vec;

/// The element types [`decode`] reads.
pub(crate) const READ: &str = "F32, F16, BF16 or F64";

/// The little-endian values `data` of type `dtype` as `f32`s, in order; `None` for a type that
/// is not floating point (or that this does not read).
pub(crate) fn decode(dtype: Dtype, data: &[u8]) -> Option<Vec<f32>> {
    Some(match dtype {
        Dtype::F32 => data
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
        Dtype::F16 => halves(data).map(f16_to_f32).collect(),
        Dtype::BF16 => halves(data)
            .map(|h| f32::from_bits(u32::from(h) << 16))
            .collect(),
        Dtype::F64 => data
            .chunks_exact(8)
            .map(|b| {
                let mut w = [0u8; 8];
                w.copy_from_slice(b);
                f64::from_le_bytes(w) as f32
            })
            .collect(),
        _ => return None,
    })
}

/// The little-endian 16-bit words of `data`.
fn halves(data: &[u8]) -> impl Iterator<Item = u16> + '_ {
    data.chunks_exact(2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
}

/// An IEEE half (1 sign, 5 exponent, 10 mantissa bits) as the `f32` of the same value:
/// subnormals become normal `f32`s, infinities stay infinite, NaNs keep their payload.
fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exponent = u32::from((h >> 10) & 0x1f);
    let mantissa = u32::from(h & 0x3ff);
    let magnitude = match exponent {
        // Zero or subnormal: mantissa * 2^-24, exact in f32.
        0 => (mantissa as f32 * f32::from_bits(0x3380_0000)).to_bits(),
        0x1f => 0x7f80_0000 | (mantissa << 13),
        e => ((e + 127 - 15) << 23) | (mantissa << 13),
    };
    f32::from_bits(sign | magnitude)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn le16(words: &[u16]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    fn bits(x: &[f32]) -> Vec<u32> {
        x.iter().map(|v| v.to_bits()).collect()
    }

    #[test]
    fn halves_are_exact_at_every_edge() {
        let cases: [(u16, f32); 12] = [
            (0x0000, 0.0),
            (0x8000, -0.0),
            (0x3c00, 1.0),
            (0xc000, -2.0),
            (0x3555, 0.333_251_95),
            (0x7bff, 65504.0),
            (0x0400, 6.103_515_6e-5), // smallest normal, 2^-14
            (0x0001, 5.960_464_5e-8), // smallest subnormal, 2^-24
            (0x03ff, 6.097_555e-5),   // largest subnormal, 1023 * 2^-24
            (0x8001, -5.960_464_5e-8),
            (0x7c00, f32::INFINITY),
            (0xfc00, f32::NEG_INFINITY),
        ];
        let words: Vec<u16> = cases.iter().map(|c| c.0).collect();
        let expected: Vec<f32> = cases.iter().map(|c| c.1).collect();
        assert_eq!(
            bits(&decode(Dtype::F16, &le16(&words)).unwrap()),
            bits(&expected)
        );
        // Every finite half round-trips through f64 arithmetic to the same value.
        for h in (0..=u16::MAX).filter(|h| (h >> 10) & 0x1f != 0x1f) {
            let (e, m) = (i32::from((h >> 10) & 0x1f), f64::from(h & 0x3ff));
            let v = if e == 0 {
                m * 2f64.powi(-24)
            } else {
                (1.0 + m / 1024.0) * 2f64.powi(e - 15)
            };
            let v = if h >> 15 == 1 { -v } else { v };
            assert_eq!(f16_to_f32(h) as f64, v, "{h:#06x}");
        }
        let nan = f16_to_f32(0x7e01);
        assert!(nan.is_nan());
        assert_eq!(nan.to_bits(), 0x7fc0_2000, "the payload is kept");
    }

    #[test]
    fn bfloat16_is_the_top_half_of_an_f32() {
        let words = [0x3f80, 0xc049, 0x0001, 0x7f80];
        let values = decode(Dtype::BF16, &le16(&words)).unwrap();
        assert_eq!(
            bits(&values),
            [0x3f80_0000, 0xc049_0000, 0x0001_0000, 0x7f80_0000]
        );
        assert_eq!(values[1], -3.140_625);
    }

    #[test]
    fn doubles_round_to_the_nearest_f32() {
        let third = 1.0f64 / 3.0;
        let tie = 1.0 + 2f64.powi(-24); // halfway between 1 and the next f32: to even, 1
        let above = 1.0 + 2f64.powi(-24) + 2f64.powi(-40);
        let data: Vec<u8> = [third, tie, above, 1e300, -1e-50]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let values = decode(Dtype::F64, &data).unwrap();
        assert_eq!(
            bits(&values),
            bits(&[0.333_333_34, 1.0, 1.000_000_1, f32::INFINITY, -0.0])
        );
    }

    #[test]
    fn floats_are_read_as_they_are_and_integers_not_at_all() {
        let data: Vec<u8> = [1.5f32, -0.0, f32::NAN]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let values = decode(Dtype::F32, &data).unwrap();
        assert_eq!(bits(&values), bits(&[1.5, -0.0, f32::NAN]));
        for dtype in [
            Dtype::I64,
            Dtype::I32,
            Dtype::U8,
            Dtype::BOOL,
            Dtype::F8_E4M3,
        ] {
            assert_eq!(decode(dtype, &[0u8; 8]), None, "{dtype:?}");
        }
    }
}
