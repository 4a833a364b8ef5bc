//! `#[model]`: parse the struct and its attribute, check the wiring (shape inference with
//! spanned errors), expand into an owning struct and an implementation of the runtime's `Model`.

mod check;
mod expand;
mod parse;
mod shapes;
mod weights;

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
    use crate::constants::tests::errors;
    use quote::quote;

    /// Each mistake in a graph is one error, naming it: a node with a mistake, or an unknown
    /// name, is read again without a second error, and nothing is called unused after one.
    #[test]
    fn each_graph_mistake_is_one_error() {
        let cases: &[(&str, &str)] = &[
            (
                "h = fc1(x).relu(), r = fc2(z) + h, y = head(r)",
                "unknown node `z`",
            ),
            (
                "h = fc1(z).relu(), r = fc2(h) + h, y = head(r + z)",
                "unknown node `z`",
            ),
            ("h = fc1(x).mish(), r = fc2(h) + h, y = head(r)", "`mish`"),
            (
                "h = fc1(x).relu(7), r = fc2(h) + h, y = head(r)",
                "no arguments",
            ),
            (
                "h = fc1(x).relu(), r = fc2(h) - h, y = head(r)",
                "a graph node is",
            ),
            ("h = fc1(x, x), r = fc2(h) + h, y = head(r)", "one node"),
            (
                "h = fc9(x), r = fc2(h) + h, y = head(r)",
                "not a layer of this model",
            ),
            (
                "h = fc1(x), r = concat(h), y = head(r)",
                "`concat` joins two",
            ),
            ("h = fc1(x), h = fc2(h), y = head(h)", "defined twice"),
            (
                "h = fc1(x).relu(), r = fc2(h) + h, y = head(r).mish()",
                "`mish`",
            ),
        ];
        for (graph, words) in cases {
            let attr: proc_macro2::TokenStream =
                format!("loss = SoftmaxCrossEntropy, graph({graph})")
                    .parse()
                    .expect("tokens");
            let out = super::expand(
                attr,
                quote! {
                    struct ResMlp {
                        fc1: Dense<64, 64>,
                        fc2: Dense<64, 64>,
                        head: Dense<64, 10>,
                    }
                },
            );
            let errs = errors(&out);
            assert_eq!(errs.len(), 1, "{graph}: {errs:?}");
            assert!(errs[0].contains(words), "{graph}: {errs:?}");
        }
    }

    /// The lines of the README's two-layer model's expansion, pretty-printed. The same count on
    /// the commit before the one step engine (57d9d53), which generated `backward_update`
    /// beside `backward`, is 418; 323 with one backward pass, and 335 once the private module's
    /// path became the versioned `__private_0_1`, whose longer name wraps a few more lines;
    /// 364 with token inputs (the `Input` type, the input carried as `f32` in forward and
    /// backward) and each layer's `finish_init` call; 379 with the table of layer kinds that
    /// checkpoints record; 380 with `VOCAB`, the token ids the model reads; 365 once the input
    /// goes to the layers that read it as it is, without an `f32` copy; 394 with frozen
    /// tensors (each layer's frozen mask, its offsets in the trainable tensors' buffers and the
    /// tensor table, its place for the gradient sink); 401 with `STEPS`, the sequence length
    /// whose lengths the layers honour; 404 with the vocabulary of token ids carried as `f32`
    /// (`Layer::IDS` of the layers that read the input).
    const README_MODEL_LINES: usize = 404;

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
