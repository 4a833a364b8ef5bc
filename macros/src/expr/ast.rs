//! Spanned AST of the expression language, parsed from `syn`.

use crate::errors::{self, Errors};
use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::Ident;

/// `+ - * /`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
}

/// Comparisons, only as `if` conditions.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum CmpOp {
    Gt,
    Lt,
    Ge,
    Le,
    Eq,
    Ne,
}

/// The functions of the language (methods `x.f(..)` and calls `f(x, ..)` alike).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Func {
    Sqrt,
    Abs,
    Signum,
    Sign,
    Min,
    Max,
    Exp,
    Ln,
    Powi,
    Powf,
    Tanh,
    Sigmoid,
    Clamp,
    /// `ln(1 + e^x)`, computed stably as `max(x, 0) + ln(1 + e^-|x|)`.
    Softplus,
    Expm1,
    Erf,
    Cosh,
    Sinh,
    /// `f64(x)`: a scalar computed in `f64` from the decimal values of the hyper-parameters.
    F64,
    /// One of an optimizer's per-tensor steps, which only a rule's `update` reads.
    Tensor(TensorStep),
}

/// An optimizer's per-tensor steps: the reductions and the matrix step.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum TensorStep {
    /// `norm(x)`: an optimizer's per-tensor L2 norm of `x`, `sqrt(sum(x * x))`.
    Norm,
    /// `rms(x)`: the root mean square of `x` over the tensor, `sqrt(mean(x * x))`.
    Rms,
    /// `mean(x)`: the mean of `x` over the tensor (or over the rows or columns it has).
    Mean,
    /// `sum(x)`: the sum of `x` over the tensor.
    Sum,
    /// `row_mean(x)`: the mean of `x` over each row (the last axis): one value per row.
    RowMean,
    /// `col_mean(x)`: the mean of `x` over each column: one value per column.
    ColMean,
    /// `row_sum(x)`: the sum of `x` over each row.
    RowSum,
    /// `col_sum(x)`: the sum of `x` over each column.
    ColSum,
    /// `orthogonalize(x, steps, a, b, c)`: `steps` Newton-Schulz iterations on the matrix `x`.
    Orthogonalize,
}

impl TensorStep {
    /// The name the language spells it with.
    pub fn name(self) -> &'static str {
        match self {
            TensorStep::Norm => "norm",
            TensorStep::Rms => "rms",
            TensorStep::Mean => "mean",
            TensorStep::Sum => "sum",
            TensorStep::RowMean => "row_mean",
            TensorStep::ColMean => "col_mean",
            TensorStep::RowSum => "row_sum",
            TensorStep::ColSum => "col_sum",
            TensorStep::Orthogonalize => "orthogonalize",
        }
    }
}

impl Func {
    fn from_name(name: &str) -> Option<Func> {
        Some(match name {
            "sqrt" => Func::Sqrt,
            "abs" => Func::Abs,
            "signum" => Func::Signum,
            "sign" => Func::Sign,
            "min" => Func::Min,
            "max" => Func::Max,
            "exp" => Func::Exp,
            "ln" => Func::Ln,
            "powi" => Func::Powi,
            "powf" => Func::Powf,
            "tanh" => Func::Tanh,
            "sigmoid" => Func::Sigmoid,
            "clamp" => Func::Clamp,
            "softplus" => Func::Softplus,
            "expm1" => Func::Expm1,
            "erf" => Func::Erf,
            "cosh" => Func::Cosh,
            "sinh" => Func::Sinh,
            "f64" => Func::F64,
            "norm" => Func::Tensor(TensorStep::Norm),
            "rms" => Func::Tensor(TensorStep::Rms),
            "mean" => Func::Tensor(TensorStep::Mean),
            "sum" => Func::Tensor(TensorStep::Sum),
            "row_mean" => Func::Tensor(TensorStep::RowMean),
            "col_mean" => Func::Tensor(TensorStep::ColMean),
            "row_sum" => Func::Tensor(TensorStep::RowSum),
            "col_sum" => Func::Tensor(TensorStep::ColSum),
            "orthogonalize" => Func::Tensor(TensorStep::Orthogonalize),
            _ => return None,
        })
    }

