//! Typed IR: names resolved to what they denote, every node typed as a per-step scalar or a
//! per-element lane, and the scalar parts of element-wise code lifted out so that they are
//! computed once per step.

use super::ast::{BinOp, CmpOp, Expr, Func, TensorStep};
use crate::errors::{self, Errors};

/// Whether a value is the same for every element of a step, one per tensor (a reduction or a
/// dimension, in an optimizer), one per row or per column of a tensor, or one per element.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Scalar,
    Tensor,
    Row,
    Col,
    Lane,
}

impl Kind {
    /// How many values a step has of it: a row's and a column's are not comparable.
    fn order(self) -> u8 {
        match self {
            Kind::Scalar => 0,
            Kind::Tensor => 1,
            Kind::Row | Kind::Col => 2,
            Kind::Lane => 3,
        }
    }

    /// The kind of a value computed from one of each: a row's with a column's is an
    /// element's (their outer product).
    pub fn join(self, other: Kind) -> Kind {
        match (self, other) {
            (a, b) if a == b => a,
            (Kind::Row, Kind::Col) | (Kind::Col, Kind::Row) => Kind::Lane,
            (a, b) if a.order() >= b.order() => a,
            (_, b) => b,
        }
    }

    /// Whether a value of kind `self` can be stored where values of kind `target` are.
    pub fn fits(self, target: Kind) -> bool {
        self.join(target) == target
    }
}

/// A dimension of the tensor an optimizer's `update` runs on.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Dim {
    Rows,
    Cols,
    Numel,
    Rank,
}

/// What a resolved name denotes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Ref {
    /// A named scalar constant: an optimizer's hyper-parameter, an activation's or a loss's
    /// constant parameter.
    Hyper(usize),
    T,
    StepLet(usize),
    Carried(usize),
    P,
    G,
    Slot(usize),
    Let(usize),
    /// A per-element variable of a custom layer or loss (`x` of an activation; `pred` and
    /// `target` of a loss), in declaration order: what `diff::derivative` differentiates by.
    Var(usize),
    /// The output `y = f(x)` of an activation, which its backward pass already holds; the
    /// derivative reads it in place of any sub-expression equal to `f(x)`.
    Out,
    /// A dimension of an optimizer's tensor.
    Dim(Dim),
    /// The result of reduction `i` of a tensor-wise rule's plan.
    Reduced(usize),
    /// The result of matrix step `i` of a tensor-wise rule's plan.
    Matrix(usize),
}

/// A typed node.
#[derive(Clone, PartialEq, Debug)]
pub enum Node {
    Num(f64),
    Ref(Ref),
    Neg(Box<TExpr>),
    Bin(BinOp, Box<TExpr>, Box<TExpr>),
    Cmp(CmpOp, Box<TExpr>, Box<TExpr>),
    Call(Func, Vec<TExpr>),
    /// `x.powi(k)` with an integer literal, emitted as multiplications.
    PowiLit(Box<TExpr>, i32),
    If(Box<TExpr>, Box<TExpr>, Box<TExpr>),
    /// The scalar computed once per step into field `i` of the step struct.
    Lifted(usize),
}

/// A typed expression.
#[derive(Clone, PartialEq, Debug)]
pub struct TExpr {
    pub node: Node,
    pub kind: Kind,
}

impl TExpr {
    pub fn new(node: Node, kind: Kind) -> Self {
        TExpr { node, kind }
    }

    /// A literal.
    pub fn num(v: f64) -> Self {
        TExpr::new(Node::Num(v), Kind::Scalar)
    }

    /// The literal value, if this is one.
    pub fn as_num(&self) -> Option<f64> {
        match self.node {
            Node::Num(v) => Some(v),
            _ => None,
        }
    }

    /// A reference of the given kind.
    pub fn var(r: Ref, kind: Kind) -> Self {
        TExpr::new(Node::Ref(r), kind)
    }

    /// Whether `self` reads `r` anywhere.
    pub fn reads(&self, r: Ref) -> bool {
        let mut found = false;
        visit_refs(self, &mut |x| found |= x == r);
        found
    }

