//! Wiring of a model: the forward graph as nodes (a sequential model is a chain), every width
//! inferred, every mismatch a spanned error (or, where sizes are not literals, a const
//! assertion at the user's token).

use super::parse::{Def, OptValue};
use super::shapes;
use crate::errors::{self, Errors};
use crate::paths;
use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;

/// Where a node reads from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Src {
    X,
    Node(usize),
}

/// What a node computes.
pub enum Op {
    /// Field `field`'s layer.
    Layer(usize),
    /// An element-wise activation of the runtime (`Relu`, ...).
    Act(TokenStream),
    Add,
    Mul,
    Concat,
}

/// A per-sample width: tokens of a constant expression, and its value when the macro knows it.
#[derive(Clone)]
pub struct Width {
    pub tokens: TokenStream,
    pub value: Option<usize>,
}

pub struct Node {
    pub op: Op,
    pub inputs: Vec<Src>,
    pub width: Width,
}

/// A width equality the macro could not decide: checked by a const assertion at `span`.
pub struct Assertion {
    pub span: Span,
    pub left: TokenStream,
    pub right: TokenStream,
    pub message: String,
}

pub struct Net {
    pub nodes: Vec<Node>,
    pub input: Width,
    pub assertions: Vec<Assertion>,
    pub budget: Option<Budget>,
}

/// `max_bytes = max, batch = batch, optimizer = optimizer` (and `fused`): a memory budget
/// checked by a constant at `span`, the `max_bytes` value.
pub struct Budget {
    pub max: usize,
    pub span: Span,
    pub batch: usize,
    pub optimizer: syn::Type,
    pub fused: bool,
}

/// An integer literal, such as `65536` or `64_000usize`.
fn int(e: &syn::Expr) -> Option<usize> {
    match e {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(i),
            ..
        }) if matches!(i.suffix(), "" | "usize") => i.base10_parse().ok(),
        _ => None,
    }
}

/// The memory budget of the attribute, if any; every mistake in its options goes to `errs`.
fn budget(def: &Def, errs: &mut Errors) -> Option<Budget> {
    for key in &def.repeated {
        errs.at(key.span(), errors::option_twice(&key.to_string()));
    }
    let find = |name: &str| def.options.iter().find(|o| o.key == name);
    let value = |name: &str, example: usize, errs: &mut Errors| {
        let o = find(name)?;
        let OptValue::Int(e) = &o.value else {
            return None;
        };
        let v = int(e);
        if v.is_none() {
            errs.at(e.span(), errors::not_an_integer(name, example));
        }
        v.map(|v| (v, e.span()))
    };
    let max = value("max_bytes", 65536, errs);
    let batch = value("batch", 8, errs);
    if let Some((0, span)) = batch {
        errs.at(span, errors::batch_zero());
    }
    let optimizer = find("optimizer").and_then(|o| match &o.value {
        OptValue::Type(t) => Some(t.clone()),
        _ => None,
    });
    let fused = find("fused").is_some();
    let Some(max_key) = find("max_bytes") else {
        for o in &def.options {
            errs.at(o.key.span(), errors::without_budget(&o.key.to_string()));
        }
        return None;
    };
    if find("batch").is_none() {
        errs.at(max_key.key.span(), errors::budget_without_batch());
    }
    if optimizer.is_none() {
        errs.at(max_key.key.span(), errors::budget_without_optimizer());
    }
    let ((max, span), (batch, _), optimizer) = (max?, batch?, optimizer?);
    Some(Budget {
        max,
        span,
        batch,
        optimizer,
        fused,
    })
}

