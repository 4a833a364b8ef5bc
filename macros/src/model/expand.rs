//! Code generation: the owning struct (flat parameter and state buffers), its constructor and
//! per-layer views, and the `Model` implementation whose forward and backward are flat,
//! one statement per node, so that generated code grows linearly with the model.

use super::check::{Net, Op, Src};
use super::parse::Def;
use crate::paths::{private as p, private_at};
use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};

/// The struct alone, so that a model with a mistake still names a type (one error, not fifty):
/// parameters and state on the heap, or in `arrays` of that many values.
fn header(def: &Def, arrays: Option<(TokenStream, TokenStream)>) -> TokenStream {
    let (attrs, vis, name) = (&def.attrs, &def.vis, &def.name);
    let p = p();
    let (params, state) = match arrays {
        Some((params, state)) => (quote!([f32; #params]), quote!([f32; #state])),
        None => (quote!(#p::Box<[f32]>), quote!(#p::Box<[f32]>)),
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

pub fn model(def: &Def, net: &Net) -> TokenStream {
    let p = p();
    let l = quote!(#p::Layer);
    let name = &def.name;
    let tys: Vec<&syn::Type> = def.fields.iter().map(|f| &f.ty).collect();
    let nf = tys.len();
    let head = header(
        def,
        def.inline.then(|| {
            (
                sum(tys.iter().map(|ty| quote!(<#ty as #l>::PARAMS))),
                sum(tys.iter().map(|ty| quote!(<#ty as #l>::STATE))),
            )
        }),
    );

    // Parameter and state offsets, per field, in declaration order.
    let o: Vec<syn::Ident> = (0..=nf).map(|i| format_ident!("__O{}", i)).collect();
    let st: Vec<syn::Ident> = (0..=nf).map(|i| format_ident!("__ST{}", i)).collect();
    let offsets = (0..nf).map(|i| {
        let (o0, o1, s0, s1, ty) = (&o[i], &o[i + 1], &st[i], &st[i + 1], tys[i]);
        quote! {
            const #o1: usize = #o0 + <#ty as #l>::PARAMS;
            const #s1: usize = #s0 + <#ty as #l>::STATE;
        }
    });
    let (o0, st0, o_end, st_end) = (&o[0], &st[0], &o[nf], &st[nf]);

    // Every layer type is a Layer, checked at the user's type.
    let layer_checks = tys.iter().map(|ty| {
        let span = syn::spanned::Spanned::span(ty);
        let p = private_at(span);
        quote_spanned!(span=> const _: usize = <#ty as #p::Layer>::OUT;)
    });
    let assertions = net.assertions.iter().map(|a| {
        let (left, right, msg) = (&a.left, &a.right, &a.message);
        quote_spanned!(a.span=> const _: () = ::core::assert!(#left == #right, #msg);)
    });
    let loss = def.loss.as_ref().expect("checked");

    // Per-node activation, saved and gradient offsets (per sample).
    let nodes = &net.nodes;
    let saved_of = |k: usize| match nodes[k].op {
        Op::Layer(f) => {
            let ty = tys[f];
            quote!(<#ty as #l>::SAVED)
        }
        _ => quote!(0usize),
    };
    let width = |k: usize| nodes[k].width.tokens.clone();
    // The activation buffer holds each node's output and what its layer saves, node after
    // node; the gradient buffer each node's output gradient.
    let acts_layout = (0..nodes.len()).flat_map(|k| [width(k), saved_of(k)]);
    let grads_layout = (0..nodes.len()).map(width);
    let last = nodes.len() - 1;
    let (w_last, s_last) = (width(last), saved_of(last));
    let input_width = &net.input.tokens;
    let node_count = proc_macro2::Literal::usize_unsuffixed(nodes.len());

    // Splitting the activation and gradient buffers into one slice per node.
    let y: Vec<syn::Ident> = (0..nodes.len())
        .map(|k| format_ident!("__y{}", k))
        .collect();
    let s: Vec<syn::Ident> = (0..nodes.len())
        .map(|k| format_ident!("__s{}", k))
        .collect();
    let d: Vec<syn::Ident> = (0..nodes.len())
        .map(|k| format_ident!("__d{}", k))
        .collect();
    let act_parts: Vec<TokenStream> = (0..nodes.len())
        .map(|k| {
            let (yk, sk) = (&y[k], &s[k]);
            quote!(#yk, #sk)
        })
        .collect();
    let src_ref = |src: Src| match src {
        Src::X => quote!(x),
        Src::Node(j) => {
            let yj = &y[j];
            quote!(&*#yj)
        }
    };

    // Forward: one statement per node.
    let forward = (0..nodes.len()).map(|k| {
        let (yk, sk) = (&y[k], &s[k]);
        let n = &nodes[k];
        let ins: Vec<TokenStream> = n.inputs.iter().map(|&i| src_ref(i)).collect();
        match &n.op {
            Op::Layer(f) => {
                let (ty, of, of1, sf, sf1, input) = (tys[*f], &o[*f], &o[*f + 1], &st[*f], &st[*f + 1], &ins[0]);
                quote!(<#ty as #l>::forward(ctx, #p::layers::Forward { params: &params[#of..#of1], state: &mut state[#sf..#sf1], x: #input, y: #yk, saved: #sk, batch });)
            }
            Op::Act(act) => {
                let (input, w) = (&ins[0], width(k));
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
                let (wa, wb) = (src_width(net, n.inputs[0]), src_width(net, n.inputs[1]));
                quote!(#p::graph::concat(#x0, #wa, #x1, #wb, #yk);)
            }
        }
    });

    // Backward: nodes in reverse; the first contribution to a gradient sets it, later ones add.
    // Each layer's parameter gradient goes to the sink, which is told when it is complete.
    let mut given = vec![false; nodes.len()];
    let mut x_given = false;
    let mut backward = Vec::new();
    for k in (0..nodes.len()).rev() {
        let n = &nodes[k];
        let (yk, sk, dk) = (&y[k], &s[k], &d[k]);
        let mut grad = |src: Src| match src {
            Src::X => {
                let first = !x_given;
                x_given = true;
                if first {
                    quote!(dx.reborrow())
                } else {
                    quote!(dx.adding())
                }
            }
            Src::Node(j) => {
                let dj = &d[j];
                let first = !given[j];
                given[j] = true;
                if first {
                    quote!(#p::Grad::Set(&mut #dj[..]))
                } else {
                    quote!(#p::Grad::Add(&mut #dj[..]))
                }
            }
        };
        let ins: Vec<TokenStream> = n.inputs.iter().map(|&i| src_ref(i)).collect();
        backward.push(match &n.op {
            Op::Layer(f) => {
                let (ty, of, of1, input) = (tys[*f], &o[*f], &o[*f + 1], &ins[0]);
                let gi = grad(n.inputs[0]);
                quote! {
                    let (__p, __g) = sink.layer(#of..#of1);
                    <#ty as #l>::backward(ctx, #p::layers::Backward { params: __p, x: #input, y: &*#yk, saved: &*#sk, dy: &mut #dk[..], dx: #gi, dparams: __g, batch });
                    sink.done(#of..#of1);
                }
            }
            Op::Act(act) => {
                let (input, w) = (&ins[0], width(k));
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
                let (wa, wb) = (src_width(net, n.inputs[0]), src_width(net, n.inputs[1]));
                let (g0, g1) = (grad(n.inputs[0]), grad(n.inputs[1]));
                quote! {
                    #p::graph::concat_grad(&#dk[..], #wa, #wb, 0, #g0);
                    #p::graph::concat_grad(&#dk[..], #wa, #wb, 1, #g1);
                }
            }
        });
    }

    // Tensor table.
    let names: Vec<String> = def.fields.iter().map(|f| f.name.to_string()).collect();
    let tensor_count = sum(tys.iter().map(|ty| quote!(<#ty as #l>::TENSORS.len())));
    let pushes = (0..nf).map(|i| {
        let (ty, nm, oi) = (tys[i], &names[i], &o[i]);
        quote!(let (__out, __at) = #p::push_tensors(__out, __at, #nm, <#ty as #l>::TENSORS, <#ty as #l>::TORCH, #oi);)
    });
    let state_count = sum(tys
        .iter()
        .map(|ty| quote!(<#ty as #l>::STATE_TENSORS.len())));
    let state_pushes = (0..nf).map(|i| {
        let (ty, nm, si) = (tys[i], &names[i], &st[i]);
        quote!(let (__out, __at) = #p::push_tensors(__out, __at, #nm, <#ty as #l>::STATE_TENSORS, &[], #si);)
    });
    let counter_count = sum(tys
        .iter()
        .map(|ty| quote!((<#ty as #l>::BATCH_COUNTER as usize))));
    let counter_pushes = (0..nf).map(|i| {
        let (ty, nm) = (tys[i], &names[i]);
        quote! {
            if <#ty as #l>::BATCH_COUNTER {
                __out[__at] = #nm;
                __at += 1;
            }
        }
    });
    let scratch = tys.iter().fold(
        quote!(0usize),
        |acc, ty| quote!(#p::max(#acc, <#ty as #l>::SCRATCH_PER_SAMPLE)),
    );
    let max_layer_params = tys.iter().fold(
        quote!(0usize),
        |acc, ty| quote!(#p::max(#acc, <#ty as #l>::PARAMS)),
    );
    let product_count = sum(tys.iter().map(|ty| quote!(<#ty as #l>::PRODUCTS.len())));
    let product_pushes = tys.iter().map(
        |ty| quote!(let (__out, __at) = #p::push_products(__out, __at, <#ty as #l>::PRODUCTS);),
    );
    let tensor_table = table(
        quote!(__TENSORS),
        quote!(#p::NamedTensor),
        quote!(#p::NamedTensor::EMPTY),
        tensor_count,
        pushes,
    );
    let product_table = table(
        quote!(__PRODUCTS),
        quote!(#p::Product),
        quote!(#p::Product::NONE),
        product_count,
        product_pushes,
    );
    let state_table = table(
        quote!(__STATE_TENSORS),
        quote!(#p::NamedTensor),
        quote!(#p::NamedTensor::EMPTY),
        state_count,
        state_pushes,
    );
    let init_state = (0..nf).map(|i| {
        let (ty, s0, s1) = (tys[i], &st[i], &st[i + 1]);
        quote!(<#ty as #l>::init_state(&mut self.__state[#s0..#s1]);)
    });
    let views = def.fields.iter().enumerate().map(|(i, f)| {
        let (fname, ty, vis, attrs, oi, oi1) = (&f.name, &f.ty, &f.vis, &f.attrs, &o[i], &o[i + 1]);
        let doc = format!("The parameters of layer `{fname}`.");
        quote! {
            #(#attrs)*
            #[doc = #doc]
            #[allow(dead_code)]
            #vis fn #fname(&self) -> #p::View<'_, #ty> {
                #p::View::new(&self.__params[#oi..#oi1])
            }
        }
    });
    let vis = &def.vis;
    let construct = if def.inline {
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
    };
    let budget = net.budget.as_ref().map(|b| {
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
    });

    quote! {
        #head

        const _: () = {
            #(#layer_checks)*
            #(#assertions)*

            const #o0: usize = 0;
            const #st0: usize = 0;
            #(#offsets)*
            const __ACTS: [usize; 2 * #node_count] = [#(#acts_layout),*];
            const __GRADS: [usize; #node_count] = [#(#grads_layout),*];
            #tensor_table
            #product_table
            #state_table
            const __COUNTER_COUNT: usize = #counter_count;
            const __COUNTERS: [&'static str; __COUNTER_COUNT] = {
                #[allow(unused_mut)]
                let mut __out = [""; __COUNTER_COUNT];
                #[allow(unused_mut)]
                let mut __at = 0usize;
                #(#counter_pushes)*
                let _ = __at;
                __out
            };

            impl #name {
                #construct

                /// Initializes the parameters and state in place exactly as
                /// [`init`](Self::init) does with `seed`, allocating nothing.
                #[allow(dead_code)]
                #vis fn init_in_place(&mut self, seed: #p::Seed) {
                    self.__params.fill(0.0);
                    self.__state.fill(0.0);
                    #p::init_params(&__TENSORS, &mut self.__params, seed);
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

            #[allow(clippy::all)]
            impl #p::Model for #name {
                const IN: usize = #input_width;
                const OUT: usize = #w_last;
                const PARAMS: usize = #o_end;
                const STATE: usize = #st_end;
                const ACTIVATIONS: usize = #p::total(&__ACTS);
                const OUTPUT_OFFSET: usize = Self::ACTIVATIONS - (#w_last + #s_last);
                const NODE_GRADS: usize = #p::total(&__GRADS);
                const OUTPUT_GRAD_OFFSET: usize = Self::NODE_GRADS - #w_last;
                const TENSORS: &'static [#p::NamedTensor] = &__TENSORS;
                const STATE_TENSORS: &'static [#p::NamedTensor] = &__STATE_TENSORS;
                const BATCH_COUNTERS: &'static [&'static str] = &__COUNTERS;
                type Loss = #loss;

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

                fn forward(
                    ctx: &mut #p::Ctx<'_>,
                    params: &[f32],
                    state: &mut [f32],
                    x: &[f32],
                    acts: &mut [f32],
                    batch: usize,
                ) {
                    let [#(#act_parts),*] = #p::split_mut(acts, &__ACTS, batch);
                    #(#forward)*
                }

                fn backward(
                    ctx: &mut #p::Ctx<'_>,
                    sink: &mut dyn #p::GradSink,
                    x: &[f32],
                    acts: &[f32],
                    node_grads: &mut [f32],
                    mut dx: #p::Grad<'_>,
                    batch: usize,
                ) {
                    let [#(#act_parts),*] = #p::split(acts, &__ACTS, batch);
                    let [#(#d),*] = #p::split_mut(node_grads, &__GRADS, batch);
                    #(#backward)*
                }
            }

            #budget
        };
    }
}

fn src_width(net: &Net, s: Src) -> TokenStream {
    match s {
        Src::X => net.input.tokens.clone(),
        Src::Node(k) => net.nodes[k].width.tokens.clone(),
    }
}
