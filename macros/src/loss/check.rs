//! Name resolution of a loss into the typed IR, and its derivative with respect to the
//! prediction.

use super::parse::Def;
use crate::errors::{self, Errors};
use crate::expr::ast::{self, Expr, Func, Stmt};
use crate::expr::diff;
use crate::expr::ir::{self, Binding, Kind, Ref, Scope, TExpr};
use syn::spanned::Spanned;

/// The prediction and the target, as variables of the IR.
pub const PRED: Ref = Ref::Var(0);
pub const TARGET: Ref = Ref::Var(1);

/// How the per-element values are reduced.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Reduce {
    Mean,
    Sum,
}

/// A checked loss: the element's value and its derivative by the prediction.
pub struct Checked {
    /// Each constant's value.
    pub consts: Vec<f32>,
    pub value: TExpr,
    pub grad: TExpr,
    pub reduce: Reduce,
}

/// A number literal, possibly negated, that fits an `f32`.
fn literal(e: &syn::Expr, errs: &mut Errors) -> Option<f32> {
    let mut parse_errs = Errors::default();
    let v = match ast::parse_expr(e, &mut parse_errs) {
        Some(Expr::Num { value, .. }) => Some(value),
        Some(Expr::Neg(x, _)) => match *x {
            Expr::Num { value, .. } => Some(-value),
            _ => None,
        },
        _ => None,
    };
    match v.map(|v| v as f32).filter(|v| v.is_finite()) {
        Some(v) => Some(v),
        None => {
            errs.at(e.span(), errors::default_literal());
            None
        }
    }
}

/// Reports each `f64(..)`: lane code has no per-step scalars to compute in `f64`.
fn no_f64(e: &Expr, errs: &mut Errors) {
    match e {
        Expr::Num { .. } | Expr::Name(_) => {}
        Expr::Call(Func::F64, _, span) => errs.at(*span, errors::loss_f64()),
        Expr::Neg(x, _) => no_f64(x, errs),
        Expr::Bin(_, a, b, _) | Expr::Cmp(_, a, b, _) => {
            no_f64(a, errs);
            no_f64(b, errs);
        }
        Expr::Call(_, args, _) => args.iter().for_each(|a| no_f64(a, errs)),
        Expr::If(c, a, b, _) => [c, a, b].into_iter().for_each(|x| no_f64(x, errs)),
    }
}