fn layer_trait() -> TokenStream {
    let p = paths::private();
    quote!(#p::Layer)
}

fn layer_width(def: &Def, field: usize, end: &str) -> Width {
    let ty = &def.fields[field].ty;
    let l = layer_trait();
    let end_ident = syn::Ident::new(end, Span::call_site());
    let dims = shapes::dims(ty);
    Width {
        tokens: quote!(<#ty as #l>::#end_ident),
        value: dims.map(|(i, o)| if end == "IN" { i } else { o }),
    }
}

struct Builder<'a> {
    def: &'a Def,
    errs: Errors,
    nodes: Vec<Node>,
    input: Option<Width>,
    assertions: Vec<Assertion>,
    used_fields: Vec<Option<Span>>,
}

impl Builder<'_> {
    fn width_of(&self, s: Src) -> Option<Width> {
        match s {
            Src::X => self.input.clone(),
            Src::Node(k) => Some(self.nodes[k].width.clone()),
        }
    }

    /// Requires `have == want`: an error now when both are known, else a const assertion.
    fn require(
        &mut self,
        span: Span,
        have: &Width,
        want: &Width,
        message: impl Fn(usize, usize) -> String,
        generic: String,
    ) {
        match (have.value, want.value) {
            (Some(h), Some(w)) if h != w => self.errs.at(span, message(h, w)),
            (Some(_), Some(_)) => {}
            _ => self.assertions.push(Assertion {
                span,
                left: have.tokens.clone(),
                right: want.tokens.clone(),
                message: generic,
            }),
        }
    }

    fn layer(&mut self, field: usize, input: Src, what_in: &str, span: Span) -> usize {
        let fname = self.def.fields[field].name.to_string();
        let want = layer_width(self.def, field, "IN");
        match self.width_of(input) {
            None => self.input = Some(want),
            Some(have) => self.require(
                span,
                &have,
                &want,
                |have, want| errors::layer_inputs(&fname, what_in, have, want),
                errors::layer_inputs_differ(&fname, what_in),
            ),
        }
        if self.used_fields[field].is_some() {
            self.errs.at(span, errors::layer_used_twice(&fname));
        }
        self.used_fields[field] = Some(span);
        self.nodes.push(Node {
            op: Op::Layer(field),
            inputs: vec![input],
            width: layer_width(self.def, field, "OUT"),
        });
        self.nodes.len() - 1
    }
}

fn activation(name: &str) -> Option<&'static str> {
    Some(match name {
        "relu" => "Relu",
        "leaky_relu" => "LeakyRelu",
        "elu" => "Elu",
        "sigmoid" => "Sigmoid",
        "tanh" => "Tanh",
        "gelu" => "Gelu",
        "swish" => "Swish",
        "softmax" => "Softmax",
        _ => return None,
    })
}

pub fn check(def: &Def) -> Result<Net, syn::Error> {
    if let Some(e) = &def.attr_error {
        return Err(e.clone());
    }
    let mut b = Builder {
        def,
        errs: Errors::default(),
        nodes: Vec::new(),
        input: None,
        assertions: Vec::new(),
        used_fields: vec![None; def.fields.len()],
    };
    let budget = budget(def, &mut b.errs);
    if def.fields.is_empty() {
        b.errs.at(def.name.span(), errors::model_without_layers());
    }
    for f in &def.fields {
        if !matches!(f.ty, syn::Type::Path(_)) {
            let ty = quote::ToTokens::to_token_stream(&f.ty).to_string();
            b.errs.at(f.ty.span(), errors::not_a_layer_type(&ty));
        }
    }
    if !b.errs.is_empty() {
        return Err(std::mem::take(&mut b.errs)
            .finish()
            .expect_err("errors were collected"));
    }
    match &def.graph {
        None => {
            let mut prev = Src::X;
            for (i, f) in def.fields.iter().enumerate() {
                let what = match prev {
                    Src::X => errors::model_input().to_string(),
                    Src::Node(_) => errors::feeding_layer(&def.fields[i - 1].name.to_string()),
                };
                let k = b.layer(i, prev, &what, f.ty.span());
                prev = Src::Node(k);
            }
        }
        Some((kw, assigns)) => graph(&mut b, kw, assigns),
    }
    match &def.loss {
        None => b.errs.at(def.name.span(), errors::model_without_loss()),
        Some(loss) => {
            let out = b.nodes.last().map(|n| n.width.value);
            if shapes::loss_name(loss).as_deref() == Some("SoftmaxCrossEntropy") {
                if let Some(Some(n)) = out {
                    if n < 2 {
                        b.errs.at(loss.span(), errors::softmax_outputs(n));
                    }
                }
            }
        }
    }
    let errs = b.errs;
    errs.finish()?;
    Ok(Net {
        input: b.input.unwrap_or(Width {
            tokens: quote!(0),
            value: Some(0),
        }),
        nodes: b.nodes,
        assertions: b.assertions,
        budget,
    })
}