    /// Number of arguments, the receiver included.
    pub fn arity(self) -> usize {
        match self {
            Func::Min | Func::Max | Func::Powi | Func::Powf => 2,
            Func::Clamp => 3,
            Func::Tensor(TensorStep::Orthogonalize) => 5,
            _ => 1,
        }
    }

    /// Whether this is one of an optimizer's per-tensor steps: a reduction or a matrix step,
    /// which only a rule's `update` reads.
    pub fn is_tensor_step(self) -> bool {
        matches!(self, Func::Tensor(_))
    }
}

/// An expression with the span of the user's tokens.
#[derive(Clone, Debug)]
pub enum Expr {
    /// A number literal; `int` is set for integer literals (`powi` exponents).
    Num {
        value: f64,
        int: Option<i64>,
        span: Span,
    },
    Name(Ident),
    Neg(Box<Expr>, Span),
    Bin(BinOp, Box<Expr>, Box<Expr>, Span),
    Cmp(CmpOp, Box<Expr>, Box<Expr>, Span),
    Call(Func, Vec<Expr>, Span),
    If(Box<Expr>, Box<Expr>, Box<Expr>, Span),
}

impl Expr {
    pub fn span(&self) -> Span {
        match self {
            Expr::Num { span, .. } => *span,
            Expr::Name(i) => i.span(),
            Expr::Neg(_, s) | Expr::Bin(.., s) | Expr::Cmp(.., s) | Expr::Call(.., s) => *s,
            Expr::If(.., s) => *s,
        }
    }
}

/// A statement of `step` or `update`.
#[derive(Clone, Debug)]
pub enum Stmt {
    /// `let name = value;`; `None` when the `let` had a mistake, already reported: the name is
    /// still bound, so that its uses raise no second error.
    Let(Ident, Option<Expr>),
    Assign {
        target: Ident,
        op: Option<BinOp>,
        value: Expr,
    },
}

/// Parses the statements of a block; errors are collected, bad statements dropped (a bad
/// `let` is kept without its value).
pub fn parse_stmts(stmts: &[syn::Stmt], errs: &mut Errors) -> Vec<Stmt> {
    stmts.iter().flat_map(|s| parse_stmt(s, errs)).collect()
}

fn parse_stmt(stmt: &syn::Stmt, errs: &mut Errors) -> Vec<Stmt> {
    match stmt {
        syn::Stmt::Local(local) => parse_let(local, errs),
        syn::Stmt::Expr(e, Some(_)) => parse_assign(e, errs).into_iter().collect(),
        other => {
            errs.at(other.span(), errors::statement_form());
            Vec::new()
        }
    }
}

/// `let name = expr;` (with an optional `: f32`). A `let` of another form binds the names
/// of its pattern, without a value, after its error.
fn parse_let(local: &syn::Local, errs: &mut Errors) -> Vec<Stmt> {
    let init = local.init.as_ref().filter(|i| i.diverge.is_none());
    match (let_name(&local.pat), init) {
        (Ok(ident), Some(init)) => vec![Stmt::Let(ident.clone(), parse_expr(&init.expr, errs))],
        (name, _) => {
            let span = name.err().unwrap_or_else(|| local.span());
            errs.at(span, errors::let_form());
            pattern_names(&local.pat)
                .into_iter()
                .map(|name| Stmt::Let(name, None))
                .collect()
        }
    }
}

/// The name of `let name` or `let name: f32`, or the span of another pattern.
fn let_name(pat: &syn::Pat) -> Result<&Ident, Span> {
    match pat {
        syn::Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => Ok(&p.ident),
        syn::Pat::Type(pt) => match (&*pt.pat, &*pt.ty) {
            (syn::Pat::Ident(p), syn::Type::Path(ty))
                if ty.path.is_ident("f32") && p.subpat.is_none() =>
            {
                Ok(&p.ident)
            }
            _ => Err(pt.span()),
        },
        other => Err(other.span()),
    }
}

