//! [`against_gemm`]: a train step's rate beside the GEMM's on its largest product, for the
//! bench examples that compare with the machine's GEMM. Included with
//! `#[path = "support/against_gemm.rs"] mod against_gemm;` beside `timing`.

use crate::timing::{measure, stats, Variant};

/// Times a train step beside the GEMM on its largest product, interleaved (`iters` calls a
/// sample), and prints a table titled `title`: microseconds per call, MFLOP, GFLOP/s and the
/// step's rate as a fraction of the GEMM's, which it returns. `flops` are the GEMM's and the
/// step's.
pub fn against_gemm(
    title: &str,
    gemm: Variant<'_>,
    step: Variant<'_>,
    flops: [f64; 2],
    iters: usize,
) -> f64 {
    println!("\n{title}");
    println!(
        "  {:<34} {:>18} {:>8} {:>12} {:>9}",
        "variant", "us/step med (best)", "MFLOP", "GFLOP/s med", "of gemm"
    );
    let mut vs = [gemm, step];
    measure(&mut vs, iters);
    let gemm_rate = flops[0] / stats(&vs[0]).0 / 1e9;
    let mut fraction = 0.0;
    for (v, flops) in vs.iter().zip(flops) {
        let (med, best) = stats(v);
        let rate = flops / med / 1e9;
        fraction = rate / gemm_rate;
        println!(
            "  {:<34} {:>8.0} ({:>7.0}) {:>8.1} {:>12.1} {:>8.0}%",
            v.name,
            med * 1e6,
            best * 1e6,
            flops / 1e6,
            rate,
            fraction * 100.0
        );
    }
    fraction
}