    /// The direct sub-expressions, in evaluation order.
    pub fn children(&self) -> Vec<&TExpr> {
        match &self.node {
            Node::Num(_) | Node::Ref(_) | Node::Lifted(_) => Vec::new(),
            Node::Neg(x) | Node::PowiLit(x, _) => vec![x],
            Node::Bin(_, a, b) | Node::Cmp(_, a, b) => vec![a, b],
            Node::Call(_, args) => args.iter().collect(),
            Node::If(c, a, b) => vec![c, a, b],
        }
    }

    /// `self` with every sub-expression (`self` included) equal to `from` replaced by `to`.
    pub fn replace(&self, from: &TExpr, to: &TExpr) -> TExpr {
        if self == from {
            return to.clone();
        }
        let r = |x: &TExpr| Box::new(x.replace(from, to));
        let node = match &self.node {
            Node::Neg(x) => Node::Neg(r(x)),
            Node::Bin(op, a, b) => Node::Bin(*op, r(a), r(b)),
            Node::Cmp(op, a, b) => Node::Cmp(*op, r(a), r(b)),
            Node::Call(f, args) => {
                Node::Call(*f, args.iter().map(|a| a.replace(from, to)).collect())
            }
            Node::PowiLit(x, k) => Node::PowiLit(r(x), *k),
            Node::If(c, a, b) => Node::If(r(c), r(a), r(b)),
            other => other.clone(),
        };
        TExpr::new(node, self.kind)
    }
}

/// What a name means where it is used.
#[derive(Clone, Debug)]
pub enum Binding {
    Ref(Ref, Kind),
    /// A scalar `let` of `update`: substituted, then lifted with the expression using it.
    Inline(TExpr),
    /// Known, but not readable here; the message says why.
    Forbidden(String),
    /// A `let` whose mistake was reported: reading it resolves to nothing, without a second
    /// error.
    Reported,
}

/// Names visible in one block, innermost (latest) last.
pub struct Scope {
    entries: Vec<(String, Binding)>,
    /// Names a later `let` of the same block declares (for "used before its let").
    pub later: Vec<String>,
    /// What the block can read, for the unknown-identifier message.
    pub known: String,
    /// Whether the block may call reductions and matrix steps (an optimizer's `update`), and
    /// matrix steps (a branch for tensors of rank 2).
    pub tensor_steps: TensorSteps,
}

/// Which per-tensor steps a block may call.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum TensorSteps {
    /// None: element-wise code of an activation, a loss, or an optimizer's `step`.
    None,
    /// Reductions, but no matrix step (a branch that is not for matrices alone).
    Reductions,
    /// Reductions and matrix steps (a branch `when rank == 2`).
    All,
}

impl Scope {
    pub fn new(known: String) -> Self {
        Scope {
            entries: Vec::new(),
            later: Vec::new(),
            known,
            tensor_steps: TensorSteps::None,
        }
    }

    pub fn bind(&mut self, name: String, b: Binding) {
        self.entries.push((name, b));
    }

    pub fn lookup(&self, name: &str) -> Option<&Binding> {
        self.entries
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, b)| b)
    }
}

