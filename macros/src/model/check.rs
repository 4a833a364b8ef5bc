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

/// The runtime's activation a method of that name applies (`relu` -> `Relu`).
fn runtime_activation(name: &str) -> Option<&'static str> {
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

/// Checks the fields, the wiring and the loss of a model; every mistake of a phase is
/// reported together.
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
    check_fields(def, &mut b.errs);
    if !b.errs.is_empty() {
        return Err(std::mem::take(&mut b.errs)
            .finish()
            .expect_err("errors were collected"));
    }
    let output = match &def.graph {
        None => chain(&mut b),
        Some((kw, assigns)) => graph(&mut b, kw, assigns),
    };
    check_loss(&mut b, output);
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

/// At least one field, each a layer type.
fn check_fields(def: &Def, errs: &mut Errors) {
    if def.fields.is_empty() {
        errs.at(def.name.span(), errors::model_without_layers());
    }
    for f in &def.fields {
        if !matches!(f.ty, syn::Type::Path(_)) {
            let ty = quote::ToTokens::to_token_stream(&f.ty).to_string();
            errs.at(f.ty.span(), errors::not_a_layer_type(&ty));
        }
    }
}

/// A sequential model: each field's layer reads the one before; the output node.
fn chain(b: &mut Builder<'_>) -> Option<usize> {
    let def = b.def;
    let mut prev = Src::X;
    for (i, f) in def.fields.iter().enumerate() {
        let what = match prev {
            Src::X => errors::model_input().to_string(),
            Src::Node(_) => errors::feeding_layer(&def.fields[i - 1].name.to_string()),
        };
        let k = b.layer(i, prev, &what, f.ty.span());
        prev = Src::Node(k);
    }
    b.nodes.len().checked_sub(1)
}

/// A loss is given, `SoftmaxCrossEntropy` has at least two classes, and the outputs of a
/// `SequenceCrossEntropy<C>` are whole positions of `C` logits; the outputs are checked only
/// when the `output` node is known (a graph whose last node has a mistake has none).
fn check_loss(b: &mut Builder<'_>, output: Option<usize>) {
    let def = b.def;
    let Some(loss) = &def.loss else {
        b.errs.at(def.name.span(), errors::model_without_loss());
        return;
    };
    let Some(n) = output.and_then(|k| b.nodes[k].width.value) else {
        return;
    };
    if shapes::loss_name(loss).as_deref() == Some("SoftmaxCrossEntropy") && n < 2 {
        b.errs.at(loss.span(), errors::softmax_outputs(n));
    }
    if let Some(c) = shapes::sequence_classes(loss) {
        if c == 0 || n % c != 0 {
            b.errs.at(loss.span(), errors::sequence_outputs(n, c));
        }
    }
}

/// A graph as its nodes are read.
struct Graph {
    /// The nodes defined so far: name, node and the span of the name.
    names: Vec<(String, usize, Span)>,
    /// The names of every node, defined yet or not.
    all: Vec<String>,
    /// Names whose mistake is reported (a node whose definition has one, an unknown name):
    /// reading them again reads nothing, without a second error.
    reported: Vec<String>,
    /// Which nodes a later one reads.
    consumed: Vec<bool>,
    /// Whether a node reads the input `x`.
    x_used: bool,
}

impl Graph {
    /// Notes that `s` is read.
    fn mark(&mut self, s: Src) {
        if let Src::Node(k) = s {
            if self.consumed.len() <= k {
                self.consumed.resize(k + 1, false);
            }
            self.consumed[k] = true;
        }
    }
}

/// A graph's nodes, then what it leaves unused; its output node, unless the last node has a
/// mistake.
fn graph(b: &mut Builder<'_>, kw: &syn::Ident, assigns: &[super::parse::Assign]) -> Option<usize> {
    let mut g = Graph {
        names: Vec::new(),
        all: assigns.iter().map(|a| a.name.to_string()).collect(),
        reported: Vec::new(),
        consumed: Vec::new(),
        x_used: false,
    };
    let mut output = None;
    for a in assigns {
        let name = a.name.to_string();
        let twice = name == "x" || g.names.iter().any(|(n, ..)| *n == name);
        if twice {
            b.errs.at(a.name.span(), errors::node_twice(&name));
        }
        output = node(b, &mut g, &a.expr).filter(|_| !twice);
        match output {
            Some(k) => g.names.push((name, k, a.name.span())),
            None if !twice => g.reported.push(name),
            None => {}
        }
    }
    if assigns.is_empty() {
        b.errs.at(kw.span(), errors::graph_empty());
        return None;
    }
    // What a node with a mistake would have read is not known: nothing is called unused
    // after one.
    if b.errs.is_empty() {
        unused(b, &g, kw);
    }
    output
}

