//! `activation!`: parse the definitions, check each into the IR and derive its derivative,
//! expand each into a zero-sized type implementing the runtime's `Elementwise`. A definition
//! with a mistake still gets its type (an identity), so that one mistake gives one error.

mod check;
mod expand;
mod parse;

use crate::constants::Definitions;
use crate::errors::Errors;
use proc_macro2::TokenStream;

pub fn expand(input: TokenStream) -> TokenStream {
    let defs = match syn::parse2::<parse::Defs>(input) {
        Ok(defs) => defs,
        Err(e) => return e.to_compile_error(),
    };
    let mut errs = Errors::default();
    let mut out = TokenStream::new();
    let mut names = Definitions::default();
    for def in &defs.0 {
        if let Err(e) = names.add(&def.name) {
            // The first definition provides the type: this one expands to nothing.
            errs.push(e);
            continue;
        }
        let checked = def
            .body
            .as_ref()
            .map_err(Clone::clone)
            .and_then(check::check);
        match checked {
            Ok(c) => out.extend(expand::activation(def, &c)),
            Err(e) => {
                errs.push(e);
                out.extend(expand::fallback(def));
            }
        }
    }
    if let Err(e) = errs.finish() {
        out.extend(e.to_compile_error());
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::constants::tests::{errors, one_error_each};

    /// Each mistake in a definition is one error, naming it; a method on a literal and a
    /// negative literal exponent are accepted.
    #[test]
    fn each_mistake_is_one_error() {
        let cases: &[(&str, &str)] = &[
            ("A(x) = f64(x);", "f64"),
            ("A(x) = if f64(x) > 0.0 { x } else { x };", "f64"),
            ("A(x) = x * 1e39;", "does not fit"),
            ("A(x) = x * 99999999999999999999;", "too large"),
            ("A { a: f32 = 1e39 } (x) = a * x;", "number literal"),
            ("A(x) = ;", "expected an expression"),
            ("A(x) = {};", "one expression"),
            ("A() = x;", "identifier"),
            ("A { x: f32 = 1.0 } (x) = x;", "already"),
            ("A[x = 1.0](x) = x;", "already"),
            ("A { k: f32 = 2.0 } (x) = x.powi(k);", "integer literal"),
            ("A(x) = x.powi(1 + 1);", "integer literal"),
            ("A(x) = x.powi(2.5);", "integer exponent"),
            ("A(x) = x.powi(100000);", "at most 64"),
            ("A(x) = x.powi(-2147483648);", "at most 64"),
            ("A(x) = x.powi(x);", "powi"),
            ("A(x) = exp();", "1 argument"),
            ("A(x) = x.clamp(1.0);", "3 argument"),
            ("A(x) = x % 2.0;", "not in the expression language"),
            ("A(x) = if x > 0.0 { x };", "else"),
            ("A { a: f32 = 1.0, A: f32 = 2.0 } (x) = a * A * x;", "`A`"),
            (
                "A { ab_c: f32 = 1.0, abC: f32 = 2.0 } (x) = ab_c * abC * x;",
                "AB_C",
            ),
            ("A(x) = x; A(x) = x * x;", "already defined"),
            ("A(x) = x +; B(x) = x;", "expected an expression"),
        ];
        one_error_each(super::expand, cases);
        // Accepted: a method on a literal is a scalar like any other; a negative literal
        // exponent multiplies.
        for src in [
            "A(x) = 2.0.sqrt() * x;",
            "A(x) = x.powi(-3);",
            "A(x) = x.powi(-(64));",
        ] {
            let out = super::expand(src.parse().expect("tokens"));
            assert!(errors(&out).is_empty(), "{src}: {out}");
        }
        let out = super::expand("A(x) = x.powi(-3);".parse().unwrap()).to_string();
        assert!(!out.contains("powf"), "{out}");
    }
}
