//! Generated code names everything by absolute paths: user code that shadows prelude names
//! and math functions, under `#![deny(warnings)]`, still compiles and runs.
#![deny(warnings)]
#![allow(dead_code, non_camel_case_types, non_upper_case_globals)]

struct Option;
struct Result;
struct Some;
struct f32x8;
fn sqrt(_: ()) {}
fn powf() {}
mod core {}
mod fusegraph_runtime {}
const __v0: u8 = 0;

fusegraph::optimizer! {
    /// A rule that uses every kind of name the shadowing above could break.
    pub struct Shadowed {
        hyper { lr: f32 = 0.1, beta: f32 = 0.9, floor: f32 = 1e-3 }
        slots { m = 0.0, peak = floor }
        carry { product = 1.0 }
        step {
            product *= beta;
            let c = lr * (1.0 - beta.powi(t)).sqrt();
        }
        update {
            m = beta * m + (1.0 - beta) * g;
            peak = peak.max(g.abs());
            let d = if m > 0.0 { m.sqrt() } else { -(-m).sqrt() };
            p -= c * d / peak * (1.0 - product);
        }
    }
}

#[test]
fn shadowed_names_do_not_leak_into_generated_code() {
    use ::fusegraph::optim::Rule as _;
    let mut opt = ::fusegraph::optim::Optimizer::new(Shadowed::default(), &[9]);
    let mut p = [1.0_f32; 9];
    opt.step(&mut p, &[0.5; 9]);
    assert_eq!(opt.slot("peak").unwrap(), &[0.5; 9]);
    assert!(p[0] < 1.0);
    assert_eq!(Shadowed::SLOTS, &["m", "peak"]);
    let _ = (Option, Result, Some, f32x8, sqrt(()), powf(), __v0);
}