/// Resolves and types `e`; `None` after reporting errors.
pub fn resolve(e: &Expr, scope: &Scope, errs: &mut Errors) -> Option<TExpr> {
    Some(match e {
        Expr::Num { value, span, .. } => {
            if !(*value as f32).is_finite() {
                errs.at(*span, errors::literal_overflow());
                return None;
            }
            TExpr::new(Node::Num(*value), Kind::Scalar)
        }
        Expr::Name(ident) => {
            let name = ident.to_string();
            match scope.lookup(&name) {
                Some(Binding::Ref(r, k)) => TExpr::new(Node::Ref(*r), *k),
                Some(Binding::Inline(te)) => te.clone(),
                Some(Binding::Forbidden(msg)) => {
                    errs.at(ident.span(), msg);
                    return None;
                }
                Some(Binding::Reported) => return None,
                None if scope.later.contains(&name) => {
                    errs.at(ident.span(), errors::used_before_let(&name));
                    return None;
                }
                None => {
                    errs.at(ident.span(), errors::unknown_ident(&name, &scope.known));
                    return None;
                }
            }
        }
        Expr::Neg(x, _) => {
            let x = resolve(x, scope, errs)?;
            let k = x.kind;
            TExpr::new(Node::Neg(Box::new(x)), k)
        }
        Expr::Bin(op, a, b, _) => {
            let a = resolve(a, scope, errs);
            let b = resolve(b, scope, errs);
            let (a, b) = (a?, b?);
            let k = a.kind.join(b.kind);
            TExpr::new(Node::Bin(*op, Box::new(a), Box::new(b)), k)
        }
        Expr::Cmp(op, a, b, _) => {
            let a = resolve(a, scope, errs);
            let b = resolve(b, scope, errs);
            let (a, b) = (a?, b?);
            let k = a.kind.join(b.kind);
            TExpr::new(Node::Cmp(*op, Box::new(a), Box::new(b)), k)
        }
        Expr::Call(Func::Powi, args, _) => {
            let x = resolve(&args[0], scope, errs);
            match powi_literal(&args[1]) {
                PowiExponent::Int(k) => {
                    let x = x?;
                    let kind = x.kind;
                    return Some(TExpr::new(Node::PowiLit(Box::new(x), k), kind));
                }
                PowiExponent::OutOfRange(span) => {
                    errs.at(span, errors::powi_literal_range(MAX_POWI));
                    return None;
                }
                PowiExponent::Float(span) => {
                    errs.at(span, errors::powi_float_literal());
                    return None;
                }
                PowiExponent::Expr => {}
            }
            let e = resolve(&args[1], scope, errs)?;
            if e.kind == Kind::Lane {
                errs.at(args[1].span(), errors::powi_exponent());
                return None;
            }
            let x = x?;
            let k = x.kind;
            TExpr::new(Node::Call(Func::Powi, vec![x, e]), k)
        }
        Expr::Call(Func::F64, args, span) => {
            let x = resolve(&args[0], scope, errs)?;
            if x.kind == Kind::Lane {
                errs.at(*span, errors::f64_of_lane());
                return None;
            }
            TExpr::new(Node::Call(Func::F64, vec![x]), Kind::Scalar)
        }
        Expr::Call(Func::Tensor(step), args, span) => {
            return resolve_tensor_step(*step, args, *span, scope, errs);
        }
        Expr::Call(f, args, _) => {
            let args: Vec<Option<TExpr>> = args.iter().map(|a| resolve(a, scope, errs)).collect();
            let args: Vec<TExpr> = args.into_iter().collect::<Option<_>>()?;
            let k = args.iter().fold(Kind::Scalar, |k, a| k.join(a.kind));
            TExpr::new(Node::Call(*f, args), k)
        }
        Expr::If(c, a, b, _) => {
            let c = resolve(c, scope, errs);
            let a = resolve(a, scope, errs);
            let b = resolve(b, scope, errs);
            let (c, a, b) = (c?, a?, b?);
            let k = c.kind.join(a.kind).join(b.kind);
            TExpr::new(Node::If(Box::new(c), Box::new(a), Box::new(b)), k)
        }
    })
}

/// Resolves a reduction or a matrix step: only an optimizer's `update` calls them, a matrix
/// step only in a branch for matrices, over a value with one per element (or, for the
/// reductions over the whole tensor, one per row or column), with per-step scalars for the
/// matrix step's iterations and coefficients.
fn resolve_tensor_step(
    f: TensorStep,
    args: &[Expr],
    span: proc_macro2::Span,
    scope: &Scope,
    errs: &mut Errors,
) -> Option<TExpr> {
    match (scope.tensor_steps, f) {
        (TensorSteps::None, _) => {
            errs.at(span, errors::tensor_step_outside_update());
            return None;
        }
        (TensorSteps::Reductions, TensorStep::Orthogonalize) => {
            errs.at(span, errors::matrix_step_without_branch());
            return None;
        }
        _ => {}
    }
    let resolved: Vec<Option<TExpr>> = args.iter().map(|a| resolve(a, scope, errs)).collect();
    let resolved: Vec<TExpr> = resolved.into_iter().collect::<Option<_>>()?;
    let x = &resolved[0];
    let kind = match f {
        TensorStep::Orthogonalize => {
            if let Some(a) = resolved[1..]
                .iter()
                .zip(&args[1..])
                .find(|(a, _)| a.kind != Kind::Scalar)
            {
                errs.at(a.1.span(), errors::matrix_step_coefficient());
                return None;
            }
            if x.kind != Kind::Lane {
                errs.at(
                    args[0].span(),
                    errors::reduction_of_uniform("orthogonalize"),
                );
                return None;
            }
            Kind::Lane
        }
        TensorStep::RowMean | TensorStep::RowSum | TensorStep::ColMean | TensorStep::ColSum => {
            if x.kind != Kind::Lane {
                errs.at(args[0].span(), errors::reduction_of_uniform(f.name()));
                return None;
            }
            if matches!(f, TensorStep::RowMean | TensorStep::RowSum) {
                Kind::Row
            } else {
                Kind::Col
            }
        }
        _ => {
            if x.kind.order() < Kind::Row.order() {
                errs.at(args[0].span(), errors::reduction_of_uniform(f.name()));
                return None;
            }
            Kind::Tensor
        }
    };
    Some(TExpr::new(Node::Call(Func::Tensor(f), resolved), kind))
}

