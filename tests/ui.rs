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