/// Reports the input, the nodes (but the last) and the layers that no node reads.
fn unused(b: &mut Builder<'_>, g: &Graph, kw: &syn::Ident) {
    if !g.x_used {
        b.errs.at(kw.span(), errors::graph_ignores_input());
    }
    let last = g.names.last().map(|(_, k, _)| *k);
    for (name, k, span) in &g.names {
        if Some(*k) != last && !g.consumed.get(*k).copied().unwrap_or(false) {
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

/// The node a graph's `name = e` defines.
fn node(b: &mut Builder<'_>, g: &mut Graph, e: &syn::Expr) -> Option<usize> {
    match operand(b, g, e)? {
        Src::Node(k) => Some(k),
        Src::X => {
            b.errs.at(e.span(), errors::node_is_input());
            None
        }
    }
}

/// What `e` reads or computes, its new nodes pushed.
fn operand(b: &mut Builder<'_>, g: &mut Graph, e: &syn::Expr) -> Option<Src> {
    match e {
        syn::Expr::Paren(p) => operand(b, g, &p.expr),
        syn::Expr::Path(p) if p.path.get_ident().is_some() => {
            named_operand(b, g, p.path.get_ident()?)
        }
        syn::Expr::Call(c) => call(b, g, c),
        syn::Expr::MethodCall(m) => activation(b, g, m),
        syn::Expr::Binary(bin) => binary(b, g, bin),
        _ => {
            b.errs.at(e.span(), errors::graph_node_form());
            None
        }
    }
}

/// `x` or a node defined before.
fn named_operand(b: &mut Builder<'_>, g: &mut Graph, id: &syn::Ident) -> Option<Src> {
    let name = id.to_string();
    if name == "x" {
        g.x_used = true;
        return Some(Src::X);
    }
    match g.names.iter().rev().find(|(n, ..)| *n == name) {
        Some((_, k, _)) => Some(Src::Node(*k)),
        None if g.reported.contains(&name) => None,
        None if g.all.contains(&name) => {
            b.errs.at(id.span(), errors::node_before_definition(&name));
            None
        }
        None => {
            let known: Vec<String> = core::iter::once("x".to_string())
                .chain(g.names.iter().map(|(n, ..)| n.clone()))
                .collect();
            b.errs.at(id.span(), errors::unknown_node(&name, &known));
            g.reported.push(name);
            None
        }
    }
}

/// `layer(node)` or `concat(a, b)`.
fn call(b: &mut Builder<'_>, g: &mut Graph, c: &syn::ExprCall) -> Option<Src> {
    let syn::Expr::Path(f) = &*c.func else {
        b.errs.at(c.func.span(), errors::graph_node_form());
        return None;
    };
    let Some(fid) = f.path.get_ident() else {
        b.errs.at(f.span(), errors::graph_node_form());
        return None;
    };
    let args: Vec<Option<Src>> = c.args.iter().map(|a| operand(b, g, a)).collect();
    args.iter().flatten().for_each(|&a| g.mark(a));
    if fid == "concat" {
        return concat(b, fid, &args);
    }
    layer_call(b, c, fid, &args)
}

/// `concat(a, b)`, whose operands are `args`.
fn concat(b: &mut Builder<'_>, fid: &syn::Ident, args: &[Option<Src>]) -> Option<Src> {
    if args.len() != 2 {
        b.errs.at(fid.span(), errors::concat_arity());
        return None;
    }
    let (a0, a1) = (args[0]?, args[1]?);
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
    Some(Src::Node(b.nodes.len() - 1))
}

/// `layer(node)`: the field `fid`'s layer, whose operand is `args`.
fn layer_call(
    b: &mut Builder<'_>,
    c: &syn::ExprCall,
    fid: &syn::Ident,
    args: &[Option<Src>],
) -> Option<Src> {
    let fname = fid.to_string();
    let Some(field) = b.def.fields.iter().position(|f| f.name == *fid) else {
        let layers = errors::quoted_list(b.def.fields.iter().map(|f| &f.name));
        b.errs.at(fid.span(), errors::not_a_layer(&fname, &layers));
        return None;
    };
    if args.len() != 1 {
        b.errs.at(fid.span(), errors::layer_arity(&fname));
        return None;
    }
    let input = args[0]?;
    let what = match input {
        Src::X => errors::graph_input().to_string(),
        Src::Node(_) => {
            errors::feeding_layer(&quote::ToTokens::to_token_stream(&c.args[0]).to_string())
        }
    };
    Some(Src::Node(b.layer(field, input, &what, c.span())))
}

/// `node.relu()` (a runtime activation) or `node.act::<Type>()`.
fn activation(b: &mut Builder<'_>, g: &mut Graph, m: &syn::ExprMethodCall) -> Option<Src> {
    let input = operand(b, g, &m.receiver);
    input.iter().for_each(|&i| g.mark(i));
    let name = m.method.to_string();
    let ty = match (&m.turbofish, runtime_activation(&name)) {
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
    let input = input?;
    let width = b.width_of(input)?;
    b.nodes.push(Node {
        op: Op::Act(ty),
        inputs: vec![input],
        width,
    });
    Some(Src::Node(b.nodes.len() - 1))
}

/// `a + b` or `a * b`, of equal widths.
fn binary(b: &mut Builder<'_>, g: &mut Graph, bin: &syn::ExprBinary) -> Option<Src> {
    let l = operand(b, g, &bin.left);
    let r = operand(b, g, &bin.right);
    l.iter().chain(&r).for_each(|&s| g.mark(s));
    let op = match bin.op {
        syn::BinOp::Add(_) => Op::Add,
        syn::BinOp::Mul(_) => Op::Mul,
        _ => {
            b.errs.at(bin.op.span(), errors::graph_node_form());
            return None;
        }
    };
    let (l, r) = (l?, r?);
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
