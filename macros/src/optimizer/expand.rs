//! Code generation: the hyper-parameter struct, its builders, and the `Rule` implementation
//! with a per-step scalar struct and a lane update generic over the runtime's `Lane`.

use super::check::{Rule, StepStmt, UpdateStmt};
use super::parse::Def;
use crate::expr::emit::{self, Prec};
use crate::expr::ir::{self, Node, Ref, TExpr};
use crate::paths;
use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use std::cell::RefCell;

fn hyper_ident(i: usize) -> proc_macro2::Ident {
    format_ident!("__h{}", i)
}

/// The struct, `Default` and builders: shared by the real and the fallback expansion.
fn header(def: &Def, defaults: &[(f64, String)]) -> TokenStream {
    let name = &def.name;
    let vis = &def.vis;
    let attrs = &def.attrs;
    let fields = def.hyper.iter().zip(defaults).map(|(h, (_, text))| {
        let fname = &h.name;
        let fattrs = &h.attrs;
        let doc = if h.attrs.iter().any(|a| a.path().is_ident("doc")) {
            quote!()
        } else {
            let d = format!("Hyper-parameter `{fname}` (default `{text}`).");
            quote!(#[doc = #d])
        };
        quote!(#(#fattrs)* #doc pub #fname: f32,)
    });
    let inits = def.hyper.iter().zip(defaults).map(|(h, (v, _))| {
        let fname = &h.name;
        let lit = proc_macro2::Literal::f32_suffixed(*v as f32);
        quote!(#fname: #lit,)
    });
    let builders = def.hyper.iter().zip(defaults).map(|(h, (_, text))| {
        let fname = &h.name;
        let with = format_ident!("with_{}", fname);
        let doc = format!("Returns `self` with `{fname}` set to `value` (default `{text}`).");
        quote! {
            #[doc = #doc]
            #[must_use]
            pub fn #with(mut self, value: f32) -> Self {
                self.#fname = value;
                self
            }
        }
    });
    quote! {
        #(#attrs)*
        #[derive(Clone, Copy, Debug, PartialEq)]
        #vis struct #name {
            #(#fields)*
        }

        impl ::core::default::Default for #name {
            fn default() -> Self {
                #name { #(#inits)* }
            }
        }

        impl #name {
            #(#builders)*
        }
    }
}

fn str_list<'a>(names: impl Iterator<Item = &'a syn::Ident>) -> TokenStream {
    let s = names.map(|n| n.to_string());
    quote!(&[#(#s),*])
}

/// What the failed definition still provides, so that one mistake gives one error.
pub fn fallback(def: &Def) -> TokenStream {
    let defaults: Vec<(f64, String)> = def
        .hyper
        .iter()
        .map(|h| {
            (
                0.0,
                quote::ToTokens::to_token_stream(&h.default).to_string(),
            )
        })
        .collect();
    let head = header(def, &defaults);
    let name = &def.name;
    let p = paths::private();
    let slots = str_list(def.slots.iter().map(|s| &s.name));
    let (learning_rate, learning_rate_impl) = learning_rate_items(def);
    quote! {
        #head
        const _: () = {
            impl #p::Rule for #name {
                const NAME: &'static str = ::core::stringify!(#name);
                const HYPER: &'static [&'static str] = &[];
                const SLOTS: &'static [&'static str] = #slots;
                const CARRIED: &'static [&'static str] = &[];
                type Step = ();
                type Decimals = ();
                fn hyper(&self, _: &str) -> ::core::option::Option<f32> { ::core::option::Option::None }
                fn set_hyper(&mut self, _: &str, _: f32) -> bool { false }
                #learning_rate
                fn slot_init(&self, _: usize) -> f32 { 0.0 }
                fn carried_init(&self, _: usize) -> f32 { 0.0 }
                fn begin_step(&self, _: u64, _: &mut [f32], _: &mut ()) {}
                fn update<__L: #p::Lane>(_: &(), _: &mut __L, _: __L, _: &mut [__L]) {}
            }
            #learning_rate_impl
        };
    }
}

