//! The interleaved tables of `benches/optim.rs` for the tensor-wise rules: each fused rule
//! against the plain loops of its passes, and Muon's Newton-Schulz iteration against the GEMM
//! on the same matrix products; and the check that the plain loops compute the built-ins bit
//! for bit. Timing is `examples/support/timing.rs`'s: every variant of a table round-robin,
//! one warm-up call each, then 21 samples.

use super::buffers::buffer;
use crate::plain_tensorwise::{PlainAdafactor, PlainLamb, PlainMuon};
use crate::timing::{measure, stats, Variant};
use fusegraph::kernels::gemm::{gemm, workspace_len, MatMut, MatRef};
use fusegraph::optim::keras::{Adafactor, Lamb, Muon};
use fusegraph::optim::{newton_schulz, newton_schulz_work, Coefficients, Config, Optimizer, Shape};
use fusegraph_runtime::aligned::AlignedFloats;
use std::hint::black_box;

/// The matrices of the fused-against-plain table: the element-wise rows' 1e4 and 1e6 values,
/// and two powers of two.
const MATRICES: [(usize, usize); 4] = [(100, 100), (512, 512), (1000, 1000), (1024, 1024)];
/// The matrices of the Newton-Schulz table: two square ones and a tall one (iterated on its
/// transpose).
const NS_MATRICES: [(usize, usize); 3] = [(512, 512), (1024, 1024), (1024, 256)];
/// Values one sample of the fused-against-plain table processes.
const SAMPLE_VALUES: usize = 8_000_000;
/// Newton-Schulz steps, Muon's default.
const NS_STEPS: u32 = 5;
/// The targets.
const PLAIN_TARGET: f64 = 0.95;
const GEMM_TARGET: f64 = 0.80;

/// The rules as measured (Keras' defaults; Muon with `ns_steps` as given).
fn rules(ns_steps: f32) -> (Lamb, Adafactor, Muon) {
    (
        Lamb::default(),
        Adafactor::default(),
        Muon::default().with_ns_steps(ns_steps),
    )
}

/// Whether a table known by `names` runs under `filter`: one of them holds it.
fn selected(filter: Option<&str>, names: &[&str]) -> bool {
    filter.is_none_or(|f| names.iter().any(|n| n.contains(f)))
}

/// The speed of `a` relative to `b` (time of `b` / time of `a`): the median over the rounds
/// of the ratio within a round, where both ran on the same machine state.
fn speed_ratio(a: &Variant<'_>, b: &Variant<'_>) -> f64 {
    let mut r: Vec<f64> = a
        .samples
        .iter()
        .zip(&b.samples)
        .map(|(a, b)| b / a)
        .collect();
    r.sort_by(f64::total_cmp);
    r[r.len() / 2]
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "NOT met"
    }
}

/// Bits of a buffer.
fn bits(x: &[f32]) -> Vec<u32> {
    x.iter().map(|v| v.to_bits()).collect()
}

/// Steps `fused` and `plain` three times on the same gradient, from the same parameters, and
/// asserts the same bits.
fn same_bits<R: fusegraph::optim::Rule>(
    name: &str,
    (rows, cols): (usize, usize),
    mut fused: Optimizer<R>,
    mut plain: impl FnMut(&mut [f32], &[f32]),
) {
    let n = rows * cols;
    let g = buffer(n, 1);
    let mut pf = buffer(n, 2);
    let mut pp = pf.clone();
    for _ in 0..3 {
        fused.step(&mut pf, &g);
        plain(&mut pp, &g);
    }
    assert!(
        bits(&pf) == bits(&pp),
        "the plain loops of {name} do not compute the built-in bit for bit on {rows}x{cols}"
    );
}

/// The plain loops compute `keras::Lamb`, `keras::Adafactor` and `keras::Muon` bit for bit,
/// on shapes with partial lanes and partial blocks of a sum, a tall matrix for Muon, and the
/// shapes of the tables (with the default accumulators: the plain sums are `f64`'s).
pub fn check_plain_loops() {
    if cfg!(feature = "f32-accumulators") {
        println!("plain tensor-wise loops: not checked (f32-accumulators)");
        return;
    }
    let (lamb, adafactor, muon) = rules(NS_STEPS as f32);
    let matrix = |rows, cols| [Shape::matrix(rows, cols)];
    for (rows, cols) in [(37, 29), (48, 16), (16, 48), (100, 100), (512, 512)] {
        let fused = Optimizer::with_shapes(lamb, &matrix(rows, cols), Config::default());
        let mut plain = PlainLamb::new(lamb, rows * cols);
        same_bits("LAMB", (rows, cols), fused, |p, g| plain.step(p, g));
        let fused = Optimizer::with_shapes(muon, &matrix(rows, cols), Config::default());
        let mut plain = PlainMuon::new(muon, rows, cols);
        same_bits("Muon", (rows, cols), fused, |p, g| plain.step(p, g));
    }
    for (rows, cols) in [(24, 40), (40, 24), (37, 29), (100, 100), (512, 512)] {
        let fused = Optimizer::with_shapes(adafactor, &matrix(rows, cols), Config::default());
        let mut plain = PlainAdafactor::new(adafactor, rows, cols);
        same_bits("Adafactor", (rows, cols), fused, |p, g| plain.step(p, g));
    }
    println!("plain tensor-wise loops: bit for bit the fused built-ins (LAMB, Adafactor, Muon)");
}

