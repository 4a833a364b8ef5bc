//! Code generation: the unit struct with its constants, two lane functions (the value; the
//! value and the derivative, sharing their common sub-expressions) and the `Loss`
//! implementation that hands them to the runtime's one-pass lane loop.

use super::check::{Checked, Reduce, PRED, TARGET};
use super::parse::Def;
use crate::constants;
use crate::expr::emit;
use crate::expr::ir::{self, Ref, TExpr};
use crate::paths;
use proc_macro2::TokenStream;
use quote::{format_ident, quote};

/// The struct and its constants: shared by the real and the fallback expansion.
fn header(def: &Def, values: &[f64]) -> TokenStream {
    let items = constants::items(&def.consts, values, const_ident, |_, c| {
        let documented = c.attrs.iter().any(|a| a.path().is_ident("doc"));
        (!documented).then(|| format!("The constant `{}` of this loss.", c.name))
    });
    constants::header(&def.attrs, &def.vis, &def.name, false, &items)
}

/// The loss's `describe`: its name and constants.
fn describe(def: &Def) -> TokenStream {
    let name = def.name.to_string();
    constants::describe(quote!(out.write_str(#name)?;), &def.consts, const_ident)
}

/// `delta` becomes `DELTA`.
pub(super) fn const_ident(name: &syn::Ident) -> syn::Ident {
    format_ident!("{}", name.to_string().to_uppercase())
}

/// What the failed definition still provides, so that one mistake gives one error.
pub fn fallback(def: &Def) -> TokenStream {
    let head = header(def, &vec![0.0; def.consts.len()]);
    let name = &def.name;
    let p = paths::private();
    let describe = describe(def);
    quote! {
        #head
        const _: () = {
            impl #p::Loss for #name {
                type Target = f32;
                #describe
                fn targets_per_sample(n: usize) -> usize { n }
                fn loss_and_grad(_: &[f32], _: &[f32], _: &mut [f32], _: usize) -> f32 { 0.0 }
                fn loss(_: &[f32], _: &[f32], _: usize) -> f32 { 0.0 }
                fn correct(_: &[f32], _: &[f32], _: usize) -> ::core::option::Option<usize> {
                    ::core::option::Option::None
                }
            }
        };
    }
}

/// The lane type parameter of the generated lane functions.
fn lane_type() -> TokenStream {
    quote!(__L)
}

/// The statements and result of a lane function returning `outs`, over lanes of type
/// [`lane_type`].
fn lane_body(def: &Def, outs: &[&TExpr]) -> TokenStream {
    let f = lane_type();
    let name = &def.name;
    let mut used = vec![false; def.consts.len()];
    for e in outs {
        ir::visit_refs(e, &mut |r| {
            if let Ref::Hyper(i) = r {
                used[i] = true;
            }
        });
    }
    let consts = def
        .consts
        .iter()
        .zip(used)
        .enumerate()
        .filter(|(_, (_, u))| *u)
        .map(|(i, (c, _))| {
            let local = format_ident!("__k{}", i);
            let id = const_ident(&c.name);
            quote!(let #local: #f = #f::splat(#name::#id);)
        });
    let refs = |r: Ref| match r {
        PRED => quote!(__pred),
        TARGET => quote!(__target),
        Ref::Hyper(i) => {
            let local = format_ident!("__k{}", i);
            quote!(#local)
        }
        _ => unreachable!("a loss reads its prediction, its target and its constants"),
    };
    let (stmts, values) = emit::lanes_shared(outs, &f, &refs);
    let result = match values.as_slice() {
        [v] => quote!(#v),
        vs => quote!((#(#vs),*)),
    };
    quote! {
        #(#consts)*
        #(#stmts)*
        #result
    }
}

pub fn loss(def: &Def, c: &Checked) -> TokenStream {
    let head = header(def, &c.consts);
    let name = &def.name;
    let p = paths::private();
    let f = lane_type();
    let reduce = match c.reduce {
        Reduce::Mean => quote!(#p::Reduce::Mean),
        Reduce::Sum => quote!(#p::Reduce::Sum),
    };
    let describe = describe(def);
    let value = lane_body(def, &[&c.value]);
    let value_and_grad = lane_body(def, &[&c.value, &c.grad]);
    quote! {
        #head

        const _: () = {
            #[allow(unused_parens, clippy::all)]
            impl #p::LaneLoss for #name {
                #[inline(always)]
                fn value<#f: #p::Lane>(__pred: #f, __target: #f) -> #f {
                    #value
                }
                #[inline(always)]
                fn value_and_grad<#f: #p::Lane>(__pred: #f, __target: #f) -> (#f, #f) {
                    #value_and_grad
                }
            }

            impl #p::Loss for #name {
                type Target = f32;
                #describe
                fn targets_per_sample(n: usize) -> usize {
                    n
                }
                fn loss_and_grad(pred: &[f32], target: &[f32], grad: &mut [f32], n: usize) -> f32 {
                    #p::lanes_loss_and_grad::<Self>(pred, target, grad, n, #reduce)
                }
                fn loss(pred: &[f32], target: &[f32], n: usize) -> f32 {
                    #p::lanes_loss::<Self>(pred, target, n, #reduce)
                }
                fn correct(_: &[f32], _: &[f32], _: usize) -> ::core::option::Option<usize> {
                    ::core::option::Option::None
                }
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loss::check::check;

    #[test]
    fn value_and_gradient_share_sub_expressions() {
        let def: Def =
            syn::parse_str("pub LogCosh(pred, target) = ln(cosh(pred - target));").expect("parses");
        let c = check(&def).expect("checks");
        let body = lane_body(&def, &[&c.value, &c.grad]).to_string();
        assert_eq!(body.matches("__pred - __target").count(), 1, "{body}");
    }
}
