//! Wiring of a model: the forward graph as nodes (a sequential model is a chain), every width
//! inferred, every mismatch a spanned error (or, where sizes are not literals, a const
//! assertion at the user's token).

use super::parse::{Def, Frozen, OptValue};
use super::shapes::{self, Mistake, Shape};
use super::weights::{self, Weights};
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

/// A per-sample width: tokens of a constant expression, and the shapes the macro knows it
/// may have: one, none when the sizes are not literals, or, after a wiring mistake, the
/// shapes as written and as the error says to write (the next layers may fit either: one
/// mistake, one error).
#[derive(Clone)]
pub struct Width {
    pub tokens: TokenStream,
    pub shapes: Vec<Shape>,
}

impl Width {
    /// The first of its shapes that a layer reading `want` can read.
    fn fitting(&self, want: Shape) -> Option<Shape> {
        self.shapes.iter().copied().find(|&s| fits(s, want))
    }
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
    /// Per field, the tensors of `#[frozen(torch = ..)]` in their file.
    pub weights: Vec<Option<Weights>>,
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

/// `<ty as Layer>::IN` or `OUT` of field `field`, with its known `shapes`.
fn layer_width(def: &Def, field: usize, end: &str, shapes: Vec<Shape>) -> Width {
    let ty = &def.fields[field].ty;
    let l = layer_trait();
    let end_ident = syn::Ident::new(end, Span::call_site());
    Width {
        tokens: quote!(<#ty as #l>::#end_ident),
        shapes,
    }
}

/// Whether a layer that reads `want` can read `have`: two sequences of the same length and
/// features, or the same number of values when either is flat.
fn fits(have: Shape, want: Shape) -> bool {
    match (have, want) {
        (Shape::Seq { .. }, Shape::Seq { .. }) => have == want,
        _ => have.width() == want.width(),
    }
}

/// `have` described beside `other`, what it is compared with.
fn describe(have: Shape, other: Shape) -> String {
    match have {
        Shape::Flat(n) => errors::values(n),
        Shape::Seq { len, features } => {
            errors::positions(len, features, matches!(other, Shape::Flat(_)))
        }
    }
}

/// The message of an own mistake of field `layer`, whose type is `ty`.
fn own_mistake(layer: &str, ty: &str, m: &Mistake) -> String {
    match m {
        Mistake::Zero(size) => errors::zero_size(layer, ty, size),
        Mistake::HeadsDoNotDivide {
            width,
            heads,
            other_heads,
            other_width,
        } => errors::heads_do_not_divide(layer, *width, *heads, other_heads, other_width),
        Mistake::TableTooShort { table, len, fixed } => {
            errors::table_too_short(layer, *table, *len, fixed)
        }
        Mistake::PaddingOutside { pad, vocab, fixed } => {
            errors::padding_outside(layer, *pad, *vocab, fixed)
        }
        Mistake::VocabTooLarge { vocab, max } => errors::vocab_too_large(layer, *vocab, *max),
        Mistake::WindowTooLong { what, k, along, n } => {
            errors::window_too_long(layer, what, *k, along, *n)
        }
        Mistake::TooManyLayers { layers, max } => errors::too_many_layers(layer, *layers, *max),
        Mistake::DropoutRate(rate) => errors::dropout_rate(layer, *rate),
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

    /// A const assertion at `span` that `have` and `want` are equal, for widths the macro
    /// does not know.
    fn assert_equal(&mut self, span: Span, have: &Width, want: &Width, message: String) {
        self.assertions.push(Assertion {
            span,
            left: have.tokens.clone(),
            right: want.tokens.clone(),
            // The message is the assertion's format string: the braces of a type such as
            // `Dense<{ 4 * N }, 2>` are written doubled.
            message: message.replace('{', "{{").replace('}', "}}"),
        });
    }

    /// An error at field `field`'s type.
    fn at_field(&mut self, field: usize, message: String) {
        let ty = &self.def.fields[field].ty;
        self.errs.push(syn::Error::new_spanned(ty, message));
    }

    /// Reports the sizes the layer `l` of field `field`, whose type is `ty`, cannot have
    /// (but a size of 0 where it reads a layer that gives nothing, whose 0 is reported
    /// there); its output, which has the input's shape `input` for a layer that keeps it.
    fn own(
        &mut self,
        field: usize,
        ty: &syn::Type,
        l: shapes::Layer,
        input: Option<Shape>,
    ) -> Option<Shape> {
        let (name, written) = (self.def.fields[field].name.to_string(), shapes::render(ty));
        let fed_nothing = input.is_some_and(|i| i.width() == 0);
        for m in &l.mistakes {
            if !(fed_nothing && matches!(m, Mistake::Zero(_))) {
                self.at_field(field, own_mistake(&name, &written, m));
            }
        }
        match input {
            Some(i) if l.keeps_shape && i.width() == l.input.width() => Some(i),
            _ => l.output,
        }
    }

    /// The recurrent layer node `s` is: its field's name, and its type with the other output
    /// and that output's shape.
    fn other_output(&self, s: Src) -> Option<(String, syn::Type, Shape)> {
        let Src::Node(k) = s else { return None };
        let Op::Layer(f) = self.nodes[k].op else {
            return None;
        };
        let field = &self.def.fields[f];
        let (ty, shape) = shapes::layer(&field.ty)?.other_output?;
        Some((field.name.to_string(), ty, shape))
    }

    /// Field `field`'s layer `l` reading `have` from `input`, which `what_in` names: one error
    /// when it cannot, saying what to write; its output shapes (after an error, as written and
    /// as the error says to write).
    fn wired(
        &mut self,
        field: usize,
        input: Src,
        what_in: &str,
        have: Shape,
        l: shapes::Layer,
    ) -> Vec<Shape> {
        let ty = self.def.fields[field].ty.clone();
        if fits(have, l.input) {
            return self.own(field, &ty, l, Some(have)).into_iter().collect();
        }
        let fname = self.def.fields[field].name.to_string();
        let fixed = shapes::with_input(&ty, &l, have);
        let fixed_layer = fixed.as_ref().and_then(shapes::layer);
        let change = match (l.input, fixed_layer.as_ref().map(|f| f.input)) {
            (
                Shape::Seq { len, features },
                Some(Shape::Seq {
                    len: t,
                    features: f,
                }),
            ) => errors::sequence_fix((len, features), (t, f)),
            _ => errors::input_size_fix(have.width()),
        };
        let other = self
            .other_output(input)
            .filter(|(_, _, s)| fits(*s, l.input));
        let other = other.map(|(source, ty, shape)| {
            let sequence = matches!(shape, Shape::Seq { .. });
            errors::other_output(&source, sequence, &shapes::render(&ty))
        });
        // A flat output cut into positions is a guess: the recurrent layer's other output,
        // when it fits, is the one fix.
        let cut = matches!((have, l.input), (Shape::Flat(_), Shape::Seq { .. }));
        let own_fix = match &fixed {
            Some(_) if cut && other.is_some() => None,
            Some(t) => Some(errors::write_type(&change, &shapes::render(t))),
            None if other.is_some() => None,
            None => Some(errors::change_either(&fname, what_in)),
        };
        let fixes: Vec<String> = own_fix.into_iter().chain(other).collect();
        let message = errors::layer_reads(
            &fname,
            &describe(l.input, have),
            what_in,
            &describe(have, l.input),
            &fixes.join(", or "),
        );
        self.at_field(field, message);
        let written = l.output;
        let fixed = fixed
            .zip(fixed_layer)
            .and_then(|(t, fl)| self.own(field, &t, fl, Some(have)));
        written.into_iter().chain(fixed).collect()
    }

    fn layer(&mut self, field: usize, input: Src, what_in: &str, span: Span) -> usize {
        let f = &self.def.fields[field];
        let (fname, ty) = (f.name.to_string(), f.ty.clone());
        let known = shapes::layer(&ty);
        let want = layer_width(
            self.def,
            field,
            "IN",
            known.iter().map(|l| l.input).collect(),
        );
        let output = match (self.width_of(input), known) {
            (None, known) => {
                self.input = Some(want);
                known
                    .and_then(|l| self.own(field, &ty, l, None))
                    .into_iter()
                    .collect()
            }
            // A source of 0 values has its error: nothing to compare.
            (Some(have), Some(l)) if have.shapes.iter().any(|s| s.width() == 0) => {
                let nothing = Some(Shape::Flat(0));
                self.own(field, &ty, l, nothing).into_iter().collect()
            }
            (Some(have), Some(l)) if !have.shapes.is_empty() => {
                let shape = have.fitting(l.input).unwrap_or(have.shapes[0]);
                self.wired(field, input, what_in, shape, l)
            }
            (Some(have), known) => {
                let message = errors::layer_reads_differ(&fname, &shapes::render(&ty), what_in);
                self.assert_equal(span, &have, &want, message);
                let shape = have.shapes.first().copied();
                known
                    .and_then(|l| self.own(field, &ty, l, shape))
                    .into_iter()
                    .collect()
            }
        };
        if self.used_fields[field].is_some() {
            self.errs.at(span, errors::layer_used_twice(&fname));
        }
        self.used_fields[field] = Some(span);
        self.nodes.push(Node {
            op: Op::Layer(field),
            inputs: vec![input],
            width: layer_width(self.def, field, "OUT", output),
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
    for e in &def.frozen_errors {
        b.errs.push(e.clone());
    }
    let weights = torch_weights(def, &mut b.errs);
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
            shapes: vec![Shape::Flat(0)],
        }),
        nodes: b.nodes,
        assertions: b.assertions,
        budget,
        weights,
    })
}

/// The tensors of each `#[frozen(torch = "file")]` in its file, under `key` or the field's
/// name; what cannot be read goes to `errs`.
fn torch_weights(def: &Def, errs: &mut Errors) -> Vec<Option<Weights>> {
    let load = |f: &super::parse::Field, errs: &mut Errors| {
        let Some(Frozen::Torch { file, key }) = &f.frozen else {
            return None;
        };
        let prefix = key
            .as_ref()
            .map_or_else(|| f.name.to_string(), syn::LitStr::value);
        weights::load(file, &prefix).map_err(|e| errs.push(e)).ok()
    };
    def.fields.iter().map(|f| load(f, errs)).collect()
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
    // After a wiring mistake the output has two shapes: the loss is a mistake only if it
    // fits neither.
    let widths: Vec<usize> = output
        .iter()
        .flat_map(|&k| b.nodes[k].width.shapes.iter().map(|s| s.width()))
        .collect();
    // No outputs come from a size of 0, reported at its layer.
    let Some(&n) = widths.first().filter(|&&n| n > 0) else {
        return;
    };
    if shapes::loss_name(loss).as_deref() == Some("SoftmaxCrossEntropy")
        && widths.iter().all(|&n| n < 2)
    {
        b.errs.at(loss.span(), errors::softmax_outputs(n));
    }
    if let Some(c) = shapes::sequence_classes(loss) {
        if c == 0 || widths.iter().all(|&n| !n.is_multiple_of(c)) {
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

/// A node's expression as a user writes it: `fc1(x).relu()`, `concat(a, b)`.
fn written(e: &syn::Expr) -> String {
    let s = quote::ToTokens::to_token_stream(e).to_string();
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        let next = chars.peek().copied();
        let tight_after = matches!(out.chars().last(), Some('(' | '.' | ':' | '<'));
        let tight_before = matches!(next, Some('(' | ')' | '.' | ',' | ':' | '<' | '>'));
        if c == ' ' && (tight_after || tight_before) {
            continue;
        }
        out.push(c);
    }
    out
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
            shapes: wa
                .shapes
                .iter()
                .flat_map(|x| {
                    wb.shapes
                        .iter()
                        .map(move |y| Shape::Flat(x.width() + y.width()))
                })
                .collect(),
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
        Src::Node(_) => errors::feeding_layer(&written(&c.args[0])),
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
    // A sequence and a flat vector of as many values give the sequence.
    let pairs = wl
        .shapes
        .iter()
        .flat_map(|&ls| wr.shapes.iter().map(move |&rs| (ls, rs)));
    let fitting = pairs.clone().find(|&(ls, rs)| fits(rs, ls));
    let shapes = match (fitting, pairs.clone().next()) {
        (Some((ls, rs)), _) => vec![match ls {
            Shape::Flat(_) => rs,
            Shape::Seq { .. } => ls,
        }],
        (None, Some((ls, rs))) => {
            let (left, right) = (describe(ls, rs), describe(rs, ls));
            let (lw, rw) = (written(&bin.left), written(&bin.right));
            let message = errors::unequal_shapes(sym, (&lw, &left), (&rw, &right));
            b.errs.push(syn::Error::new_spanned(bin, message));
            Vec::new()
        }
        (None, None) => {
            b.assert_equal(bin.span(), &wr, &wl, errors::unequal_widths_differ(sym));
            Vec::new()
        }
    };
    b.nodes.push(Node {
        op,
        inputs: vec![l, r],
        width: Width {
            tokens: wl.tokens,
            shapes,
        },
    });
    Some(Src::Node(b.nodes.len() - 1))
}

#[cfg(test)]
mod tests {
    /// The messages of `#[model(attr)] struct Net { fields }`, in order.
    fn messages(attr: &str, fields: &str) -> Vec<String> {
        let attr: proc_macro2::TokenStream = attr.parse().expect("tokens");
        let item: proc_macro2::TokenStream = format!("struct Net {{ {fields} }}")
            .parse()
            .expect("tokens");
        let file: syn::File = syn::parse2(crate::model::expand(attr, item)).expect("items");
        let is_error = |m: &syn::ItemMacro| {
            let last = m.mac.path.segments.last();
            last.is_some_and(|s| s.ident == "compile_error")
        };
        let error = |i: &syn::Item| match i {
            syn::Item::Macro(m) if is_error(m) => {
                let lit: syn::LitStr = m.mac.parse_body().expect("a message");
                Some(lit.value())
            }
            _ => None,
        };
        file.items.iter().filter_map(error).collect()
    }

    /// Correct models of every sequence layer, in both forms, with literal sizes: no error.
    #[test]
    fn correct_sequence_models_have_no_error() {
        let models: &[(&str, &str)] = &[
            (
                "loss = SoftmaxCrossEntropy",
                "conv: Conv1d<6, 2, 3, 3, 1, Same, Tanh>, strided: Conv1d<6, 3, 3, 3, 2, Valid, Tanh>, \
                 proj: PerPosition<Dense<3, 4, Tanh>, 2>, norm: PerPosition<LayerNorm<4>, 2>, \
                 pool: MeanOverTime<2, 4>, head: Dense<4, 3>",
            ),
            (
                "loss = SequenceCrossEntropy<32>, input = u32, graph(e = pos(tok(x)), \
                 a = attn(ln1(e)) + e, m = fc2(fc1(ln2(a))) + a, logits = head(ln_f(m)))",
                "tok: Embedding<32, 64, 32, 0>, pos: PositionalEmbedding<40, 64, 32>, \
                 ln1: PerPosition<LayerNorm<64>, 32>, attn: CausalSelfAttention<32, 64, 8, true, false>, \
                 ln2: PerPosition<LayerNorm<64>, 32>, fc1: PerPosition<Dense<64, 256, Gelu>, 32>, \
                 fc2: PerPosition<Dense<256, 64>, 32>, ln_f: PerPosition<LayerNorm<64>, 32>, \
                 head: PerPosition<Dense<64, 32>, 32>",
            ),
            (
                "loss = SequenceCrossEntropy<3>",
                "gru: Gru<4, 2, 4, 1, Sequence>, lstm: Lstm<4, 4, 3, 2, Sequence>",
            ),
            (
                "loss = SoftmaxCrossEntropy, input = u32",
                "tok: Embedding<100, 8, 12>, drop: Dropout<96, 100>, gru: Gru<12, 8, 16>, fc: Dense<16, 4>",
            ),
            (
                "loss = SoftmaxCrossEntropy, graph(h = conv(x).tanh(), r = ff(norm(h)).tanh() + h, y = head(pool(r)))",
                "conv: Conv1d<5, 2, 4, 3, 1, Same>, norm: PerPosition<LayerNorm<4>, 5>, \
                 ff: PerPosition<Dense<4, 4>, 5>, pool: MeanOverTime<5, 4>, head: Dense<4, 3>",
            ),
            (
                "loss = Mse",
                "conv: Conv1d<8, 2, 4, 3, 1, Same>, bn: BatchNorm<4, 8>, fc: Dense<32, 1>",
            ),
        ];
        for (attr, fields) in models {
            assert_eq!(messages(attr, fields), Vec::<String>::new(), "{fields}");
        }
    }

    /// Each mistake is one message at its field, with both sizes and the type to write; what
    /// reads the layer after it is checked against it as written and as fixed, without a
    /// second error.
    #[test]
    fn each_shape_mistake_is_one_message() {
        let cases: &[(&str, &str, &str)] = &[
            (
                "loss = SoftmaxCrossEntropy",
                "gru: Gru<16, 16, 32>, fc: Dense<512, 4>",
                "`fc` reads 512 values per sample but `gru` gives 32 values per sample; make its \
                 input size 32: write `Dense<32, 4>`, or output every position of `gru`: write \
                 `Gru<16, 16, 32, 1, Sequence>`",
            ),
            (
                "loss = SoftmaxCrossEntropy",
                "fc0: Dense<4, 24>, pool: MeanOverTime<4, 8>, fc: Dense<8, 4>",
                "`pool` reads 4 positions of 8 features (32 values) but `fc0` gives 24 values per \
                 sample; make its sequence length 3: write `MeanOverTime<3, 8>`",
            ),
            (
                "loss = SoftmaxCrossEntropy",
                "fc: Dense<4, 8>, c: Conv2d<8, 8, 1, 4, 3, 3>, head: Dense<144, 4>",
                "`c` reads 64 values per sample but `fc` gives 8 values per sample; change the \
                 sizes of `c` or what `fc` gives",
            ),
            (
                "loss = SoftmaxCrossEntropy",
                "fc: Dense<4, 8>, g: Gru<1, 8, 4, 9>",
                "`g` stacks 9 recurrent layers; write at most 8",
            ),
            (
                "loss = SoftmaxCrossEntropy",
                "fc: Dense<4, 8>, d: Dropout<8, 1000>, head: Dense<8, 4>",
                "`d` drops 1000 of every 1000 values, so nothing would pass; write a rate below \
                 1000 per mille, such as 100 for 10%",
            ),
            (
                "loss = SoftmaxCrossEntropy, input = u32",
                "e: Embedding<5000000000, 1, 4>, head: Dense<4, 4>",
                "`e` has 5000000000 token ids but ids are `u32`, which address 4294967296; \
                 write a vocabulary of at most 4294967296",
            ),
            (
                "loss = SoftmaxCrossEntropy",
                "fc: Dense<4, 0>, head: Dense<0, 4>",
                "`fc: Dense<4, 0>`: the output size is 0; write a size of at least 1",
            ),
            (
                "loss = SoftmaxCrossEntropy",
                "fc: Dense<4, 0>, head: Dense<8, 4>",
                "`fc: Dense<4, 0>`: the output size is 0; write a size of at least 1",
            ),
            (
                "loss = SoftmaxCrossEntropy",
                "fc: Dense<4, 8>, head: Dense<8, 0>",
                "`head: Dense<8, 0>`: the output size is 0; write a size of at least 1",
            ),
            (
                "loss = SequenceCrossEntropy<4>",
                "gru: Gru<3, 2, 5, 1, Sequence>, lstm: Lstm<4, 5, 4, 1, Sequence>",
                "`lstm` reads 4 positions of 5 features but `gru` gives 3 positions of 5 \
                 features; make its sequence length 3: write `Lstm<3, 5, 4, 1, Sequence>`",
            ),
            (
                "loss = SoftmaxCrossEntropy, graph(h = fc1(x), a = g(x) + h, y = head(a))",
                "fc1: Dense<4, 12>, g: Gru<3, 2, 4, 1, Sequence>, head: Dense<12, 4>",
                "`g` reads 3 positions of 2 features (6 values) but the input `x` gives 4 values \
                 per sample; make its sequence length 2: write `Gru<2, 2, 4, 1, Sequence>`",
            ),
            (
                "loss = Mse, graph(h = fc1(x).relu(), c = concat(h.tanh(), x), y = head(c))",
                "fc1: Dense<4, 6>, head: Dense<12, 4>",
                "`head` reads 12 values per sample but `c` gives 10 values per sample; make its \
                 input size 10: write `Dense<10, 4>`",
            ),
            (
                "loss = Mse, graph(h = fc1(x), y = head(fc1(x) + h))",
                "fc1: Dense<4, 6>, head: Dense<6, 4>",
                "layer `fc1` is used twice; declare a second field for a second layer (weights are not shared)",
            ),
        ];
        for (attr, fields, message) in cases {
            let message = message.split_whitespace().collect::<Vec<_>>().join(" ");
            assert_eq!(messages(attr, fields), [message], "{fields}");
        }
    }
}