/// Runs the tables `filter` selects (all without one).
pub fn run(filter: Option<&str>) {
    println!(
        "\ntensor-wise tables: {} rayon threads; compiled with avx2 {}, fma {}, avx512f {}",
        rayon::current_num_threads(),
        cfg!(target_feature = "avx2"),
        cfg!(target_feature = "fma"),
        cfg!(target_feature = "avx512f"),
    );
    if let Ok(load) = std::fs::read_to_string("/proc/loadavg") {
        println!("load average: {}", load.trim());
    }
    if selected(
        filter,
        &["interleaved", "tensorwise", "lamb", "adafactor", "muon"],
    ) {
        fused_against_plain();
    }
    if selected(filter, &["interleaved", "newton_schulz", "muon"]) {
        newton_schulz_against_gemm();
    }
}

/// One row of the fused-against-plain table: a rule's name and its two variants.
fn rule_variants<'a>(
    rule: &'static str,
    mut fused: impl FnMut(&mut [f32], &[f32]) + 'a,
    mut plain: impl FnMut(&mut [f32], &[f32]) + 'a,
    (n, g): (usize, &'a [f32]),
) -> [Variant<'a>; 2] {
    let mut pf = buffer(n, 2);
    let mut pp = buffer(n, 2);
    [
        Variant::new(format!("{rule} fused"), move || {
            fused(black_box(&mut pf), black_box(g))
        }),
        Variant::new(format!("{rule} plain"), move || {
            plain(black_box(&mut pp), black_box(g))
        }),
    ]
}

/// The variants of one matrix: each rule fused and plain.
fn matrix_variants(rows: usize, cols: usize, g: &[f32]) -> Vec<Variant<'_>> {
    let n = rows * cols;
    let (lamb, adafactor, muon) = rules(0.0);
    let shape = [Shape::matrix(rows, cols)];
    let mut lamb_fused = Optimizer::with_shapes(lamb, &shape, Config::default());
    let mut lamb_plain = PlainLamb::new(lamb, n);
    let mut ada_fused = Optimizer::with_shapes(adafactor, &shape, Config::default());
    let mut ada_plain = PlainAdafactor::new(adafactor, rows, cols);
    let mut muon_fused = Optimizer::with_shapes(muon, &shape, Config::default());
    let mut muon_plain = PlainMuon::new(muon, rows, cols);
    let mut vs = Vec::new();
    vs.extend(rule_variants(
        "lamb",
        move |p, g| lamb_fused.step(p, g),
        move |p, g| lamb_plain.step(p, g),
        (n, g),
    ));
    vs.extend(rule_variants(
        "adafactor",
        move |p, g| ada_fused.step(p, g),
        move |p, g| ada_plain.step(p, g),
        (n, g),
    ));
    vs.extend(rule_variants(
        "muon passes",
        move |p, g| muon_fused.step(p, g),
        move |p, g| muon_plain.step(p, g),
        (n, g),
    ));
    vs
}

/// Times every rule fused and plain on each of [`MATRICES`] and prints the tables.
fn fused_against_plain() {
    println!(
        "\ntensor-wise rules, fused against plain loops of the same passes (1 thread; Keras \
         Lamb, Adafactor factored, Muon's element passes with ns_steps 0)"
    );
    let mut summary: Vec<(String, Vec<f64>)> = Vec::new();
    for (rows, cols) in MATRICES {
        let n = rows * cols;
        let g = buffer(n, 1);
        let mut vs = matrix_variants(rows, cols, &g);
        let iters = (SAMPLE_VALUES / n).max(1);
        measure(&mut vs, iters);
        println!("\n  {rows}x{cols}, {iters} step(s) per sample");
        println!(
            "  {:<20} {:>20} {:>20} {:>9}",
            "variant", "us/step med (best)", "ns/value med (best)", "of plain"
        );
        for pair in vs.chunks(2) {
            let ratio = speed_ratio(&pair[0], &pair[1]);
            for v in pair {
                let (med, best) = stats(v);
                let of_plain = if v.name.ends_with("fused") {
                    format!("{:>8.0}%", 100.0 * ratio)
                } else {
                    String::new()
                };
                println!(
                    "  {:<20} {:>9.1} ({:>8.1}) {:>9.3} ({:>8.3}) {of_plain}",
                    v.name,
                    med * 1e6,
                    best * 1e6,
                    med * 1e9 / n as f64,
                    best * 1e9 / n as f64,
                );
            }
            let rule = pair[0].name.trim_end_matches(" fused").to_string();
            match summary.iter_mut().find(|(r, _)| *r == rule) {
                Some((_, ratios)) => ratios.push(ratio),
                None => summary.push((rule, vec![ratio])),
            }
        }
    }
    print_plain_summary(&summary);
}