pub fn check(def: &Def) -> Result<Checked, syn::Error> {
    let mut errs = Errors::default();

    // Parameters and constants: two parameters, every name once.
    if def.params.len() != 2 {
        errs.at(def.params_span, errors::loss_params());
    }
    let mut declared: Vec<(String, &'static str)> = Vec::new();
    let names = def
        .params
        .iter()
        .map(|p| (p, "a parameter of the loss"))
        .chain(def.consts.iter().map(|c| (&c.name, "a constant")));
    for (ident, what) in names {
        let name = ident.to_string();
        match declared.iter().find(|(n, _)| *n == name) {
            Some((_, first)) => errs.at(ident.span(), errors::duplicate(&name, first)),
            None => declared.push((name, what)),
        }
    }
    let mut consts = Vec::new();
    for c in &def.consts {
        let is_f32 =
            matches!(&c.ty, syn::Type::Path(p) if p.qself.is_none() && p.path.is_ident("f32"));
        if !is_f32 {
            errs.at(c.ty.span(), errors::loss_const_type(&c.name.to_string()));
        }
        consts.push(literal(&c.default, &mut errs).unwrap_or(0.0));
    }

    // Options.
    let mut reduce = Reduce::Mean;
    for (key, value) in &def.options {
        if key != "reduce" {
            errs.at(key.span(), errors::loss_option(&key.to_string()));
        } else if value == "sum" {
            reduce = Reduce::Sum;
        } else if value != "mean" {
            errs.at(value.span(), errors::loss_reduce());
        }
    }

    // The body: `let`s (inlined where they are read) and the value.
    let (stmts, value) = match &def.body {
        syn::Expr::Block(b) if b.label.is_none() => match b.block.stmts.split_last() {
            Some((syn::Stmt::Expr(e, None), lets)) => (ast::parse_stmts(lets, &mut errs), e),
            _ => {
                errs.at(b.span(), errors::loss_body_end());
                return Err(errs.finish().expect_err("an error was reported"));
            }
        },
        e => (Vec::new(), e),
    };
    let value = ast::parse_expr(value, &mut errs);
    for s in &stmts {
        if let Stmt::Let(_, e) = s {
            no_f64(e, &mut errs);
        }
    }
    if let Some(v) = &value {
        no_f64(v, &mut errs);
    }
    let Some([pred, target]) = def.params.get(..2).map(|p| [&p[0], &p[1]]) else {
        return Err(errs.finish().expect_err("an error was reported"));
    };
    let const_names: Vec<String> = def.consts.iter().map(|c| format!("`{}`", c.name)).collect();
    let mut known = format!("the prediction `{pred}`, the target `{target}`, ");
    if !const_names.is_empty() {
        known += &format!("the constants ({}), ", const_names.join(", "));
    }
    known += "literals and earlier `let`s";
    let mut scope = Scope::new(known);
    for (i, c) in def.consts.iter().enumerate() {
        scope.bind(
            c.name.to_string(),
            Binding::Ref(Ref::Hyper(i), Kind::Scalar),
        );
    }
    scope.bind(pred.to_string(), Binding::Ref(PRED, Kind::Lane));
    scope.bind(target.to_string(), Binding::Ref(TARGET, Kind::Lane));
    scope.later = stmts
        .iter()
        .filter_map(|s| match s {
            Stmt::Let(i, _) => Some(i.to_string()),
            Stmt::Assign { .. } => None,
        })
        .collect();
    for s in &stmts {
        match s {
            Stmt::Let(ident, e) => {
                let name = ident.to_string();
                if let Some((_, what)) = declared.iter().find(|(n, _)| *n == name) {
                    errs.at(ident.span(), errors::duplicate(&name, what));
                }
                // A `let` that failed stands for 0, so that its uses raise no second error.
                let te = ir::resolve(e, &scope, &mut errs).unwrap_or_else(|| TExpr::num(0.0));
                scope.later.retain(|n| *n != name);
                scope.bind(name, Binding::Inline(te));
            }
            Stmt::Assign { target, .. } => {
                errs.at(target.span(), errors::loss_assign(&target.to_string()));
            }
        }
    }
    let value = value.and_then(|v| ir::resolve(&v, &scope, &mut errs));
    if let Some(v) = &value {
        if !v.reads(PRED) {
            errs.at(pred.span(), errors::loss_never_reads(&pred.to_string()));
        }
    }
    errs.finish()?;
    let value = value.expect("no error, so resolved");
    let grad = diff::derivative(&value, PRED);
    Ok(Checked {
        consts,
        value,
        grad,
        reduce,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(src: &str) -> Result<Checked, syn::Error> {
        check(&syn::parse_str(src).expect("parses"))
    }

    #[test]
    fn every_mistake_of_a_definition_is_reported_together() {
        let e =
            checked("pub L { k: f64 = 1.0, k: f32 = x } (pred, target) = pred * w, reduce = all;")
                .err()
                .unwrap();
        assert_eq!(
            e.into_iter().count(),
            5,
            "`f64`, duplicate `k`, default `x`, unknown `w`, `reduce = all`"
        );
    }

    #[test]
    fn lets_are_inlined_and_the_derivative_is_by_pred() {
        let c = checked("pub L(p, t) = { let d = p - t; d * d }, reduce = sum;").unwrap();
        assert_eq!(c.reduce, Reduce::Sum);
        assert!(c.value.reads(PRED) && c.value.reads(TARGET));
        // d(d * d) = d + d, each `d` being `p - t`.
        assert!(c.grad.reads(PRED) && c.grad.reads(TARGET));
        assert!(checked("pub L(p, t) = abs(p - t);")
            .unwrap()
            .grad
            .reads(PRED));
    }
}
