//! Compile-fail tests: every misuse of the macros is a spanned error that says what to write.

#[test]
fn optimizer_mistakes() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/optimizer/*.rs");
}

#[test]
fn model_mistakes() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/model/*.rs");
}

/// Shape mistakes: sequence lengths, widths, heads, tables, paddings and sizes, each one error
/// at the field, naming both sizes and the type to write.
#[test]
fn shape_mistakes() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/shapes/*.rs");
}

#[test]
fn embedded_mistakes() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/embedded/*.rs");
}

#[test]
fn loss_mistakes() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/loss/*.rs");
}

#[test]
fn activation_mistakes() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/activation/*.rs");
}

/// A step of batch `B = 0` fails when its constructor is compiled, which `cargo check` does
/// not reach: the passing case (the smallest batch) makes trybuild build every case.
#[test]
fn step_mistakes() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/step/batch_of_one.rs");
    t.compile_fail("tests/ui/step/zero_*.rs");
}