/// The fused-against-plain ratios of every rule and matrix, and the target's verdict.
fn print_plain_summary(summary: &[(String, Vec<f64>)]) {
    println!(
        "\n  fused vs plain loop: speed of the fused step as % of the plain loop's (median over \
         rounds of plain time / fused time; target >= 95%)"
    );
    let mut header = format!("  {:<14}", "rule");
    for (rows, cols) in MATRICES {
        header += &format!(" {:>10}", format!("{rows}x{cols}"));
    }
    println!("{header}");
    let mut worst = f64::INFINITY;
    for (rule, ratios) in summary {
        let mut line = format!("  {rule:<14}");
        for r in ratios {
            worst = worst.min(*r);
            line += &format!(" {:>9.0}%", 100.0 * r);
        }
        println!("{line}");
    }
    println!(
        "  fused >= 95% of the plain loop (all rows): {:.0}% -> {}",
        100.0 * worst,
        verdict(worst >= PLAIN_TARGET)
    );
}

/// The shape `(m, n)` Newton-Schulz iterates on (`m <= n`).
fn working(rows: usize, cols: usize) -> (usize, usize) {
    (rows.min(cols), rows.max(cols))
}

/// FLOPs of the products of `steps` Newton-Schulz iterations on an `m`x`n` matrix: `X Xᵀ`
/// (`2 m n m`), `(c A) A` (`2 m³`) and `B X` (`2 m m n`) each.
fn ns_flops(m: usize, n: usize, steps: u32) -> f64 {
    let (m, n) = (m as f64, n as f64);
    f64::from(steps) * (4.0 * m * m * n + 2.0 * m * m * m)
}

/// The operands of the GEMM-alone variant: the products of one Newton-Schulz iteration on
/// fixed matrices (`x` normalised, `gram` and `scaled` from it), into buffers of their own.
struct Products {
    m: usize,
    n: usize,
    x: AlignedFloats,
    gram: AlignedFloats,
    scaled: AlignedFloats,
    square: AlignedFloats,
    wide: AlignedFloats,
    workspace: AlignedFloats,
}

impl Products {
    fn new(x: &[f32], m: usize, n: usize) -> Self {
        let workspace = workspace_len(m, n, m)
            .max(workspace_len(m, m, m))
            .max(workspace_len(m, m, n));
        let mut p = Products {
            m,
            n,
            x: AlignedFloats::zeros(m * n),
            gram: AlignedFloats::zeros(m * m),
            scaled: AlignedFloats::zeros(m * m),
            square: AlignedFloats::zeros(m * m),
            wide: AlignedFloats::zeros(m * n),
            workspace: AlignedFloats::zeros(workspace),
        };
        p.x.copy_from_slice(x);
        p.iterate();
        let c = Muon::default().muon_c;
        for (s, &a) in p.scaled.iter_mut().zip(p.gram.iter()) {
            *s = c * a;
        }
        p
    }

    /// The three products of one iteration: `A = X Xᵀ`, `(c A) A` and `A X`.
    fn iterate(&mut self) {
        let (m, n) = (self.m, self.n);
        let x = MatRef::row_major(&self.x, m, n);
        let c = MatMut::row_major(&mut self.gram, m, m);
        gemm(1.0, x, x.t(), 0.0, c, &mut self.workspace);
        let gram = MatRef::row_major(&self.gram, m, m);
        let scaled = MatRef::row_major(&self.scaled, m, m);
        let c = MatMut::row_major(&mut self.square, m, m);
        gemm(1.0, scaled, gram, 0.0, c, &mut self.workspace);
        let c = MatMut::row_major(&mut self.wide, m, n);
        gemm(1.0, gram, x, 0.0, c, &mut self.workspace);
    }
}

