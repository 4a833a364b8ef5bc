//! Code generation: the owning struct (flat parameter and state buffers), its constructor and
//! per-layer views, and the `Model` implementation whose forward and backward are flat,
//! one statement per node, so that generated code grows linearly with the model.

use super::check::{Net, Op, Src};
use super::parse::{Def, Frozen};
use crate::paths::{private as p, private_at};
use proc_macro2::{Ident, TokenStream};
use quote::{format_ident, quote, quote_spanned, ToTokens};

/// The struct alone, so that a model with a mistake still names a type (one error, not fifty):
/// parameters and state on the heap, or in `arrays` of that many values.
fn header(def: &Def, arrays: Option<(TokenStream, TokenStream)>) -> TokenStream {
    let (attrs, vis, name) = (&def.attrs, &def.vis, &def.name);
    let p = p();
    let (params, state) = match arrays {
        Some((params, state)) => (quote!([f32; #params]), quote!([f32; #state])),
        None => (quote!(#p::AlignedFloats), quote!(#p::AlignedFloats)),
    };
    quote! {
        #(#attrs)*
        #vis struct #name {
            __params: #params,
            __state: #state,
        }
    }
}

pub fn fallback(def: &Def) -> TokenStream {
    let p = p();
    let (name, vis) = (&def.name, &def.vis);
    // Empty arrays whatever the storage: they need neither an allocator nor the layer types.
    let head = header(def, Some((quote!(0), quote!(0))));
    let tys = def.fields.iter().map(|f| &f.ty);
    let loss = def.loss.iter();
    let zeroed = def.inline.then(|| {
        quote! {
            /// Not available: the model definition has errors.
            #[allow(dead_code)]
            #vis const fn zeroed() -> Self {
                ::core::unreachable!()
            }
        }
    });
    quote! {
        #head
        const _: ::core::marker::PhantomData<(#(#tys,)* #(#loss,)*)> = ::core::marker::PhantomData;
        impl #name {
            /// Not available: the model definition has errors.
            #[allow(dead_code)]
            #vis fn init(_: #p::Seed) -> Self {
                ::core::unreachable!()
            }

            /// Not available: the model definition has errors.
            #[allow(dead_code)]
            #vis fn init_in_place(&mut self, _: #p::Seed) {
                ::core::unreachable!()
            }

            #zeroed
        }
    }
}

/// A constant table `name: [ty; count]` built by `pushes` (each `let (__out, __at) = ..;`)
/// from an array of `empty`s.
fn table(
    name: TokenStream,
    ty: TokenStream,
    empty: TokenStream,
    count: TokenStream,
    pushes: impl Iterator<Item = TokenStream>,
) -> TokenStream {
    quote! {
        const #name: [#ty; #count] = {
            let __out = [#empty; #count];
            let __at = 0usize;
            #(#pushes)*
            let _ = __at;
            __out
        };
    }
}

fn sum(items: impl Iterator<Item = TokenStream>) -> TokenStream {
    let items: Vec<TokenStream> = items.collect();
    if items.is_empty() {
        quote!(0usize)
    } else {
        quote!(0usize #(+ #items)*)
    }
}

/// What the passes of [`model`] share: the definition, its checked network, the paths they
/// write, and the identifiers of the generated constants and slices.
struct Expansion<'a> {
    def: &'a Def,
    net: &'a Net,
    /// The facade's private module.
    p: TokenStream,
    /// The runtime's `Layer` trait.
    l: TokenStream,
    /// Each field's layer type, in declaration order.
    tys: Vec<&'a syn::Type>,
    /// `__O{i}`: where field `i`'s parameters start; the last one, where they end.
    o: Vec<Ident>,
    /// `__ST{i}`: where field `i`'s state starts; the last one, where it ends.
    st: Vec<Ident>,
    /// `__G{i}`: where field `i`'s trainable tensors start in the buffers of the trainable
    /// tensors (gradients, slots); the last one, where they end.
    g: Vec<Ident>,
    /// `__T{i}`: where field `i`'s tensors start in the tensor table; the last one, its length.
    t: Vec<Ident>,
    /// `__F{i}`: which of field `i`'s tensors are frozen.
    f: Vec<Ident>,
    /// `__AT{i}`: where field `i`'s tensors lie, for the gradient sink.
    at: Vec<Ident>,
    /// Whether some field has `#[frozen]`: the backward pass then calls only the nodes whose
    /// output gradient something needs.
    frozen: bool,
    /// `__y{k}`: node `k`'s output slice.
    y: Vec<Ident>,
    /// `__s{k}`: what node `k`'s layer saves for the backward pass.
    s: Vec<Ident>,
    /// `__d{k}`: the gradient of node `k`'s output.
    d: Vec<Ident>,
    /// Whether the input holds token ids (`input = u32`), which go to the layers that read
    /// them as they are.
    tokens: bool,
}

/// `prefix0`, `prefix1`, ... up to `prefix{count - 1}`.
fn idents(prefix: &str, count: usize) -> Vec<Ident> {
    (0..count)
        .map(|i| format_ident!("{}{}", prefix, i))
        .collect()
}

/// Which gradients the backward pass has written so far: the first contribution to a gradient
/// sets it, later ones add.
struct Given {
    nodes: Vec<bool>,
    x: bool,
}

impl<'a> Expansion<'a> {
    fn new(def: &'a Def, net: &'a Net) -> Self {
        let p = p();
        let l = quote!(#p::Layer);
        let (nf, nn) = (def.fields.len(), net.nodes.len());
        let tokens = match &def.input {
            Some(syn::Type::Path(t)) => !t.path.is_ident("f32"),
            other => other.is_some(),
        };
        Expansion {
            def,
            net,
            p,
            l,
            tys: def.fields.iter().map(|f| &f.ty).collect(),
            o: idents("__O", nf + 1),
            st: idents("__ST", nf + 1),
            g: idents("__G", nf + 1),
            t: idents("__T", nf + 1),
            f: idents("__F", nf),
            at: idents("__AT", nf),
            frozen: def.fields.iter().any(|f| f.frozen.is_some()),
            y: idents("__y", nn),
            s: idents("__s", nn),
            d: idents("__d", nn),
            tokens,
        }
    }

    /// Whether node `k` reads token ids: it reads the input of a model with `input = u32`.
    fn reads_ids(&self, k: usize) -> bool {
        self.tokens && self.net.nodes[k].inputs.contains(&Src::X)
    }

    /// A call of the `pass` (`forward` or `backward`) of layer `ty` at node `k` with `args`:
    /// `TokenLayer`'s pass over the ids when the node reads them, else `Layer`'s pass out of
    /// line (`forward_out_of_line`), so that a model's passes grow linearly with its layers.
    fn layer_call(&self, k: usize, ty: &syn::Type, pass: &str, args: TokenStream) -> TokenStream {
        let (p, l) = (&self.p, &self.l);
        if self.reads_ids(k) {
            let pass = format_ident!("{}_ids", pass);
            quote!(<#ty as #p::TokenLayer>::#pass(#args))
        } else {
            let pass = format_ident!("{}_out_of_line", pass);
            quote!(<#ty as #l>::#pass(#args))
        }
    }

    /// `__O{n}` and `__ST{n}`, for `n` fields: where the parameters and the state end.
    fn ends(&self) -> (&Ident, &Ident) {
        let n = self.tys.len();
        (&self.o[n], &self.st[n])
    }

    /// `0usize + <T as Layer>::item + ...` over the layer types `T`.
    fn sum_of(&self, item: TokenStream) -> TokenStream {
        let l = &self.l;
        sum(self.tys.iter().map(|ty| quote!(<#ty as #l>::#item)))
    }

    /// The largest `<T as Layer>::item` over the layer types `T` (at least 0).
    fn max_of(&self, item: TokenStream) -> TokenStream {
        let (p, l) = (&self.p, &self.l);
        self.tys.iter().fold(
            quote!(0usize),
            |acc, ty| quote!(#p::max(#acc, <#ty as #l>::#item)),
        )
    }

    /// Node `k`'s output width per sample.
    fn width(&self, k: usize) -> TokenStream {
        self.net.nodes[k].width.tokens.clone()
    }

    /// What node `k` saves per sample: its layer's `SAVED`, nothing for the other nodes.
    fn saved(&self, k: usize) -> TokenStream {
        match self.net.nodes[k].op {
            Op::Layer(f) => {
                let (ty, l) = (self.tys[f], &self.l);
                quote!(<#ty as #l>::SAVED)
            }
            _ => quote!(0usize),
        }
    }

    /// What a node reads: the input `x` or an earlier node's output.
    fn source(&self, src: Src) -> TokenStream {
        match src {
            Src::X => quote!(x),
            Src::Node(j) => {
                let yj = &self.y[j];
                quote!(&*#yj)
            }
        }
    }

    /// What node `k` reads, one source per input.
    fn inputs(&self, k: usize) -> Vec<TokenStream> {
        let inputs = &self.net.nodes[k].inputs;
        inputs.iter().map(|&i| self.source(i)).collect()
    }

    /// The struct, its parameter and state sizes spelled out when they are stored inline.
    fn header(&self) -> TokenStream {
        let sizes = self.def.inline.then(|| {
            (
                self.sum_of_buffered(quote!(PARAMS)),
                self.sum_of(quote!(STATE)),
            )
        });
        header(self.def, sizes)
    }

    /// Every layer type is a `Layer`, checked at the user's type; then the width equalities the
    /// macro could not decide.
    fn checks(&self) -> TokenStream {
        let layers = self.tys.iter().map(|ty| {
            let span = syn::spanned::Spanned::span(ty);
            let p = private_at(span);
            check(
                quote!(usize),
                quote_spanned!(span=> <#ty as #p::Layer>::OUT),
            )
        });
        let assertions = self.net.assertions.iter().map(|a| {
            let (left, right, msg) = (&a.left, &a.right, &a.message);
            let assert = quote_spanned!(a.span=> ::core::assert!(#left == #right, #msg));
            check(quote!(()), assert)
        });
        let (input, frozen) = (self.input_checks(), self.frozen_checks());
        quote! {
            #(#layers)*
            #(#assertions)*
            #input
            #frozen
        }
    }

    /// `input = T` with token ids: every node that reads the input is a layer that reads ids
    /// (`TokenLayer`), checked at its type. (`Model::Input`'s bound checks `T` itself, at the
    /// user's token.)
    fn input_checks(&self) -> TokenStream {
        let Some(ty) = &self.def.input else {
            return TokenStream::new();
        };
        let span = syn::spanned::Spanned::span(ty);
        let readers = self.net.nodes.iter().filter(|n| n.inputs.contains(&Src::X));
        let tokens = readers.filter(|_| self.tokens).map(|n| match n.op {
            Op::Layer(f) => {
                let ty = self.tys[f];
                let span = syn::spanned::Spanned::span(ty);
                let p = private_at(span);
                check(quote!(usize), quote_spanned!(span=> <#ty as #p::TokenLayer>::VOCAB))
            }
            _ => quote_spanned!(span=> ::core::compile_error!(
                "token ids go to a layer that reads them (`Embedding<VOCAB, DIM, SEQ>`) before any other node"
            );),
        });
        quote!(#(#tokens)*)
    }

    /// Parameter, state, gradient and tensor-table offsets and frozen masks, per field, in
    /// declaration order.
    fn offsets(&self) -> TokenStream {
        let (p, l, o, st, g, t) = (&self.p, &self.l, &self.o, &self.st, &self.g, &self.t);
        let per_field = self.tys.iter().enumerate().map(|(i, ty)| {
            let (o0, o1, s0, s1) = (&o[i], &o[i + 1], &st[i], &st[i + 1]);
            let (g0, g1, t0, t1, f) = (&g[i], &g[i + 1], &t[i], &t[i + 1], &self.f[i]);
            let mask = self.frozen_mask(i);
            let (params, tensors) = match self.static_source(i) {
                Some(_) => (quote!(0usize), quote!(0usize)),
                None => (
                    quote!(<#ty as #l>::PARAMS),
                    quote!(<#ty as #l>::TENSORS.len()),
                ),
            };
            // Without frozen tensors, the trainable tensors are the parameters.
            let g = if self.frozen {
                quote!(#g0 + #f.trainable_len(<#ty as #l>::TENSORS))
            } else {
                quote!(#o1)
            };
            quote! {
                const #o1: usize = #o0 + #params;
                const #s1: usize = #s0 + <#ty as #l>::STATE;
                const #f: #p::layers::Frozen = #mask;
                const #g1: usize = #g;
                const #t1: usize = #t0 + #tensors;
            }
        });
        let (o0, st0, g0, t0) = (&o[0], &st[0], &g[0], &t[0]);
        quote! {
            const #o0: usize = 0;
            const #st0: usize = 0;
            const #g0: usize = 0;
            const #t0: usize = 0;
            #(#per_field)*
        }
    }

    /// Field `i`'s frozen tensors, as the constant expression of a `Frozen` mask.
    fn frozen_mask(&self, i: usize) -> TokenStream {
        let (p, l, ty) = (&self.p, &self.l, self.tys[i]);
        match &self.def.fields[i].frozen {
            None => quote!(#p::layers::Frozen::NONE),
            Some(Frozen::Layer(_) | Frozen::Static(_) | Frozen::Torch { .. }) => {
                quote!(#p::layers::Frozen::all(<#ty as #l>::TENSORS.len()))
            }
            Some(Frozen::Tensors(names)) => {
                let names = names.iter().map(|n| n.to_string());
                quote!(#p::frozen_named(<#ty as #l>::TENSORS, &[#(#names),*]))
            }
        }
    }

    /// The `static` array field `i`'s parameters are read from (`#[frozen(static = ..)]` or
    /// `#[frozen(torch = ..)]`), if they are not in the parameter buffer.
    fn static_source(&self, i: usize) -> Option<TokenStream> {
        match &self.def.fields[i].frozen {
            Some(Frozen::Static(path)) => Some(quote!(#path)),
            Some(Frozen::Torch { .. }) => Some(format_ident!("__WEIGHTS{}", i).into_token_stream()),
            _ => None,
        }
    }

    /// Field `i`'s parameters in a pass: its `static`, or its part of the buffer `params`.
    fn params_of(&self, i: usize, params: TokenStream) -> TokenStream {
        match self.static_source(i) {
            Some(src) => quote!(&#src[..]),
            None => {
                let (o0, o1) = (&self.o[i], &self.o[i + 1]);
                quote!(&#params[#o0..#o1])
            }
        }
    }

    /// `<ty as Layer>::item` of each field whose tensors are in the parameter buffer, added
    /// up.
    fn sum_of_buffered(&self, item: TokenStream) -> TokenStream {
        let l = &self.l;
        let buffered = (0..self.tys.len()).filter(|&i| self.static_source(i).is_none());
        sum(buffered.map(|i| {
            let ty = self.tys[i];
            quote!(<#ty as #l>::#item)
        }))
    }

    /// The `static` arrays of `#[frozen(torch = ..)]`, built from their files when the crate
    /// compiles, and the check that each `static` holds its layer's parameters.
    fn statics(&self) -> TokenStream {
        let l = &self.l;
        let per_field = (0..self.tys.len()).filter_map(|i| {
            let src = self.static_source(i)?;
            let (ty, frozen) = (self.tys[i], self.def.fields[i].frozen.as_ref()?);
            let span = frozen.span();
            // The constant's error points at the file's name.
            let p = private_at(span);
            let built = self.net.weights[i].as_ref().map(|w| {
                let (path, prefix) = (&w.path, &w.prefix);
                let entries = w.entries.iter().map(|e| {
                    let (name, shape, start) = (&e.name, &e.shape, e.start);
                    quote!(#p::TorchEntry { name: #name, shape: &[#(#shape),*], start: #start })
                });
                quote_spanned! {span=>
                    static #src: [f32; <#ty as #l>::PARAMS] = #p::from_torch::<#ty, { <#ty as #l>::PARAMS }>(
                        #prefix,
                        ::core::include_bytes!(#path),
                        &[#(#entries),*],
                    );
                }
            });
            let check = quote_spanned! {span=>
                const _: fn() = || {
                    let _: &'static [f32; <#ty as #l>::PARAMS] = &#src;
                };
            };
            Some(quote!(#built #check))
        });
        quote!(#(#per_field)*)
    }

    /// Where each field's tensors lie (`__AT{i}`), which its backward call hands to the sink.
    fn layer_places(&self) -> TokenStream {
        let (p, o, g, t) = (&self.p, &self.o, &self.g, &self.t);
        let places = (0..self.tys.len()).map(|i| {
            let (at, o0, o1, g0, g1, t0, t1) = (
                &self.at[i],
                &o[i],
                &o[i + 1],
                &g[i],
                &g[i + 1],
                &t[i],
                &t[i + 1],
            );
            // The sink reads a layer's tensors only when some of them are frozen.
            let tensors = if self.frozen {
                quote!(#p::layer_tensors(&__TENSORS, #t0, #t1))
            } else {
                quote!(&[])
            };
            quote! {
                const #at: #p::LayerAt = #p::LayerAt {
                    params: #o0..#o1,
                    grads: #g0..#g1,
                    tensors: #tensors,
                };
            }
        });
        quote!(#(#places)*)
    }

    /// Each `#[frozen]` is checked at its tokens: the layer can freeze tensors, and has each
    /// one named.
    fn frozen_checks(&self) -> TokenStream {
        let fields = self.def.fields.iter().zip(&self.tys);
        let checks = fields.filter_map(|(f, ty)| {
            let frozen = f.frozen.as_ref()?;
            let field = f.name.to_string();
            let span = frozen.span();
            let (p, l) = (private_at(span), quote_spanned!(span=> Layer));
            let layer = quote_spanned! {span=>
                const _: () = #p::check_freezable(#field, <#ty as #p::#l>::FREEZABLE, <#ty as #p::#l>::TENSORS.len());
            };
            let names = match frozen {
                Frozen::Layer(_) | Frozen::Static(_) | Frozen::Torch { .. } => Vec::new(),
                Frozen::Tensors(names) => names.iter().map(|n| {
                    let (p, name) = (private_at(n.span()), n.to_string());
                    quote_spanned! {n.span()=>
                        const _: () = #p::check_frozen_name(#field, <#ty as #p::Layer>::TENSORS, #name);
                    }
                }).collect(),
            };
            Some(quote!(#layer #(#names)*))
        });
        quote!(#(#checks)*)
    }

    /// The model's input type, `f32` unless `input = ...` says otherwise.
    fn input_ty(&self) -> TokenStream {
        match &self.def.input {
            Some(ty) => quote!(#ty),
            None => quote!(f32),
        }
    }

    /// `Model::VOCAB`: the smallest vocabulary of the layers that read token ids (which
    /// `input_checks` makes `TokenLayer`s), 0 for `f32` features.
    fn vocab(&self) -> TokenStream {
        let p = &self.p;
        if !self.tokens {
            return quote!(0usize);
        }
        let readers = self.net.nodes.iter().filter(|n| n.inputs.contains(&Src::X));
        readers.fold(quote!(::core::primitive::usize::MAX), |acc, n| match n.op {
            Op::Layer(f) => {
                let ty = self.tys[f];
                quote!(#p::min(#acc, <#ty as #p::TokenLayer>::VOCAB))
            }
            _ => acc,
        })
    }

    /// The per-sample layouts: the activation buffer holds each node's output and what its
    /// layer saves, node after node; the gradient buffer each node's output gradient.
    fn layouts(&self) -> TokenStream {
        let nodes = 0..self.net.nodes.len();
        let acts = nodes.clone().flat_map(|k| [self.width(k), self.saved(k)]);
        let grads = nodes.clone().map(|k| self.width(k));
        let count = proc_macro2::Literal::usize_unsuffixed(nodes.len());
        quote! {
            const __ACTS: [usize; 2 * #count] = [#(#acts),*];
            const __GRADS: [usize; #count] = [#(#grads),*];
        }
    }

    /// The table `name` of every field's `tensors` (`TENSORS` or `STATE_TENSORS`), each field's
    /// at its offset in `offsets`; for the parameters (`params`), with the layer's PyTorch names
    /// and where each trainable tensor's gradient lies.
    fn tensor_table(
        &self,
        name: TokenStream,
        tensors: TokenStream,
        params: bool,
        offsets: &[Ident],
    ) -> TokenStream {
        let (p, l) = (&self.p, &self.l);
        let fields = self.def.fields.iter().zip(&self.tys).zip(offsets);
        // A static field's tensors are in its `static`, not in the parameter buffer.
        let buffered = fields
            .enumerate()
            .filter(|(i, _)| !params || self.static_source(*i).is_none());
        let pushes = buffered.map(|(i, ((f, ty), at))| {
            let nm = f.name.to_string();
            let (torch, grad, frozen) = if params {
                let (g, f) = (&self.g[i], &self.f[i]);
                (quote!(<#ty as #l>::TORCH), quote!(Some(#g)), quote!(#f))
            } else {
                (quote!(&[]), quote!(None), quote!(#p::layers::Frozen::NONE))
            };
            quote!(let (__out, __at) = #p::push_tensors(__out, __at, #nm, <#ty as #l>::#tensors, #torch, #at, #grad, #frozen);)
        });
        let (ty, empty) = (quote!(#p::NamedTensor), quote!(#p::NamedTensor::EMPTY));
        let count = if params {
            self.sum_of_buffered(quote!(#tensors.len()))
        } else {
            self.sum_of(quote!(#tensors.len()))
        };
        table(name, ty, empty, count, pushes)
    }

    /// The names of the fields whose layer counts batches.
    fn counters(&self) -> TokenStream {
        let l = &self.l;
        let count = sum(self
            .tys
            .iter()
            .map(|ty| quote!((<#ty as #l>::BATCH_COUNTER as usize))));
        let pushes = self.def.fields.iter().zip(&self.tys).map(|(f, ty)| {
            let nm = f.name.to_string();
            quote! {
                if <#ty as #l>::BATCH_COUNTER {
                    __out[__at] = #nm;
                    __at += 1;
                }
            }
        });
        quote! {
            const __COUNTER_COUNT: usize = #count;
            const __COUNTERS: [&'static str; __COUNTER_COUNT] = {
                #[allow(unused_mut)]
                let mut __out = [""; __COUNTER_COUNT];
                #[allow(unused_mut)]
                let mut __at = 0usize;
                #(#pushes)*
                let _ = __at;
                __out
            };
        }
    }

    /// `__LAYER_KINDS`: every field's name and layer kind, then, for a model declared with a
    /// graph, `graph` and `__describe_graph`, which writes its wiring.
    fn layer_kinds(&self) -> TokenStream {
        let (p, l) = (&self.p, &self.l);
        let fields = self.def.fields.iter().zip(&self.tys).map(|(f, ty)| {
            let name = f.name.to_string();
            quote!(#p::LayerKind { name: #name, describe: <#ty as #l>::describe })
        });
        let graph = self.def.graph.as_ref().map(|_| {
            let nodes = (0..self.net.nodes.len()).map(|k| self.describe_node(k));
            quote! {
                fn __describe_graph(out: &mut dyn ::core::fmt::Write) -> ::core::fmt::Result {
                    #(#nodes)*
                    ::core::result::Result::Ok(())
                }
            }
        });
        let graph_kind = graph
            .is_some()
            .then(|| quote!(#p::LayerKind { name: "graph", describe: __describe_graph }));
        quote! {
            #graph
            const __LAYER_KINDS: &[#p::LayerKind] = &[#(#fields,)* #graph_kind];
        }
    }

    /// The statements that write node `k` of the graph as `n<k> = op(inputs)`, after a `; `
    /// but for the first.
    fn describe_node(&self, k: usize) -> TokenStream {
        let n = &self.net.nodes[k];
        let inputs: Vec<String> = n
            .inputs
            .iter()
            .map(|s| match s {
                Src::X => "x".to_string(),
                Src::Node(j) => format!("n{j}"),
            })
            .collect();
        let args = format!("({})", inputs.join(", "));
        let op = match &n.op {
            Op::Layer(f) => {
                let name = self.def.fields[*f].name.to_string();
                quote!(out.write_str(#name)?;)
            }
            Op::Act(act) => {
                let p = &self.p;
                quote!(<#act as #p::Activation>::describe(out)?;)
            }
            Op::Add => quote!(out.write_str("add")?;),
            Op::Mul => quote!(out.write_str("mul")?;),
            Op::Concat => quote!(out.write_str("concat")?;),
        };
        let lhs = if k == 0 {
            "n0 = ".to_string()
        } else {
            format!("; n{k} = ")
        };
        quote! {
            out.write_str(#lhs)?;
            #op
            out.write_str(#args)?;
        }
    }

    /// The tensor, product, state and counter tables.
    fn tables(&self) -> TokenStream {
        let (p, l) = (&self.p, &self.l);
        let tensors = self.tensor_table(quote!(__TENSORS), quote!(TENSORS), true, &self.o);
        // Without frozen tensors, every tensor trains.
        let trainable = if self.frozen {
            quote! {
                const __TRAINABLE_COUNT: usize = #p::trainable_count(&__TENSORS);
                const __TRAINABLE_TENSORS: [#p::NamedTensor; __TRAINABLE_COUNT] = #p::trainable_tensors(&__TENSORS);
            }
        } else {
            quote!(const __TRAINABLE_TENSORS: [#p::NamedTensor; __TENSORS.len()] = __TENSORS;)
        };
        let places = self.layer_places();
        let product_pushes = self.tys.iter().map(
            |ty| quote!(let (__out, __at) = #p::push_products(__out, __at, <#ty as #l>::PRODUCTS);),
        );
        let products = table(
            quote!(__PRODUCTS),
            quote!(#p::Product),
            quote!(#p::Product::NONE),
            self.sum_of(quote!(PRODUCTS.len())),
            product_pushes,
        );
        let state = self.tensor_table(
            quote!(__STATE_TENSORS),
            quote!(STATE_TENSORS),
            false,
            &self.st,
        );
        let counters = self.counters();
        let layer_kinds = self.layer_kinds();
        quote! {
            #tensors
            #trainable
            #places
            #products
            #state
            #counters
            #layer_kinds
        }
    }

    /// Node `k`'s forward statement.
    fn forward_node(&self, k: usize) -> TokenStream {
        let (p, yk, sk) = (&self.p, &self.y[k], &self.s[k]);
        let n = &self.net.nodes[k];
        let ins = self.inputs(k);
        match &n.op {
            Op::Layer(f) => {
                let (ty, input) = (self.tys[*f], &ins[0]);
                let (sf, sf1) = (&self.st[*f], &self.st[*f + 1]);
                let params = self.params_of(*f, quote!(params));
                let io = quote!(ctx, #p::layers::Forward { params: #params, state: &mut state[#sf..#sf1], x: #input, y: #yk, saved: #sk, batch });
                let call = self.layer_call(k, ty, "forward", io);
                quote!(#call;)
            }
            // `input_checks` refuses it: token ids go to a layer first.
            _ if self.reads_ids(k) => TokenStream::new(),
            Op::Act(act) => {
                let (input, w) = (&ins[0], self.width(k));
                quote!(<#act as #p::Activation>::forward(#input, #yk, #w);)
            }
            Op::Add => {
                let (x0, x1) = (&ins[0], &ins[1]);
                quote!(#p::graph::add(#x0, #x1, #yk);)
            }
            Op::Mul => {
                let (x0, x1) = (&ins[0], &ins[1]);
                quote!(#p::graph::mul(#x0, #x1, #yk);)
            }
            Op::Concat => {
                let (x0, x1) = (&ins[0], &ins[1]);
                let (wa, wb) = (
                    src_width(self.net, n.inputs[0]),
                    src_width(self.net, n.inputs[1]),
                );
                quote!(#p::graph::concat(#x0, #wa, #x1, #wb, #yk);)
            }
        }
    }

    /// Where a contribution to the gradient of `src` goes: the first sets it, later ones add.
    fn gradient(&self, given: &mut Given, src: Src) -> TokenStream {
        let p = &self.p;
        match src {
            Src::X => {
                let first = !given.x;
                given.x = true;
                if first {
                    quote!(dx.reborrow())
                } else {
                    quote!(dx.adding())
                }
            }
            Src::Node(j) => {
                let dj = &self.d[j];
                let first = !given.nodes[j];
                given.nodes[j] = true;
                let grad = if first {
                    quote!(#p::Grad::Set(&mut #dj[..]))
                } else {
                    quote!(#p::Grad::Add(&mut #dj[..]))
                };
                if self.frozen {
                    let wanted = self.wanted(j);
                    quote!(if #wanted { #grad } else { #p::Grad::Skip })
                } else {
                    grad
                }
            }
        }
    }

    /// Whether node `k`'s layer trains some tensor, as a constant expression.
    fn trains(&self, k: usize) -> TokenStream {
        match self.net.nodes[k].op {
            Op::Layer(f) => {
                let (g0, g1) = (&self.g[f], &self.g[f + 1]);
                quote!((#g1 > #g0))
            }
            _ => quote!(false),
        }
    }

    /// Whether the input `x` is upstream of node `k`.
    fn reads_x(&self, k: usize) -> bool {
        self.net.nodes[k].inputs.iter().any(|&s| match s {
            Src::X => true,
            Src::Node(j) => self.reads_x(j),
        })
    }

    /// `__W{k}`: whether node `k`'s output gradient is needed whatever the input gradient:
    /// its layer trains, or a node upstream of it does. One constant per node.
    fn wanted_constants(&self) -> TokenStream {
        let consts = (0..self.net.nodes.len()).map(|k| {
            let w = format_ident!("__W{}", k);
            let trains = self.trains(k);
            let upstream = self.net.nodes[k].inputs.iter().filter_map(|&s| match s {
                Src::Node(j) => Some(format_ident!("__W{}", j)),
                Src::X => None,
            });
            quote!(const #w: bool = #trains #(|| #upstream)*;)
        });
        quote!(#(#consts)*)
    }

    /// Whether node `k`'s output gradient is needed in this backward pass: `__W{k}`, or the
    /// input gradient is asked for (`__wx`) and `x` is upstream of it.
    fn wanted(&self, k: usize) -> TokenStream {
        let w = format_ident!("__W{}", k);
        if self.reads_x(k) {
            quote!((#w || __wx))
        } else {
            quote!(#w)
        }
    }

    /// Node `k`'s backward statements; a layer's parameter gradient goes to the sink, which is
    /// told when it is complete.
    fn backward_node(&self, k: usize, given: &mut Given) -> TokenStream {
        let (p, yk, sk, dk) = (&self.p, &self.y[k], &self.s[k], &self.d[k]);
        let n = &self.net.nodes[k];
        let ins = self.inputs(k);
        let reads_ids = self.reads_ids(k);
        let mut grad = |src: Src| self.gradient(given, src);
        match &n.op {
            Op::Layer(f) => {
                let (ty, at, frozen, input) = (self.tys[*f], &self.at[*f], &self.f[*f], &ins[0]);
                let gi = grad(n.inputs[0]);
                let io = |params, dparams| quote!(ctx, #p::layers::Backward { params: #params, x: #input, y: &*#yk, saved: &*#sk, dy: &mut #dk[..], dx: #gi, frozen: #frozen, dparams: #dparams, batch });
                if let Some(src) = self.static_source(*f) {
                    // Nothing of it trains: its input gradient alone, without the sink.
                    let io = io(quote!(&#src[..]), quote!(&mut []));
                    let call = self.layer_call(k, ty, "backward", io);
                    return quote!(#call;);
                }
                let call = self.layer_call(k, ty, "backward", io(quote!(__p), quote!(__g)));
                quote! {
                    let (__p, __g) = sink.layer(&#at);
                    #call;
                    sink.done(&#at);
                }
            }
            // `input_checks` refuses it: token ids go to a layer first.
            _ if reads_ids => TokenStream::new(),
            Op::Act(act) => {
                let (input, w) = (&ins[0], self.width(k));
                let gi = grad(n.inputs[0]);
                quote! {
                    <#act as #p::Activation>::backward(#input, &*#yk, &mut #dk[..], #w);
                    #gi.give(&#dk[..]);
                }
            }
            Op::Add => {
                let (g0, g1) = (grad(n.inputs[0]), grad(n.inputs[1]));
                quote! {
                    #g0.give(&#dk[..]);
                    #g1.give(&#dk[..]);
                }
            }
            Op::Mul => {
                let (x0, x1) = (&ins[0], &ins[1]);
                let (g0, g1) = (grad(n.inputs[0]), grad(n.inputs[1]));
                quote! {
                    #p::graph::product_grad(#g0, &#dk[..], #x1);
                    #p::graph::product_grad(#g1, &#dk[..], #x0);
                }
            }
            Op::Concat => {
                let (wa, wb) = (
                    src_width(self.net, n.inputs[0]),
                    src_width(self.net, n.inputs[1]),
                );
                let (g0, g1) = (grad(n.inputs[0]), grad(n.inputs[1]));
                quote! {
                    #p::graph::concat_grad(&#dk[..], #wa, #wb, 0, #g0);
                    #p::graph::concat_grad(&#dk[..], #wa, #wb, 1, #g1);
                }
            }
        }
    }

    /// `Model::forward`, one statement per node, and `Model::backward`, the nodes in reverse.
    fn passes(&self) -> TokenStream {
        let (p, d) = (&self.p, &self.d);
        let nodes = 0..self.net.nodes.len();
        let acts: Vec<TokenStream> = nodes
            .clone()
            .map(|k| {
                let (yk, sk) = (&self.y[k], &self.s[k]);
                quote!(#yk, #sk)
            })
            .collect();
        let forward = nodes.clone().map(|k| self.forward_node(k));
        let mut given = Given {
            nodes: vec![false; nodes.len()],
            x: false,
        };
        let backward: Vec<TokenStream> = nodes
            .rev()
            .map(|k| {
                let node = self.backward_node(k, &mut given);
                if self.frozen {
                    let wanted = self.wanted(k);
                    quote!(if #wanted { #node })
                } else {
                    node
                }
            })
            .collect();
        let wanted = self.frozen.then(|| {
            let consts = self.wanted_constants();
            quote! {
                #consts
                let __wx = !::core::matches!(dx, #p::Grad::Skip);
            }
        });
        quote! {
            fn forward(
                ctx: &mut #p::Ctx<'_>,
                params: &[f32],
                state: &mut [f32],
                x: &[Self::Input],
                acts: &mut [f32],
                batch: usize,
            ) {
                let [#(#acts),*] = #p::split_mut(acts, &__ACTS, batch);
                #(#forward)*
            }

            fn backward(
                ctx: &mut #p::Ctx<'_>,
                sink: &mut dyn #p::GradSink,
                x: &[Self::Input],
                acts: &[f32],
                node_grads: &mut [f32],
                mut dx: #p::Grad<'_>,
                batch: usize,
            ) {
                let [#(#acts),*] = #p::split(acts, &__ACTS, batch);
                let [#(#d),*] = #p::split_mut(node_grads, &__GRADS, batch);
                #wanted
                #(#backward)*
            }
        }
    }

    /// `zeroed` and `init` over inline storage, or `init` allocating the buffers.
    fn constructors(&self) -> TokenStream {
        let (p, name, vis) = (&self.p, &self.def.name, &self.def.vis);
        let (o_end, st_end) = self.ends();
        if self.def.inline {
            quote! {
                /// A model whose parameters and state are all zero, as a constant: usable in a
                /// `static`; [`init_in_place`](Self::init_in_place) then initializes it.
                #[allow(dead_code)]
                #vis const fn zeroed() -> Self {
                    #name {
                        __params: [0.0; #o_end],
                        __state: [0.0; #st_end],
                    }
                }

                /// A model with parameters drawn from each layer's initializer, reproducibly from
                /// `seed`, stored inline (no allocation).
                #[allow(dead_code)]
                #vis fn init(seed: #p::Seed) -> Self {
                    let mut __model = Self::zeroed();
                    __model.init_in_place(seed);
                    __model
                }
            }
        } else {
            quote! {
                /// A model with parameters drawn from each layer's initializer, reproducibly from
                /// `seed`. Allocates the parameter and state buffers once, on the heap.
                #[allow(dead_code)]
                #vis fn init(seed: #p::Seed) -> Self {
                    let mut __model = #name {
                        __params: #p::zeros(#o_end),
                        __state: #p::zeros(#st_end),
                    };
                    __model.init_in_place(seed);
                    __model
                }
            }
        }
    }

    /// One method per field: a view of its layer's parameters.
    fn views(&self) -> Vec<TokenStream> {
        let p = &self.p;
        let fields = self.def.fields.iter().enumerate();
        fields
            .map(|(i, f)| {
                let (fname, ty, vis, attrs) = (&f.name, &f.ty, &f.vis, &f.attrs);
                let params = self.params_of(i, quote!(self.__params));
                let doc = format!("The parameters of layer `{fname}`.");
                quote! {
                    #(#attrs)*
                    #[doc = #doc]
                    #[allow(dead_code)]
                    #vis fn #fname(&self) -> #p::View<'_, #ty> {
                        #p::View::new(#params)
                    }
                }
            })
            .collect()
    }

    /// The inherent methods: constructors, `init_in_place`, the parameter buffer and the
    /// per-layer views.
    fn inherent(&self) -> TokenStream {
        let (p, l, name, vis) = (&self.p, &self.l, &self.def.name, &self.def.vis);
        let construct = self.constructors();
        let buffered = self.tys.iter().enumerate();
        let buffered = buffered.filter(|&(i, _)| self.static_source(i).is_none());
        let finish_init = buffered.map(|(i, ty)| {
            let (o0, o1) = (&self.o[i], &self.o[i + 1]);
            quote!(<#ty as #l>::finish_init(&mut self.__params[#o0..#o1]);)
        });
        let init_state = self.tys.iter().enumerate().map(|(i, ty)| {
            let (s0, s1) = (&self.st[i], &self.st[i + 1]);
            quote!(<#ty as #l>::init_state(&mut self.__state[#s0..#s1]);)
        });
        let views = self.views();
        quote! {
            impl #name {
                #construct

                /// Initializes the parameters and state in place exactly as
                /// [`init`](Self::init) does with `seed`, allocating nothing.
                #[allow(dead_code)]
                #vis fn init_in_place(&mut self, seed: #p::Seed) {
                    self.__params.fill(0.0);
                    self.__state.fill(0.0);
                    #p::init_params::<{ #p::draws_normal(&__TENSORS) }>(&__TENSORS, &mut self.__params, seed);
                    #(#finish_init)*
                    #(#init_state)*
                }

                /// The flat parameter buffer, every tensor in declaration order.
                #[allow(dead_code)]
                #vis fn params(&self) -> &[f32] {
                    &self.__params[..]
                }

                /// The flat parameter buffer, writable (to load weights).
                #[allow(dead_code)]
                #vis fn params_mut(&mut self) -> &mut [f32] {
                    &mut self.__params[..]
                }

                #(#views)*
            }
        }
    }

    /// The implementation of the runtime's `Model`.
    fn model_impl(&self) -> TokenStream {
        let (p, name) = (&self.p, &self.def.name);
        let last = self.net.nodes.len() - 1;
        let (w_last, s_last) = (self.width(last), self.saved(last));
        let (input_width, loss) = (
            &self.net.input.tokens,
            self.def.loss.as_ref().expect("checked"),
        );
        let (o_end, st_end) = self.ends();
        let scratch = self.max_of(quote!(SCRATCH_PER_SAMPLE));
        let steps = self.max_of(quote!(STEPS));
        let max_layer_params = (0..self.tys.len()).fold(quote!(0usize), |acc, i| {
            let (g0, g1) = (&self.g[i], &self.g[i + 1]);
            quote!(#p::max(#acc, #g1 - #g0))
        });
        let trainable = &self.g[self.tys.len()];
        let passes = self.passes();
        let (input, vocab) = (self.input_ty(), self.vocab());
        quote! {
            #[allow(clippy::all)]
            impl #p::Model for #name {
                const IN: usize = #input_width;
                const OUT: usize = #w_last;
                const PARAMS: usize = #o_end;
                const TRAINABLE: usize = #trainable;
                const STATE: usize = #st_end;
                const ACTIVATIONS: usize = #p::total(&__ACTS);
                const OUTPUT_OFFSET: usize = Self::ACTIVATIONS - (#w_last + #s_last);
                const NODE_GRADS: usize = #p::total(&__GRADS);
                const OUTPUT_GRAD_OFFSET: usize = Self::NODE_GRADS - #w_last;
                const TENSORS: &'static [#p::NamedTensor] = &__TENSORS;
                const TRAINABLE_TENSORS: &'static [#p::NamedTensor] = &__TRAINABLE_TENSORS;
                const STATE_TENSORS: &'static [#p::NamedTensor] = &__STATE_TENSORS;
                const BATCH_COUNTERS: &'static [&'static str] = &__COUNTERS;
                const LAYER_KINDS: &'static [#p::LayerKind] = __LAYER_KINDS;
                type Loss = #loss;
                type Input = #input;
                const VOCAB: usize = #vocab;
                const STEPS: usize = #steps;

                const SCRATCH_PER_SAMPLE: usize = #scratch;
                const PRODUCTS: &'static [#p::Product] = &__PRODUCTS;
                const MAX_LAYER_PARAMS: usize = #max_layer_params;

                fn params(&self) -> &[f32] {
                    &self.__params[..]
                }

                fn params_mut(&mut self) -> &mut [f32] {
                    &mut self.__params[..]
                }

                fn state(&self) -> &[f32] {
                    &self.__state[..]
                }

                fn split_mut(&mut self) -> (&[f32], &mut [f32]) {
                    (&self.__params[..], &mut self.__state[..])
                }

                #passes
            }
        }
    }

    /// `BUDGET_BYTES` and the constant that checks it against `max_bytes`, when there is a
    /// budget.
    fn budget(&self) -> Option<TokenStream> {
        let (p, name, vis) = (&self.p, &self.def.name, &self.def.vis);
        self.net.budget.as_ref().map(|b| {
            let (opt, batch, fused) = (&b.optimizer, b.batch, b.fused);
            let mut max = proc_macro2::Literal::usize_unsuffixed(b.max);
            max.set_span(b.span);
            let batch = proc_macro2::Literal::usize_unsuffixed(batch);
            let doc = format!(
                "The bytes of this model and a train step of its `optimizer` for batches of {batch}{}, \
                 which the build checks against `max_bytes = {max}`.",
                if fused { ", with each layer updated as soon as its gradient is known" } else { "" }
            );
            // Every token of the call at the `max_bytes` value, so that the error points there.
            let model = syn::LitStr::new(&name.to_string(), b.span);
            let budget_path = private_at(b.span);
            let check = quote_spanned! {b.span=>
                const _: () = #budget_path::check_budget(#model, #max, <#name>::BUDGET_BYTES);
            };
            quote! {
                impl #name {
                    #[doc = #doc]
                    #[allow(dead_code)]
                    #vis const BUDGET_BYTES: #p::Bytes = #p::Bytes::of::<#name, #opt>(#batch, #fused);
                }
                #check
            }
        })
    }
}

pub fn model(def: &Def, net: &Net) -> TokenStream {
    let e = Expansion::new(def, net);
    let (head, checks, offsets, layouts) = (e.header(), e.checks(), e.offsets(), e.layouts());
    let statics = e.statics();
    let (tables, inherent, model_impl, budget) =
        (e.tables(), e.inherent(), e.model_impl(), e.budget());
    quote! {
        #head

        const _: () = {
            #checks

            #offsets
            #statics
            #layouts
            #tables

            #inherent

            #model_impl

            #budget
        };
    }
}

/// `const _: ty = value;`, the item at the call site and `value` at the user's tokens: a
/// mistake in `value` is reported there, and a name in it that does not resolve gets no
/// suggestion to make the item generic (which rustc would place at the user's tokens).
fn check(ty: TokenStream, value: TokenStream) -> TokenStream {
    quote!(const _: #ty = #value;)
}

fn src_width(net: &Net, s: Src) -> TokenStream {
    match s {
        Src::X => net.input.tokens.clone(),
        Src::Node(k) => net.nodes[k].width.tokens.clone(),
    }
}