/// The largest `|k|` of `x.powi(k)` with a literal `k`, which is emitted as `|k| - 1`
/// multiplications (and its derivative as `k x^(k-1)`).
pub const MAX_POWI: i64 = 64;

/// What the exponent of `powi` is, as written.
pub enum PowiExponent {
    /// An integer literal, possibly negated, within `MAX_POWI`.
    Int(i32),
    /// An integer literal beyond `MAX_POWI`.
    OutOfRange(proc_macro2::Span),
    /// A float literal such as `2.0` (Rust's `powi` takes an `i32`).
    Float(proc_macro2::Span),
    /// Anything else: a name or an expression.
    Expr,
}

/// Classifies the exponent of `powi`: `3`, `-3` and `-(3)` are literals.
pub fn powi_literal(e: &Expr) -> PowiExponent {
    match e {
        Expr::Num { int: Some(k), .. } if k.abs() <= MAX_POWI => PowiExponent::Int(*k as i32),
        Expr::Num {
            int: Some(_), span, ..
        } => PowiExponent::OutOfRange(*span),
        Expr::Num {
            int: None, span, ..
        } => PowiExponent::Float(*span),
        Expr::Neg(x, _) => match powi_literal(x) {
            PowiExponent::Int(k) => PowiExponent::Int(-k),
            other => other,
        },
        _ => PowiExponent::Expr,
    }
}

/// Replaces every maximal scalar sub-expression of `e` (other than a literal) by a reference
/// to `lifted`, where equal expressions share one entry.
pub fn lift(e: TExpr, lifted: &mut Vec<TExpr>) -> TExpr {
    if e.kind == Kind::Scalar {
        if matches!(e.node, Node::Num(_) | Node::Lifted(_)) {
            return e;
        }
        let i = match lifted.iter().position(|x| *x == e) {
            Some(i) => i,
            None => {
                lifted.push(e);
                lifted.len() - 1
            }
        };
        return TExpr::new(Node::Lifted(i), Kind::Scalar);
    }
    let mut l = |x: Box<TExpr>| Box::new(lift(*x, lifted));
    let node = match e.node {
        Node::Neg(x) => Node::Neg(l(x)),
        Node::Bin(op, a, b) => Node::Bin(op, l(a), l(b)),
        Node::Cmp(op, a, b) => Node::Cmp(op, l(a), l(b)),
        Node::Call(f, args) => Node::Call(f, args.into_iter().map(|a| lift(a, lifted)).collect()),
        Node::PowiLit(x, k) => Node::PowiLit(l(x), k),
        Node::If(c, a, b) => Node::If(l(c), l(a), l(b)),
        other => other,
    };
    TExpr::new(node, e.kind)
}

/// Calls `f` on every name the expression reads.
pub fn visit_refs(e: &TExpr, f: &mut impl FnMut(Ref)) {
    match &e.node {
        Node::Ref(r) => f(*r),
        Node::Num(_) | Node::Lifted(_) => {}
        Node::Neg(x) | Node::PowiLit(x, _) => visit_refs(x, f),
        Node::Bin(_, a, b) | Node::Cmp(_, a, b) => {
            visit_refs(a, f);
            visit_refs(b, f);
        }
        Node::Call(_, args) => args.iter().for_each(|a| visit_refs(a, f)),
        Node::If(c, a, b) => {
            visit_refs(c, f);
            visit_refs(a, f);
            visit_refs(b, f);
        }
    }
}