/// The names a pattern binds (`d` of `d: f64`, `a` and `b` of `(a, b)`).
fn pattern_names(p: &syn::Pat) -> Vec<Ident> {
    match p {
        syn::Pat::Ident(i) => vec![i.ident.clone()],
        syn::Pat::Type(t) => pattern_names(&t.pat),
        syn::Pat::Tuple(t) => t.elems.iter().flat_map(pattern_names).collect(),
        syn::Pat::Paren(p) => pattern_names(&p.pat),
        _ => Vec::new(),
    }
}

fn parse_assign(e: &syn::Expr, errs: &mut Errors) -> Option<Stmt> {
    let (left, op, right) = match e {
        syn::Expr::Assign(a) => (&*a.left, None, &*a.right),
        syn::Expr::Binary(b) => {
            let op = match b.op {
                syn::BinOp::AddAssign(_) => BinOp::Add,
                syn::BinOp::SubAssign(_) => BinOp::Sub,
                syn::BinOp::MulAssign(_) => BinOp::Mul,
                syn::BinOp::DivAssign(_) => BinOp::Div,
                _ => {
                    errs.at(e.span(), errors::statement_form());
                    return None;
                }
            };
            (&*b.left, Some(op), &*b.right)
        }
        _ => {
            errs.at(e.span(), errors::statement_form());
            return None;
        }
    };
    let target = match left {
        syn::Expr::Path(p) if p.qself.is_none() && p.path.get_ident().is_some() => {
            p.path.get_ident().cloned()?
        }
        other => {
            errs.at(other.span(), errors::statement_form());
            return None;
        }
    };
    Some(Stmt::Assign {
        target,
        op,
        value: parse_expr(right, errs)?,
    })
}

/// Parses one expression (comparisons are rejected here; see `parse_cond`).
pub fn parse_expr(e: &syn::Expr, errs: &mut Errors) -> Option<Expr> {
    let span = e.span();
    Some(match e {
        syn::Expr::Lit(l) => return parse_lit(&l.lit, errs),
        syn::Expr::Paren(p) => return parse_expr(&p.expr, errs),
        syn::Expr::Group(g) => return parse_expr(&g.expr, errs),
        syn::Expr::Path(p) if p.qself.is_none() && p.path.get_ident().is_some() => {
            Expr::Name(p.path.get_ident().cloned()?)
        }
        syn::Expr::Unary(u) if matches!(u.op, syn::UnOp::Neg(_)) => {
            Expr::Neg(Box::new(parse_expr(&u.expr, errs)?), span)
        }
        syn::Expr::Binary(b) => {
            let op = match b.op {
                syn::BinOp::Add(_) => BinOp::Add,
                syn::BinOp::Sub(_) => BinOp::Sub,
                syn::BinOp::Mul(_) => BinOp::Mul,
                syn::BinOp::Div(_) => BinOp::Div,
                syn::BinOp::Gt(_)
                | syn::BinOp::Lt(_)
                | syn::BinOp::Ge(_)
                | syn::BinOp::Le(_)
                | syn::BinOp::Eq(_)
                | syn::BinOp::Ne(_) => {
                    errs.at(span, errors::comparison_outside_if());
                    return None;
                }
                _ => {
                    errs.at(span, errors::unsupported_expr());
                    return None;
                }
            };
            let l = parse_expr(&b.left, errs);
            let r = parse_expr(&b.right, errs);
            Expr::Bin(op, Box::new(l?), Box::new(r?), span)
        }
        syn::Expr::MethodCall(m) => {
            let name = m.method.to_string();
            let Some(f) = Func::from_name(&name) else {
                errs.at(m.method.span(), errors::unknown_function(&name));
                return None;
            };
            if m.turbofish.is_some() {
                errs.at(span, errors::unsupported_expr());
                return None;
            }
            let mut args = vec![parse_expr(&m.receiver, errs)];
            args.extend(m.args.iter().map(|a| parse_expr(a, errs)));
            call(f, &name, args, m.method.span(), span, errs)?
        }
        syn::Expr::Call(c) => {
            let syn::Expr::Path(p) = &*c.func else {
                errs.at(c.func.span(), errors::unsupported_expr());
                return None;
            };
            let Some(ident) = p.path.get_ident() else {
                errs.at(p.span(), errors::unsupported_expr());
                return None;
            };
            let name = ident.to_string();
            let Some(f) = Func::from_name(&name) else {
                errs.at(ident.span(), errors::unknown_function(&name));
                return None;
            };
            let args = c.args.iter().map(|a| parse_expr(a, errs)).collect();
            call(f, &name, args, ident.span(), span, errs)?
        }
        syn::Expr::If(i) => {
            let cond = parse_cond(&i.cond, errs);
            let then = parse_branch(&i.then_branch, errs);
            let Some((_, els)) = &i.else_branch else {
                errs.at(span, errors::if_without_else());
                return None;
            };
            let els = parse_expr(els, errs);
            Expr::If(Box::new(cond?), Box::new(then?), Box::new(els?), span)
        }
        syn::Expr::Block(b) if b.label.is_none() => return parse_branch(&b.block, errs),
        _ => {
            errs.at(span, errors::unsupported_expr());
            return None;
        }
    })
}