fn graph(b: &mut Builder<'_>, kw: &syn::Ident, assigns: &[super::parse::Assign]) {
    let mut names: Vec<(String, usize, Span)> = Vec::new();
    let all: Vec<String> = assigns.iter().map(|a| a.name.to_string()).collect();
    let mut consumed: Vec<bool> = Vec::new();
    let mut x_used = false;
    for a in assigns {
        let name = a.name.to_string();
        if name == "x" || names.iter().any(|(n, ..)| *n == name) {
            b.errs.at(a.name.span(), errors::node_twice(&name));
            continue;
        }
        let Some(k) = node(b, &a.expr, &names, &all, &mut consumed, &mut x_used) else {
            continue;
        };
        names.push((name, k, a.name.span()));
    }
    if assigns.is_empty() {
        b.errs.at(kw.span(), errors::graph_empty());
        return;
    }
    if !x_used {
        b.errs.at(kw.span(), errors::graph_ignores_input());
    }
    let last = names.last().map(|(_, k, _)| *k);
    for (name, k, span) in &names {
        if Some(*k) != last && !consumed.get(*k).copied().unwrap_or(false) {
            b.errs.at(*span, errors::node_unused(name));
        }
    }
    for (i, f) in b.def.fields.iter().enumerate() {
        if b.used_fields[i].is_none() {
            b.errs
                .at(f.name.span(), errors::layer_unused(&f.name.to_string()));
        }
    }
}

fn node(
    b: &mut Builder<'_>,
    e: &syn::Expr,
    names: &[(String, usize, Span)],
    all: &[String],
    consumed: &mut Vec<bool>,
    x_used: &mut bool,
) -> Option<usize> {
    let src = operand(b, e, names, all, consumed, x_used)?;
    match src {
        Src::Node(k) => Some(k),
        Src::X => {
            b.errs.at(e.span(), errors::node_is_input());
            None
        }
    }
}

fn mark(consumed: &mut Vec<bool>, s: Src) {
    if let Src::Node(k) = s {
        if consumed.len() <= k {
            consumed.resize(k + 1, false);
        }
        consumed[k] = true;
    }
}

