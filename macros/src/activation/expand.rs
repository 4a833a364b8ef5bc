//! Code generation: the unit struct, its constants, and its `Elementwise` implementation with
//! the forward and derivative lane code; with learnable parameters, a struct generic over the
//! feature count implementing `Layer`, whose lane code also gives the parameters' gradients.

use super::check::{Checked, Learned};
use super::parse::Def;
use crate::constants::{self, Const};
use crate::expr::emit;
use crate::expr::ir::{Ref, TExpr};
use crate::paths;
use proc_macro2::{Literal, TokenStream};
use quote::{format_ident, quote};

/// `LeakyRelu` -> `leaky_relu`, `GELUTanh` -> `gelu_tanh`.
fn snake_case(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if c.is_uppercase() && i > 0 {
            let prev = chars[i - 1];
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            if prev.is_lowercase() || prev.is_ascii_digit() || (prev.is_uppercase() && next_lower) {
                out.push('_');
            }
        }
        out.extend(c.to_lowercase());
    }
    out
}

/// Name of the associated constant for the constant `name`.
pub(super) fn const_ident(name: &syn::Ident) -> syn::Ident {
    format_ident!(
        "{}",
        snake_case(&name.to_string()).to_uppercase(),
        span = name.span()
    )
}

/// The constants of a definition (none when its body did not parse).
fn constants_of(def: &Def) -> &[Const] {
    def.body
        .as_ref()
        .map(|b| b.params.as_slice())
        .unwrap_or(&[])
}

/// The struct and its constants (with `values` and their text, or zeros in the fallback).
fn header(def: &Def, values: &[(f64, String)]) -> TokenStream {
    let params = constants_of(def);
    let numbers: Vec<f64> = values.iter().map(|(v, _)| *v).collect();
    let items = constants::items(params, &numbers, const_ident, |i, p| {
        Some(format!(
            "The constant `{}` of the definition (`{}`); another value is another definition.",
            p.name, values[i].1
        ))
    });
    constants::header(&def.attrs, &def.vis, &def.name, def.learnable, &items)
}

/// Name of the lane of learnable parameter `i` in the generated closures.
fn learnable_ident(i: usize) -> syn::Ident {
    format_ident!("__p{}", i)
}

/// The `Layer` implementation of a definition with learnable parameters: `learned` gives the
/// tensors' names and initial values, `lane` the forward closure's body (over `__x` and the
/// parameters' lanes), `grads` the backward closure's (also over `__y`), which returns
/// `(∂f/∂x, [∂f/∂p, ..])`.
fn layer(
    def: &Def,
    learned: &[(String, f64)],
    lane: TokenStream,
    grads: TokenStream,
) -> TokenStream {
    let name = &def.name;
    let f = lane_type();
    let p = paths::private();
    let l = paths::layers();
    let k = Literal::usize_unsuffixed(learned.len());
    let ps: Vec<syn::Ident> = (0..learned.len()).map(learnable_ident).collect();
    let kind = format!("{name}<{{}}>");
    let describe = constants::describe(
        quote!(::core::write!(out, #kind, N)?;),
        constants_of(def),
        const_ident,
    );
    let tensors = learned.iter().map(|(tname, v)| {
        let v = Literal::f32_suffixed(*v as f32);
        quote! {
            #l::Tensor {
                name: #tname,
                shape: &[N],
                fans: (N, N),
                init: #l::Init::constant(#v),
            }
        }
    });
    quote! {
        const _: () = {
            #[allow(unused_parens, clippy::all)]
            impl<const N: usize> #p::Layer for #name<N> {
                const IN: usize = N;
                const OUT: usize = N;
                const PARAMS: usize = #k * N;
                const STATE: usize = 0;
                const SAVED: usize = 0;
                const TENSORS: &'static [#l::Tensor] = &[#(#tensors),*];
                const FREEZABLE: bool = true;
                #describe
                fn forward(_: &mut #p::Ctx<'_>, __io: #l::Forward<'_>) {
                    #l::per_feature_forward::<Self, #k>(__io, N);
                }
                fn backward(_: &mut #p::Ctx<'_>, __io: #l::Backward<'_>) {
                    #l::per_feature_backward::<Self, #k>(__io, N);
                }
            }
            #[allow(unused_parens, clippy::all)]
            impl<const N: usize> #l::PerFeature<#k> for #name<N> {
                #[inline(always)]
                fn lane<#f: #p::Lane>(__x: #f, [#(#ps),*]: [#f; #k]) -> #f {
                    #lane
                }
                #[inline(always)]
                fn lane_grads<#f: #p::Lane>(
                    __x: #f,
                    __y: #f,
                    [#(#ps),*]: [#f; #k],
                ) -> (#f, [#f; #k]) {
                    #grads
                }
            }
        };
    }
}