/// A `rows` x `cols` matrix divided by its Frobenius norm, as Muon hands it to Newton-Schulz.
fn normalised(rows: usize, cols: usize) -> AlignedFloats {
    let mut x = buffer(rows * cols, 5);
    let norm = x
        .iter()
        .map(|v| f64::from(*v) * f64::from(*v))
        .sum::<f64>()
        .sqrt();
    x.iter_mut()
        .for_each(|v| *v = (f64::from(*v) / norm) as f32);
    x
}

/// Runs `f` inside `pool` when given, else on the calling thread (the global pool's).
fn on(pool: Option<&rayon::ThreadPool>, f: impl FnOnce() + Send) {
    match pool {
        Some(pool) => pool.install(f),
        None => f(),
    }
}

/// The variants of one matrix of the Newton-Schulz table on `pool`'s threads (the global
/// pool's without one): the GEMM alone on the products, the iteration (its input copied in
/// first, `m n` floats), and whole Muon steps fused and plain.
fn ns_variants<'a>(
    (rows, cols): (usize, usize),
    pool: Option<&'a rayon::ThreadPool>,
    input: &'a [f32],
    g: &'a [f32],
) -> Vec<Variant<'a>> {
    let (m, n) = working(rows, cols);
    let k = Coefficients {
        a: 3.4445,
        b: -4.775,
        c: 2.0315,
    };
    let mut products = Products::new(input, m, n);
    let gemm_alone = Variant::new("gemm, the same products", move || {
        on(pool, || (0..NS_STEPS).for_each(|_| products.iterate()))
    });
    let mut x = AlignedFloats::zeros(rows * cols);
    let mut work = AlignedFloats::zeros(newton_schulz_work(rows, cols));
    let iteration = Variant::new("newton_schulz", move || {
        on(pool, || {
            x.copy_from_slice(input);
            newton_schulz(black_box(&mut x), rows, cols, NS_STEPS, k, &mut work);
        })
    });
    let (_, _, muon) = rules(NS_STEPS as f32);
    let shape = [Shape::matrix(rows, cols)];
    let mut opt = Optimizer::with_shapes(muon, &shape, Config::default());
    let mut plain = PlainMuon::new(muon, rows, cols);
    let (mut pf, mut pp) = (buffer(rows * cols, 2), buffer(rows * cols, 2));
    let fused = Variant::new("muon step fused", move || {
        on(pool, || opt.step(black_box(&mut pf), black_box(g)))
    });
    let plain = Variant::new("muon step plain", move || {
        on(pool, || plain.step(black_box(&mut pp), black_box(g)))
    });
    vec![gemm_alone, iteration, fused, plain]
}

/// Times Newton-Schulz against the GEMM alone on each of [`NS_MATRICES`], on 1 and 2 threads,
/// and prints the table.
fn newton_schulz_against_gemm() {
    println!(
        "\nMuon's Newton-Schulz ({NS_STEPS} steps) against the GEMM on the same products \
         (A = X Xᵀ, (c A) A, B X per step), and whole Muon steps (keras::Muon); one call a sample"
    );
    let pool1 = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("a one-thread pool");
    let mut worst = f64::INFINITY;
    for (rows, cols) in NS_MATRICES {
        let (m, n) = working(rows, cols);
        let flops = ns_flops(m, n, NS_STEPS);
        let input = normalised(rows, cols);
        let g = buffer(rows * cols, 1);
        for (threads, pool) in [(1, Some(&pool1)), (2, None)] {
            let mut vs = ns_variants((rows, cols), pool, &input, &g);
            measure(&mut vs, 1);
            let ratio = speed_ratio(&vs[1], &vs[0]);
            let muon_ratio = speed_ratio(&vs[2], &vs[3]);
            worst = worst.min(ratio);
            println!(
                "\n  {rows}x{cols} (iterated as {m}x{n}), {threads} thread(s), {:.2} GFLOP of products",
                flops / 1e9
            );
            println!(
                "  {:<26} {:>20} {:>12} {:>9}",
                "variant", "ms/call med (best)", "GFLOP/s med", "ratio"
            );
            for (i, v) in vs.iter().enumerate() {
                let (med, best) = stats(v);
                let cell = match i {
                    1 => format!("{:>8.0}% of gemm", 100.0 * ratio),
                    2 => format!("{:>8.0}% of plain", 100.0 * muon_ratio),
                    _ => String::new(),
                };
                println!(
                    "  {:<26} {:>9.2} ({:>8.2}) {:>12.1} {cell}",
                    v.name,
                    med * 1e3,
                    best * 1e3,
                    flops / med / 1e9,
                );
            }
        }
    }
    println!(
        "\n  newton_schulz >= 80% of the GEMM's rate on the same products (all rows): {:.0}% -> {}",
        100.0 * worst,
        verdict(worst >= GEMM_TARGET)
    );
}
