//! scratch
use fusegraph_runtime::kernels::gemm::{self as fg, MatMut, MatRef};
use std::hint::black_box;
use std::time::Instant;

const REPS: usize = 15;
const SAMPLE_FLOPS: f64 = 4e7;

fn value(i: usize, salt: u64) -> f32 {
    let mut x = (i as u64 ^ salt).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 29;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 32;
    let u = (x >> 40) as f32 / (1u64 << 24) as f32;
    let sign = if x & 1 == 0 { 1.0 } else { -1.0 };
    sign * (0.1 + u)
}

#[derive(Clone, Copy)]
struct Shape {
    name: &'static str,
    m: usize,
    k: usize,
    n: usize,
    ta: bool,
    tb: bool,
}

struct Bufs {
    a: Vec<f32>,
    b: Vec<f32>,
    c: Vec<f32>,
    ws: Vec<f32>,
}

fn views<'a>(s: &Shape, a: &'a [f32], b: &'a [f32]) -> (MatRef<'a>, MatRef<'a>) {
    let a = if s.ta {
        MatRef::row_major(a, s.k, s.m).t()
    } else {
        MatRef::row_major(a, s.m, s.k)
    };
    let b = if s.tb {
        MatRef::row_major(b, s.n, s.k).t()
    } else {
        MatRef::row_major(b, s.k, s.n)
    };
    (a, b)
}

type Run = Box<dyn FnMut(&Shape, &mut Bufs) + Send>;