/// The real expansion: the header and the `Rule` implementation with its `__Step` struct.
pub fn rule(def: &Def, r: &Rule) -> TokenStream {
    let head = header(def, &r.defaults);
    let name = &def.name;
    let p = paths::private();
    let hyper_names = str_list(def.hyper.iter().map(|h| &h.name));
    let slot_names = str_list(def.slots.iter().map(|s| &s.name));
    let carry_names = str_list(def.carry.iter().map(|c| &c.name));
    let fields: Vec<&syn::Ident> = def.hyper.iter().map(|h| &h.name).collect();
    let hyper_access = hyper_access(&fields);
    let slot_init = init_match(&fields, &r.slot_inits);
    let carried_init = init_match(&fields, &r.carry_inits);
    let step = StepCode {
        fields: &fields,
        prec: r.prec,
        widened: RefCell::new(Vec::new()),
    };
    let lifted_fields = lifted_fields(&r.lifted);
    let begin_step = step.begin_step(def.carry.len(), r);
    let decimals = step.widened.borrow().len();
    let m = paths::math();
    let update = if r.tensor_wise {
        quote!()
    } else {
        update_body(def.slots.len(), r)
    };
    let tensor_items = if r.tensor_wise {
        let slot_names: Vec<String> = def.slots.iter().map(|s| s.name.to_string()).collect();
        match super::tensorwise::items(r, &slot_names) {
            Ok(items) => items,
            Err(e) => {
                let mut out = e.to_compile_error();
                out.extend(fallback(def));
                return out;
            }
        }
    } else {
        quote!()
    };
    let (learning_rate, learning_rate_impl) = learning_rate_items(def);
    let view_items = view_items(&fields, r);
    quote! {
        #head

        const _: () = {
            #[derive(Clone, Copy)]
            pub struct __Step {
                #(#lifted_fields)*
            }

            #[allow(unused_variables, unused_mut, unused_parens, clippy::all)]
            impl #p::Rule for #name {
                const NAME: &'static str = ::core::stringify!(#name);
                const HYPER: &'static [&'static str] = #hyper_names;
                const SLOTS: &'static [&'static str] = #slot_names;
                const CARRIED: &'static [&'static str] = #carry_names;
                type Step = __Step;
                type Decimals = [#m::Decimal; #decimals];

                #hyper_access

                #learning_rate

                fn slot_init(&self, index: usize) -> f32 {
                    #slot_init
                }

                fn carried_init(&self, index: usize) -> f32 {
                    #carried_init
                }

                #[inline]
                fn begin_step(
                    &self,
                    __t: u64,
                    __carried: &mut [f32],
                    __decimals: &mut [#m::Decimal; #decimals],
                ) -> __Step {
                    #begin_step
                }

                #[inline(always)]
                fn update<__L: #p::Lane>(__s: &__Step, __p: &mut __L, __g: __L, __slots: &mut [__L]) {
                    #update
                }

                #tensor_items

                #view_items
            }

            #learning_rate_impl
        };
    }
}