/// The type parameter an element-wise activation's lane code is generic over.
fn lane_type() -> TokenStream {
    quote!(__L)
}

fn implementation(def: &Def, needs_z: bool, lane: TokenStream, grad: TokenStream) -> TokenStream {
    let name = &def.name;
    let snake = snake_case(&name.to_string());
    let f = lane_type();
    let p = paths::private();
    let params = constants_of(def);
    let describe = (!params.is_empty())
        .then(|| constants::describe(quote!(out.write_str(#snake)?;), params, const_ident));
    quote! {
        const _: () = {
            #[allow(unused_parens, clippy::all)]
            impl #p::Elementwise for #name {
                const NAME: &'static str = #snake;
                const NEEDS_Z: bool = #needs_z;
                #describe
                #[inline(always)]
                fn lane<#f: #p::Lane>(__x: #f) -> #f {
                    #lane
                }
                #[inline(always)]
                fn lane_grad<#f: #p::Lane>(__z: #f, __y: #f) -> #f {
                    #grad
                }
            }
        };
    }
}

/// What a definition with a mistake still provides: its type, as an identity (with its
/// learnable parameters, initialized to 0, when the brackets parsed).
pub fn fallback(def: &Def) -> TokenStream {
    let params = def.body.as_ref().map(|b| b.params.len()).unwrap_or(0);
    let head = header(def, &vec![(0.0, String::new()); params]);
    let f = lane_type();
    if def.learnable {
        let learned: Vec<(String, f64)> = def
            .body
            .as_ref()
            .ok()
            .and_then(|b| b.learnables.as_ref())
            .map_or(&[][..], |(_, l)| l)
            .iter()
            .map(|p| (p.name.to_string(), 0.0))
            .collect();
        let k = Literal::usize_unsuffixed(learned.len());
        let body = layer(
            def,
            &learned,
            quote!(__x),
            quote!((#f::ONE, [#f::ZERO; #k])),
        );
        return quote!(#head #body);
    }
    let l = lane_type();
    let body = implementation(def, false, quote!(__x), quote!(#l::ONE));
    quote!(#head #body)
}

/// A definition with learnable parameters: the forward lane code, and `∂f/∂x` with every
/// `∂f/∂p` computed together, each shared sub-expression once.
fn learnable(def: &Def, c: &Checked, consts: &dyn Fn(usize) -> TokenStream) -> TokenStream {
    let refs = |r: Ref| match r {
        Ref::Hyper(i) => consts(i),
        Ref::Out => quote!(__y),
        Ref::Var(0) => quote!(__x),
        Ref::Var(i) => {
            let p = learnable_ident(i - 1);
            quote!(#p)
        }
        _ => quote!(__x),
    };
    let f = lane_type();
    let (lets, out) = emit::lanes_shared(&[&c.forward], &f, &refs);
    let lane = quote!(#(#lets)* #(#out)*);
    let mut outputs: Vec<&TExpr> = vec![&c.grad];
    outputs.extend(c.learned.iter().map(|p| &p.grad));
    let (lets, out) = emit::lanes_shared(&outputs, &f, &refs);
    let (gx, gp) = (&out[0], &out[1..]);
    let grads = quote!(#(#lets)* (#gx, [#(#gp),*]));
    let learned: Vec<(String, f64)> = c
        .learned
        .iter()
        .map(|Learned { name, value, .. }| (name.clone(), *value))
        .collect();
    layer(def, &learned, lane, grads)
}

pub fn activation(def: &Def, c: &Checked) -> TokenStream {
    let values: Vec<(f64, String)> = c.consts.iter().map(|k| (k.value, k.text.clone())).collect();
    let head = header(def, &values);
    let params = constants_of(def);
    // Every activation runs on the dispatched lane type.
    let f = lane_type();
    let consts = |i: usize| {
        let id = const_ident(&params[i].name);
        quote!(#f::splat(Self::#id))
    };
    if def.learnable {
        let body = learnable(def, c, &consts);
        return quote!(#head #body);
    }
    let forward_refs = |r: Ref| match r {
        Ref::Hyper(i) => consts(i),
        _ => quote!(__x),
    };
    let grad_refs = |r: Ref| match r {
        Ref::Hyper(i) => consts(i),
        Ref::Out => quote!(__y),
        _ => quote!(__z),
    };
    let (lets, out) = emit::lanes_shared(&[&c.forward], &f, &forward_refs);
    let lane = quote!(#(#lets)* #(#out)*);
    let (lets, out) = emit::lanes_shared(&[&c.grad], &f, &grad_refs);
    let grad = quote!(#(#lets)* #(#out)*);
    let body = implementation(def, c.needs_z, lane, grad);
    quote!(#head #body)
}

#[cfg(test)]
mod tests {
    use super::snake_case;
    use crate::paths;
    use quote::quote;

    /// The expansion of Swish, token for token: sigmoid computed once, the derivative
    /// `s + y (1 - s)` reading the output `y` for `x * s`.
    #[test]
    fn swish_expands_to_the_hand_written_code() {
        let input: proc_macro2::TokenStream =
            "/// SiLU.\npub Swish(x) = x * sigmoid(x);".parse().unwrap();
        let l = paths::lane();
        let p = paths::private();
        let want = quote! {
            #[doc = " SiLU."]
            #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
            pub struct Swish;
            const _: () = {
                #[allow(unused_parens, clippy::all)]
                impl #p::Elementwise for Swish {
                    const NAME: &'static str = "swish";
                    const NEEDS_Z: bool = true;
                    #[inline(always)]
                    fn lane<__L: #p::Lane>(__x: __L) -> __L {
                        (__x * #l::sigmoid(__x))
                    }
                    #[inline(always)]
                    fn lane_grad<__L: #p::Lane>(__z: __L, __y: __L) -> __L {
                        let __t0: __L = #l::sigmoid(__z);
                        (__t0 + (__y * (__L::splat(1f32) - __t0)))
                    }
                }
            };
        };
        assert_eq!(
            crate::activation::expand(input).to_string(),
            want.to_string()
        );
    }

    /// The expansion of PReLU, token for token: a layer generic over its features, the
    /// comparison computed once for both derivatives.
    #[test]
    fn prelu_expands_to_a_per_feature_layer() {
        let input: proc_macro2::TokenStream =
            "/// PReLU.\npub PRelu[alpha = 0.25](x) = if x > 0.0 { x } else { alpha * x };"
                .parse()
                .unwrap();
        let f = quote!(__L);
        let p = paths::private();
        let l = paths::layers();
        let want = quote! {
            #[doc = " PReLU."]
            #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
            pub struct PRelu<const N: usize>;
            const _: () = {
                #[allow(unused_parens, clippy::all)]
                impl<const N: usize> #p::Layer for PRelu<N> {
                    const IN: usize = N;
                    const OUT: usize = N;
                    const PARAMS: usize = 1 * N;
                    const STATE: usize = 0;
                    const SAVED: usize = 0;
                    const TENSORS: &'static [#l::Tensor] = &[#l::Tensor {
                        name: "alpha",
                        shape: &[N],
                        fans: (N, N),
                        init: #l::Init::constant(0.25f32),
                    }];
                    const FREEZABLE: bool = true;
                    fn describe(out: &mut dyn ::core::fmt::Write) -> ::core::fmt::Result {
                        ::core::write!(out, "PRelu<{}>", N)?;
                        ::core::result::Result::Ok(())
                    }
                    fn forward(_: &mut #p::Ctx<'_>, __io: #l::Forward<'_>) {
                        #l::per_feature_forward::<Self, 1>(__io, N);
                    }
                    fn backward(_: &mut #p::Ctx<'_>, __io: #l::Backward<'_>) {
                        #l::per_feature_backward::<Self, 1>(__io, N);
                    }
                }
                #[allow(unused_parens, clippy::all)]
                impl<const N: usize> #l::PerFeature<1> for PRelu<N> {
                    #[inline(always)]
                    fn lane<#f: #p::Lane>(__x: #f, [__p0]: [#f; 1]) -> #f {
                        __x.simd_gt(#f::splat(0f32)).select(__x, (__p0 * __x))
                    }
                    #[inline(always)]
                    fn lane_grads<#f: #p::Lane>(
                        __x: #f,
                        __y: #f,
                        [__p0]: [#f; 1],
                    ) -> (#f, [#f; 1]) {
                        let __t0: #f = __x.simd_gt(#f::splat(0f32));
                        (
                            __t0.select(#f::splat(1f32), __p0),
                            [__t0.select(#f::splat(0f32), __x)]
                        )
                    }
                }
            };
        };
        assert_eq!(
            crate::activation::expand(input).to_string(),
            want.to_string()
        );
    }

    #[test]
    fn names_in_snake_case() {
        assert_eq!(snake_case("Swish"), "swish");
        assert_eq!(snake_case("LeakyRelu"), "leaky_relu");
        assert_eq!(snake_case("GELUTanh"), "gelu_tanh");
        assert_eq!(snake_case("Relu6"), "relu6");
    }
}
