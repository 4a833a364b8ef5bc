//! Turns the digits of `data/digits.csv` into two byte files that `src/digits.rs` includes in
//! flash: every image's 64 pixels (0..=16, one byte each) and every label (0..=9).
use std::{env, fs, path::PathBuf};

/// Pixels of an 8x8 image.
const PIXELS: usize = 64;

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let csv = manifest.join("../data/digits.csv");
    println!("cargo:rerun-if-changed={}", csv.display());
    let text = fs::read_to_string(&csv).unwrap_or_else(|e| panic!("{}: {e}", csv.display()));
    let (mut pixels, mut labels) = (Vec::new(), Vec::new());
    for (row, line) in text.lines().enumerate().skip(1) {
        let fields: Vec<u8> = line
            .split(',')
            .map(|f| {
                f.parse()
                    .unwrap_or_else(|e| panic!("digits.csv line {}: {e}", row + 1))
            })
            .collect();
        let [label, image @ ..] = fields.as_slice() else {
            panic!("digits.csv line {}: empty", row + 1)
        };
        assert!(
            *label <= 9 && image.len() == PIXELS && image.iter().all(|&p| p <= 16),
            "digits.csv line {}: a label 0..=9 and {PIXELS} pixels 0..=16 expected",
            row + 1
        );
        labels.push(*label);
        pixels.extend_from_slice(image);
    }
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    fs::write(out.join("digits_pixels.bin"), &pixels).expect("OUT_DIR is writable");
    fs::write(out.join("digits_labels.bin"), &labels).expect("OUT_DIR is writable");
}