fn main() {
    if std::env::var("TILE").is_ok() {
        macro_rules! tb {
            ($r:literal, $v:literal) => {{
                let kc = 256;
                let a: Vec<f32> = (0..kc * $r).map(|i| value(i, 3) * 1e-3).collect();
                let b: Vec<f32> = (0..kc * $v * 8).map(|i| value(i, 4) * 1e-3).collect();
                let mut out = vec![0.0f32; $r * $v * 8];
                let iters = 20000;
                let mut best = f64::MAX;
                for _ in 0..10 {
                    let t = Instant::now();
                    for _ in 0..iters {
                        fg::__tile::<$r, $v>(black_box(&a), black_box(&b), &mut out);
                    }
                    best = best.min(t.elapsed().as_secs_f64());
                }
                println!(
                    "tile {}x{}: {:.1} GFLOP/s",
                    $r,
                    $v * 8,
                    2.0 * (kc * $r * $v * 8 * iters) as f64 / best / 1e9
                );
            }};
        }
        tb!(6, 2);
        tb!(8, 2);
        tb!(12, 2);
        tb!(14, 2);
        tb!(8, 3);
        tb!(4, 3);
        tb!(16, 1);
        tb!(4, 4);
        tb!(6, 4);
        tb!(7, 4);
        return;
    }
    let sh = |name, m, k, n, ta, tb| Shape {
        name,
        m,
        k,
        n,
        ta,
        tb,
    };
    let mut shapes = Vec::new();
    for bsz in [256usize, 32] {
        shapes.push(sh("X.W1", bsz, 784, 128, false, false));
        shapes.push(sh("Xt.dH", 784, bsz, 128, true, false));
        shapes.push(sh("dH.W1t", bsz, 128, 784, false, true));
        shapes.push(sh("H.W2", bsz, 128, 10, false, false));
        shapes.push(sh("Ht.dY", 128, bsz, 10, true, false));
        shapes.push(sh("dY.W2t", bsz, 10, 128, false, true));
    }
    shapes.push(sh("t X.W1", 8, 8, 16, false, false));
    shapes.push(sh("t H.W2", 8, 16, 4, false, false));
    shapes.push(sh("t Ht.dY", 16, 8, 4, true, false));
    shapes.push(sh("t dY.W2t", 8, 4, 16, false, true));
    let mut variants: Vec<(&str, Run)> = vec![
        (
            "mm",
            Box::new(|s: &Shape, bf: &mut Bufs| {
                let (a, b) = views(s, &bf.a, &bf.b);
                unsafe {
                    matrixmultiply::sgemm(
                        s.m,
                        s.k,
                        s.n,
                        1.0,
                        bf.a.as_ptr(),
                        a.row_stride() as isize,
                        a.col_stride() as isize,
                        bf.b.as_ptr(),
                        b.row_stride() as isize,
                        b.col_stride() as isize,
                        0.0,
                        bf.c.as_mut_ptr(),
                        s.n as isize,
                        1,
                    );
                }
            }),
        ),
        (
            "fg",
            Box::new(|s: &Shape, bf: &mut Bufs| {
                let (a, b) = views(s, &bf.a, &bf.b);
                fg::gemm(
                    1.0,
                    a,
                    b,
                    0.0,
                    MatMut::row_major(&mut bf.c, s.m, s.n),
                    &mut bf.ws,
                );
            }),
        ),
    ];
    macro_rules! exp {
        ($name:expr, $r:literal, $v:literal, $mc:expr, $nc:expr, $pa:expr, $tr:expr) => {
            variants.push((
                $name,
                Box::new(|s: &Shape, bf: &mut Bufs| {
                    let (a, b) = views(s, &bf.a, &bf.b);
                    let c = MatMut::row_major(&mut bf.c, s.m, s.n);
                    if $tr {
                        fg::__experiment::<$r, $v>(
                            1.0,
                            b.t(),
                            a.t(),
                            0.0,
                            c.t(),
                            &mut bf.ws,
                            $mc,
                            $nc,
                            $pa,
                        );
                    } else {
                        fg::__experiment::<$r, $v>(1.0, a, b, 0.0, c, &mut bf.ws, $mc, $nc, $pa);
                    }
                }),
            ));
        };
    }
    exp!("pk", 6, 2, 192, 1024, true, false);
    exp!("up", 6, 2, 192, 1024, false, false);
    exp!("pkT", 6, 2, 192, 1024, true, true);
    exp!("upT", 6, 2, 192, 1024, false, true);
    exp!("sm", 4, 2, 0, 1024, false, false);
    exp!("smT", 4, 2, 0, 1024, false, true);

    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    pool.install(|| {
        for s in &shapes {
            let s = &Shape { name: s.name, ..*s };
            let mut bf = Bufs {
                a: (0..s.m * s.k).map(|i| value(i, 1)).collect(),
                b: (0..s.k * s.n).map(|i| value(i, 2)).collect(),
                c: vec![0.0; s.m * s.n],
                ws: vec![0.0; 4 * (s.m.max(s.n) + 64) * (s.k + 8) + 100_000],
            };
            let flops = 2.0 * (s.m * s.k * s.n) as f64;
            let iters = ((SAMPLE_FLOPS / flops) as usize).max(1);
            let mut times = vec![Vec::new(); variants.len()];
            if let Ok(only) = std::env::var("ONLY") {
                let (sn, vn) = only.split_once('/').unwrap();
                if !s.name.contains(sn) {
                    continue;
                }
                let (_, run) = variants.iter_mut().find(|(n, _)| *n == vn).unwrap();
                for _ in 0..iters * 50 {
                    run(s, &mut bf);
                    black_box(&mut bf.c);
                }
                continue;
            }
            for _ in 0..REPS {
                for (vi, (name, run)) in variants.iter_mut().enumerate() {
                    if (name.starts_with("sm") && !name.ends_with('T') && (s.k > 256 || s.n > 16))
                        || (name.starts_with("sm")
                            && name.ends_with('T')
                            && (s.k > 256 || s.m > 16))
                    {
                        continue;
                    }
                    let t = Instant::now();
                    for _ in 0..iters {
                        run(s, &mut bf);
                        black_box(&mut bf.c);
                    }
                    times[vi].push(t.elapsed().as_secs_f64() / iters as f64);
                }
            }
            print!("{:20}", s.name);
            for (vi, (name, _)) in variants.iter().enumerate() {
                let t = &mut times[vi];
                if t.is_empty() {
                    continue;
                }
                t.sort_by(|a, b| a.partial_cmp(b).unwrap());
                print!(
                    " {}={:.1}/{:.1}",
                    name,
                    flops / t[REPS / 2] / 1e9,
                    flops / t[0] / 1e9
                );
            }
            println!();
        }
    });
}
