//! `loss!`: parse the definitions, resolve each body into the typed IR and differentiate it by
//! the prediction, expand into a unit struct implementing the runtime's `Loss` with one lane
//! function for the value and one for the value and its gradient.

mod check;
mod expand;
mod parse;

use crate::constants::Definitions;
use proc_macro2::TokenStream;

pub fn expand(input: TokenStream) -> TokenStream {
    let defs = match syn::parse2::<parse::Defs>(input) {
        Ok(defs) => defs,
        Err(e) => return e.to_compile_error(),
    };
    let mut names = Definitions::default();
    let mut out = TokenStream::new();
    for (def, syntax) in &defs.0 {
        if let Err(e) = names.add(&def.name) {
            // The first definition provides the type: this one is its error alone.
            out.extend(e.to_compile_error());
            continue;
        }
        match syntax.clone().map_or_else(|| check::check(def), Err) {
            Ok(loss) => out.extend(expand::loss(def, &loss)),
            Err(e) => {
                out.extend(e.to_compile_error());
                out.extend(expand::fallback(def));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::constants::tests::{errors, one_error_each};

    /// Each mistake in a definition is one error, naming it; a definition that does not
    /// parse still defines its type, and the others are still checked.
    #[test]
    fn each_mistake_is_one_error() {
        let cases: &[(&str, &str)] = &[
            ("L(p, t) = f64(p - t);", "f64"),
            ("L(p, t) = { let d = f64(p); d };", "f64"),
            ("L(p, t) = p * 1e39;", "does not fit"),
            ("L(p, t) = ;", "expected an expression"),
            ("L(p, t) = {};", "ends with its value"),
            ("L(p, p) = p;", "already declared"),
            ("L(p, t) = { let p = t; p };", "already declared"),
            ("L(p, t) = { let d = e; let e = p; d };", "before its `let`"),
            ("L(p, t) = { let d: f64 = p - t; d * d };", "let name"),
            ("L(p, t) = { let (a, b) = (p, t); a - b };", "let name"),
            ("L(p, t) = { let d = foo(p); d * d };", "`foo`"),
            (
                "L { k: f32 = 2.0 } (p, t) = (p - t).powi(k);",
                "integer literal",
            ),
            ("L(p, t) = (p - t).powi(2.5);", "integer exponent"),
            ("L(p, t) = p.powi(100000);", "at most 64"),
            ("L(p, t) = p, reduce = sum, reduce = mean;", "twice"),
            ("L { k: f32 } (p, t) = p * k;", "needs a value"),
            (
                "L { k: f32 = 1.0, K: f32 = 2.0 } (p, t) = p * k * K;",
                "`K`",
            ),
            ("L(p, t) = p; L(p, t) = p * t;", "already defined"),
            ("L(p, t) = t;", "never reads"),
        ];
        one_error_each(super::expand, cases);
        // A syntax error in the first definition leaves the second checked and both types.
        let out = super::expand("L(p, t) = p +; M(p, t) = q;".parse().unwrap());
        assert_eq!(errors(&out).len(), 2, "{out}");
        let out = out.to_string();
        assert!(
            out.contains("struct L") && out.contains("struct M"),
            "{out}"
        );
    }
}
