//! `#[model]`: parse the struct and its attribute, check the wiring (shape inference with
//! spanned errors), expand into an owning struct and an implementation of the runtime's `Model`.

mod check;
mod expand;
mod parse;
mod shapes;

use proc_macro2::TokenStream;

pub fn expand(attr: TokenStream, item: TokenStream) -> TokenStream {
    let def = match parse::parse(attr, item) {
        Ok(def) => def,
        Err(e) => return e.to_compile_error(),
    };
    match check::check(&def) {
        Ok(net) => expand::model(&def, &net),
        Err(e) => {
            let mut out = e.to_compile_error();
            out.extend(expand::fallback(&def));
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use quote::quote;

    /// The lines of the README's two-layer model's expansion, pretty-printed. The same count on
    /// the commit before the one step engine (57d9d53), which generated `backward_update`
    /// beside `backward`, is 418; 323 with one backward pass, and 335 once the private module's
    /// path became the versioned `__private_0_1`, whose longer name wraps a few more lines;
    /// 364 with token inputs (the `Input` type, the input carried as `f32` in forward and
    /// backward) and each layer's `finish_init` call; 379 with the table of layer kinds that
    /// checkpoints record; 380 with `VOCAB`, the token ids the model reads.
    const README_MODEL_LINES: usize = 380;

    /// The README's model expands to at most [`README_MODEL_LINES`] lines, with one forward
    /// and one backward pass.
    #[test]
    fn the_readme_model_expands_to_few_lines() {
        let expanded = super::expand(
            quote!(loss = SoftmaxCrossEntropy),
            quote! {
                struct Digits {
                    hidden: Dense<64, 128, Relu>,
                    out: Dense<128, 10>,
                }
            },
        );
        let file: syn::File = syn::parse2(expanded).expect("the expansion is items");
        let pretty = prettyplease::unparse(&file);
        let lines = pretty.lines().count();
        assert!(
            lines <= README_MODEL_LINES,
            "the README's model expands to {lines} lines, more than {README_MODEL_LINES}:\n{pretty}"
        );
        let count = |s: &str| pretty.matches(s).count();
        assert_eq!(count("fn forward"), 1, "{pretty}");
        assert_eq!(count("fn backward"), 1, "{pretty}");
        assert_eq!(count("backward_update"), 0, "{pretty}");
    }
}