fn operand(
    b: &mut Builder<'_>,
    e: &syn::Expr,
    names: &[(String, usize, Span)],
    all: &[String],
    consumed: &mut Vec<bool>,
    x_used: &mut bool,
) -> Option<Src> {
    let unsupported = errors::graph_node_form();
    match e {
        syn::Expr::Paren(p) => operand(b, &p.expr, names, all, consumed, x_used),
        syn::Expr::Path(p) if p.path.get_ident().is_some() => {
            let id = p.path.get_ident()?;
            let name = id.to_string();
            if name == "x" {
                *x_used = true;
                return Some(Src::X);
            }
            match names.iter().rev().find(|(n, ..)| *n == name) {
                Some((_, k, _)) => Some(Src::Node(*k)),
                None if all.contains(&name) => {
                    b.errs.at(id.span(), errors::node_before_definition(&name));
                    None
                }
                None => {
                    let known: Vec<String> = core::iter::once("x".to_string())
                        .chain(names.iter().map(|(n, ..)| n.clone()))
                        .collect();
                    b.errs.at(id.span(), errors::unknown_node(&name, &known));
                    None
                }
            }
        }
        syn::Expr::Call(c) => {
            let syn::Expr::Path(f) = &*c.func else {
                b.errs.at(c.func.span(), unsupported);
                return None;
            };
            let Some(fid) = f.path.get_ident() else {
                b.errs.at(f.span(), unsupported);
                return None;
            };
            let fname = fid.to_string();
            let args: Vec<Option<Src>> = c
                .args
                .iter()
                .map(|a| operand(b, a, names, all, consumed, x_used))
                .collect();
            if fname == "concat" {
                if args.len() != 2 {
                    b.errs.at(fid.span(), errors::concat_arity());
                    return None;
                }
                let (a0, a1) = (args[0]?, args[1]?);
                mark(consumed, a0);
                mark(consumed, a1);
                let (wa, wb) = (b.width_of(a0)?, b.width_of(a1)?);
                let (ta, tb) = (wa.tokens.clone(), wb.tokens.clone());
                b.nodes.push(Node {
                    op: Op::Concat,
                    inputs: vec![a0, a1],
                    width: Width {
                        tokens: quote!((#ta + #tb)),
                        value: wa.value.zip(wb.value).map(|(x, y)| x + y),
                    },
                });
                return Some(Src::Node(b.nodes.len() - 1));
            }
            let Some(field) = b.def.fields.iter().position(|f| f.name == *fid) else {
                let layers = errors::quoted_list(b.def.fields.iter().map(|f| &f.name));
                b.errs.at(fid.span(), errors::not_a_layer(&fname, &layers));
                return None;
            };
            if args.len() != 1 {
                b.errs.at(fid.span(), errors::layer_arity(&fname));
                return None;
            }
            let Some(input) = args[0] else {
                // Counted as used, so that the one mistake inside is the only error.
                b.used_fields[field].get_or_insert(c.span());
                return None;
            };
            mark(consumed, input);
            let what = match input {
                Src::X => errors::graph_input().to_string(),
                Src::Node(_) => {
                    errors::feeding_layer(&quote::ToTokens::to_token_stream(&c.args[0]).to_string())
                }
            };
            Some(Src::Node(b.layer(field, input, &what, c.span())))
        }
        syn::Expr::MethodCall(m) => {
            let name = m.method.to_string();
            let ty = match (&m.turbofish, activation(&name)) {
                (Some(t), _) if name == "act" && t.args.len() == 1 => {
                    let arg = &t.args[0];
                    quote_spanned!(m.method.span()=> #arg)
                }
                (None, Some(act)) => {
                    let ty = syn::Ident::new(act, m.method.span());
                    let p = paths::private_at(m.method.span());
                    quote_spanned!(m.method.span()=> #p::layers::#ty)
                }
                _ => {
                    b.errs.at(m.method.span(), errors::not_an_activation(&name));
                    return None;
                }
            };
            if !m.args.is_empty() {
                b.errs
                    .at(m.method.span(), errors::activation_arguments(&name));
                return None;
            }
            let input = operand(b, &m.receiver, names, all, consumed, x_used)?;
            mark(consumed, input);
            let width = b.width_of(input)?;
            b.nodes.push(Node {
                op: Op::Act(ty),
                inputs: vec![input],
                width,
            });
            Some(Src::Node(b.nodes.len() - 1))
        }
        syn::Expr::Binary(bin) => {
            let op = match bin.op {
                syn::BinOp::Add(_) => Op::Add,
                syn::BinOp::Mul(_) => Op::Mul,
                _ => {
                    b.errs.at(bin.op.span(), unsupported);
                    return None;
                }
            };
            let l = operand(b, &bin.left, names, all, consumed, x_used);
            let r = operand(b, &bin.right, names, all, consumed, x_used);
            let (l, r) = (l?, r?);
            mark(consumed, l);
            mark(consumed, r);
            let (wl, wr) = (b.width_of(l)?, b.width_of(r)?);
            let sym = if matches!(op, Op::Add) { "+" } else { "*" };
            b.require(
                bin.span(),
                &wr,
                &wl,
                |right, left| errors::unequal_widths(sym, left, right),
                errors::unequal_widths_differ(sym),
            );
            b.nodes.push(Node {
                op,
                inputs: vec![l, r],
                width: wl,
            });
            Some(Src::Node(b.nodes.len() - 1))
        }
        _ => {
            b.errs.at(e.span(), unsupported);
            None
        }
    }
}