fn call(
    f: Func,
    name: &str,
    args: Vec<Option<Expr>>,
    name_span: Span,
    span: Span,
    errs: &mut Errors,
) -> Option<Expr> {
    if args.len() != f.arity() {
        errs.at(name_span, errors::arity(name, f.arity()));
        return None;
    }
    let args: Option<Vec<Expr>> = args.into_iter().collect();
    Some(Expr::Call(f, args?, span))
}

fn parse_branch(b: &syn::Block, errs: &mut Errors) -> Option<Expr> {
    match b.stmts.as_slice() {
        [syn::Stmt::Expr(e, None)] => parse_expr(e, errs),
        _ => {
            errs.at(b.span(), errors::if_branch_form());
            None
        }
    }
}

fn parse_cond(e: &syn::Expr, errs: &mut Errors) -> Option<Expr> {
    match e {
        syn::Expr::Paren(p) => parse_cond(&p.expr, errs),
        syn::Expr::Binary(b) => {
            let op = match b.op {
                syn::BinOp::Gt(_) => CmpOp::Gt,
                syn::BinOp::Lt(_) => CmpOp::Lt,
                syn::BinOp::Ge(_) => CmpOp::Ge,
                syn::BinOp::Le(_) => CmpOp::Le,
                syn::BinOp::Eq(_) => CmpOp::Eq,
                syn::BinOp::Ne(_) => CmpOp::Ne,
                _ => {
                    errs.at(e.span(), errors::condition_not_comparison());
                    return None;
                }
            };
            let l = parse_expr(&b.left, errs);
            let r = parse_expr(&b.right, errs);
            Some(Expr::Cmp(op, Box::new(l?), Box::new(r?), e.span()))
        }
        _ => {
            errs.at(e.span(), errors::condition_not_comparison());
            None
        }
    }
}

fn parse_lit(lit: &syn::Lit, errs: &mut Errors) -> Option<Expr> {
    let span = lit.span();
    let ok_suffix = |s: &str| matches!(s, "" | "f32" | "f64");
    match lit {
        syn::Lit::Float(f) if ok_suffix(f.suffix()) => match f.base10_parse::<f64>() {
            Ok(value) => Some(Expr::Num {
                value,
                int: None,
                span,
            }),
            Err(e) => {
                errs.push(e);
                None
            }
        },
        syn::Lit::Int(i) if ok_suffix(i.suffix()) || i.suffix() == "i32" => {
            match i.base10_parse::<i64>() {
                Ok(v) => Some(Expr::Num {
                    value: v as f64,
                    int: Some(v),
                    span,
                }),
                Err(e) => {
                    errs.push(e);
                    None
                }
            }
        }
        _ => {
            errs.at(span, errors::number_literal_only());
            None
        }
    }
}