/// The learning rate of a rule: `Rule`'s `learning_rate` and `learning_rate_mut` (the field
/// of the hyper-parameter named `lr`, or `None` without one), and the implementation of
/// `LearningRate` for a rule with one.
fn learning_rate_items(def: &Def) -> (TokenStream, TokenStream) {
    let p = paths::private();
    let Some(lr) = def.hyper.iter().map(|h| &h.name).find(|n| *n == "lr") else {
        let none = quote! {
            fn learning_rate(&self) -> ::core::option::Option<f32> {
                ::core::option::Option::None
            }
            fn learning_rate_mut(&mut self) -> ::core::option::Option<&mut f32> {
                ::core::option::Option::None
            }
        };
        return (none, quote!());
    };
    let name = &def.name;
    let accessors = quote! {
        fn learning_rate(&self) -> ::core::option::Option<f32> {
            ::core::option::Option::Some(self.#lr)
        }
        fn learning_rate_mut(&mut self) -> ::core::option::Option<&mut f32> {
            ::core::option::Option::Some(&mut self.#lr)
        }
    };
    let implementation = quote! {
        impl #p::LearningRate for #name {
            fn lr(&self) -> f32 {
                self.#lr
            }
            fn set_lr(&mut self, lr: f32) {
                self.#lr = lr;
            }
        }
    };
    (accessors, implementation)
}

/// `hyper` and `set_hyper`, by field name.
fn hyper_access(fields: &[&syn::Ident]) -> TokenStream {
    let field_strs: Vec<String> = fields.iter().map(|f| f.to_string()).collect();
    quote! {
        fn hyper(&self, name: &str) -> ::core::option::Option<f32> {
            match name {
                #(#field_strs => ::core::option::Option::Some(self.#fields),)*
                _ => ::core::option::Option::None,
            }
        }

        fn set_hyper(&mut self, name: &str, value: f32) -> bool {
            match name {
                #(#field_strs => { self.#fields = value; true })*
                _ => false,
            }
        }
    }
}

/// A hyper-parameter as an initial value reads it: the field, widened to its decimal value
/// inside `f64(..)`.
fn init_reference(fields: &[&syn::Ident], r: Ref, p: Prec) -> TokenStream {
    let m = paths::math();
    match (r, p) {
        (Ref::Hyper(i), Prec::F32) => {
            let fname = fields[i];
            quote!(self.#fname)
        }
        (Ref::Hyper(i), Prec::F64) => {
            let fname = fields[i];
            quote!(#m::decimal_f64(self.#fname))
        }
        _ => unreachable!("initial values read only hyper-parameters"),
    }
}

/// `PARAM_SLOTS`, `VIEWS` and `view`, for a rule with slots that start as the parameter or
/// with views. A view computes its scalar parts from the hyper-parameters, in `f32` (`f64(..)`
/// from their decimals), then its lane code.
fn view_items(fields: &[&syn::Ident], r: &Rule) -> TokenStream {
    let p = paths::private();
    let param_slots = &r.param_slots;
    let param_slots = (!param_slots.is_empty())
        .then(|| quote!(const PARAM_SLOTS: &'static [usize] = &[#(#param_slots),*];));
    if r.views.is_empty() {
        return quote!(#param_slots);
    }
    let names = r.views.iter().map(|v| &v.name);
    let refs = |r: Ref, p: Prec| init_reference(fields, r, p);
    let lane_refs = |r: Ref| match r {
        Ref::P => quote!(__pv),
        Ref::Slot(j) => quote!(__slots[#j]),
        _ => unreachable!("a view's lane code reads the parameter and its slots"),
    };
    let f = lane_type();
    let arms = r.views.iter().enumerate().map(|(i, v)| {
        let field_types = lifted_fields(&v.lifted);
        let values = v.lifted.iter().enumerate().map(|(k, e)| {
            let id = emit::lifted_field(k);
            let value = emit::scalar(e, &refs, Prec::F32);
            quote!(#id: #value,)
        });
        let lane = emit::lane(&v.expr, &f, &lane_refs, &v.lifted, &quote!(__vs));
        quote! {
            #i => {
                struct __View { #(#field_types)* }
                let __vs = __View { #(#values)* };
                #lane
            }
        }
    });
    quote! {
        #param_slots

        const VIEWS: &'static [&'static str] = &[#(#names),*];

        #[inline]
        fn view<__L: #p::Lane>(&self, __view: usize, __pv: __L, __slots: &[__L]) -> __L {
            match __view {
                #(#arms)*
                _ => __pv,
            }
        }
    }
}

/// The body of `slot_init` or `carried_init`: a `match` on the index over `inits`.
fn init_match(fields: &[&syn::Ident], inits: &[TExpr]) -> TokenStream {
    let refs = |r: Ref, p: Prec| init_reference(fields, r, p);
    let arms = inits.iter().enumerate().map(|(i, e)| {
        let v = emit::scalar(e, &refs, Prec::F32);
        quote!(#i => #v,)
    });
    quote!(match index { #(#arms)* _ => 0.0 })
}

/// The fields of `__Step`: a flag for each lifted comparison, an `f32` for each other scalar.
fn lifted_fields(lifted: &[TExpr]) -> Vec<TokenStream> {
    lifted
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let id = emit::lifted_field(i);
            if matches!(e.node, Node::Cmp(..)) {
                quote!(#id: bool,)
            } else {
                quote!(#id: f32,)
            }
        })
        .collect()
}

/// Scalar code of `begin_step`: the hyper-parameter fields, the precision of `step`, and the
/// hyper-parameters it widens to `f64`, in the order of their kept decimals.
struct StepCode<'a> {
    fields: &'a [&'a syn::Ident],
    prec: Prec,
    widened: RefCell<Vec<usize>>,
}

impl StepCode<'_> {
    /// Hyper-parameter `i` widened to its decimal value, through its kept decimal (the first
    /// widening of `i` gives it the next one).
    fn decimal(&self, i: usize) -> TokenStream {
        let mut widened = self.widened.borrow_mut();
        let at = widened.iter().position(|&w| w == i).unwrap_or_else(|| {
            widened.push(i);
            widened.len() - 1
        });
        let fname = self.fields[i];
        quote!(__decimals[#at].of(self.#fname))
    }

    /// A reference in the step's own precision is its local; inside `f64(..)` of an `f32`
    /// step, hyper-parameters are widened to their decimal values and the rest converted.
    fn reference(&self, r: Ref, p: Prec) -> TokenStream {
        let local = match r {
            Ref::Hyper(i) => hyper_ident(i),
            Ref::T => format_ident!("__tv"),
            Ref::StepLet(i) => format_ident!("__sl{}", i),
            Ref::Carried(i) => format_ident!("__c{}", i),
            _ => unreachable!("step code reads only scalars"),
        };
        match (p == self.prec, r) {
            (true, _) => quote!(#local),
            (false, Ref::Hyper(i)) => self.decimal(i),
            (false, Ref::T) => quote!((__t as f64)),
            (false, _) => quote!(f64::from(#local)),
        }
    }

    fn scalar(&self, e: &TExpr) -> TokenStream {
        emit::scalar(e, &|r, p| self.reference(r, p), self.prec)
    }

    /// An `f32` value in the step's precision.
    fn widen(&self, x: TokenStream) -> TokenStream {
        match self.prec {
            Prec::F32 => x,
            Prec::F64 => quote!(f64::from(#x)),
        }
    }

    /// A value of the step's precision as an `f32`.
    fn narrow(&self, x: TokenStream) -> TokenStream {
        match self.prec {
            Prec::F32 => x,
            Prec::F64 => quote!((#x) as f32),
        }
    }

    /// The body of `begin_step`: the inputs it reads, the carried scalars loaded, the `step`
    /// statements, the carried scalars stored, and the `__Step` of the lifted scalars.
    fn begin_step(&self, carried: usize, r: &Rule) -> TokenStream {
        let ty = self.prec.ty();
        let inputs = self.input_bindings(r);
        let carry_loads = (0..carried).map(|i| {
            let id = format_ident!("__c{}", i);
            let v = self.widen(quote!(__carried[#i]));
            quote!(let mut #id: #ty = #v;)
        });
        let carry_stores = (0..carried).map(|i| {
            let id = format_ident!("__c{}", i);
            let v = self.narrow(quote!(#id));
            quote!(__carried[#i] = #v;)
        });
        let step_stmts = r.step.iter().map(|s| match s {
            StepStmt::Let(i, e) => {
                let id = format_ident!("__sl{}", i);
                let v = self.scalar(e);
                quote!(let #id: #ty = #v;)
            }
            StepStmt::SetCarried(i, e) => {
                let id = format_ident!("__c{}", i);
                let v = self.scalar(e);
                quote!(#id = #v;)
            }
        });
        let lifted_values = r.lifted.iter().enumerate().map(|(i, e)| {
            let id = emit::lifted_field(i);
            let v = self.scalar(e);
            let v = if matches!(e.node, Node::Cmp(..)) {
                v
            } else {
                self.narrow(v)
            };
            quote!(#id: #v,)
        });
        quote! {
            #inputs
            #(#carry_loads)*
            #(#step_stmts)*
            #(#carry_stores)*
            __Step { #(#lifted_values)* }
        }
    }

    /// A local for each hyper-parameter the step reads, and for `t` when it reads it.
    fn input_bindings(&self, r: &Rule) -> TokenStream {
        let mut used_hypers = vec![false; self.fields.len()];
        let mut uses_t = false;
        let mut mark = |e: &TExpr| {
            ir::visit_refs(e, &mut |r| match r {
                Ref::Hyper(i) => used_hypers[i] = true,
                Ref::T => uses_t = true,
                _ => {}
            })
        };
        for s in &r.step {
            match s {
                StepStmt::Let(_, e) | StepStmt::SetCarried(_, e) => mark(e),
            }
        }
        r.lifted.iter().for_each(&mut mark);
        let hyper_binds = used_hypers
            .iter()
            .enumerate()
            .filter(|(_, u)| **u)
            .map(|(i, _)| {
                let id = hyper_ident(i);
                let fname = self.fields[i];
                match self.prec {
                    Prec::F32 => quote!(let #id: f32 = self.#fname;),
                    Prec::F64 => {
                        let v = self.decimal(i);
                        quote!(let #id: f64 = #v;)
                    }
                }
            });
        let ty = self.prec.ty();
        let t_bind = uses_t.then(|| quote!(let __tv: #ty = __t as #ty;));
        quote!(#(#hyper_binds)* #t_bind)
    }
}

/// A lane of the update as lane code reads it.
fn lane_reference(r: Ref) -> TokenStream {
    match r {
        Ref::P => quote!(__pv),
        Ref::G => quote!(__g),
        Ref::Slot(j) => {
            let id = format_ident!("__slot{}", j);
            quote!(#id)
        }
        Ref::Let(i) => {
            let id = format_ident!("__l{}", i);
            quote!(#id)
        }
        _ => unreachable!("scalars are lifted out of lane code"),
    }
}

/// The lane type parameter of `update`, bounded by the runtime's `Lane`.
fn lane_type() -> TokenStream {
    quote!(__L)
}

/// The body of `update`: the parameter and the slots loaded, the `update` statements, the
/// assigned slots and the parameter stored.
fn update_body(slots: usize, r: &Rule) -> TokenStream {
    let f = lane_type();
    let mut assigned = vec![false; slots];
    for s in &r.branches[0].stmts {
        if let UpdateStmt::SetSlot(j, _) = s {
            assigned[*j] = true;
        }
    }
    let slot_loads = assigned.iter().enumerate().map(|(j, a)| {
        let id = format_ident!("__slot{}", j);
        if *a {
            quote!(let mut #id: #f = __slots[#j];)
        } else {
            quote!(let #id: #f = __slots[#j];)
        }
    });
    let slot_stores = assigned
        .iter()
        .enumerate()
        .filter(|(_, a)| **a)
        .map(|(j, _)| {
            let id = format_ident!("__slot{}", j);
            quote!(__slots[#j] = #id;)
        });
    let update_stmts = r.branches[0]
        .stmts
        .iter()
        .map(|s| update_statement(s, &r.lifted));
    quote! {
        let mut __pv: #f = *__p;
        #(#slot_loads)*
        #(#update_stmts)*
        #(#slot_stores)*
        *__p = __pv;
    }
}

/// One `update` statement as lane code, reading the lifted scalars from `__s`.
fn update_statement(s: &UpdateStmt, lifted: &[TExpr]) -> TokenStream {
    let f = lane_type();
    let step_binding = quote!(__s);
    let lane = |e: &TExpr| emit::lane(e, &f, &lane_reference, lifted, &step_binding);
    match s {
        UpdateStmt::Let(i, e) => {
            let id = format_ident!("__l{}", i);
            let v = lane(e);
            quote!(let #id: #f = #v;)
        }
        UpdateStmt::SetP(e) => {
            let v = lane(e);
            quote!(__pv = #v;)
        }
        UpdateStmt::SetSlot(j, e) => {
            let id = format_ident!("__slot{}", j);
            let v = lane(e);
            quote!(#id = #v;)
        }
    }
}
