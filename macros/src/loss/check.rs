//! Name resolution of a loss into the typed IR, and its derivative with respect to the
//! prediction.

use super::parse::Def;
use crate::constants;
use crate::errors::{self, Errors};
use crate::expr::ast::{self, Expr, Func, Stmt};
use crate::expr::diff;
use crate::expr::ir::{self, Binding, Kind, Ref, Scope, TExpr};
use syn::spanned::Spanned;
use syn::Ident;

/// The prediction and the target, as variables of the IR.
pub const PRED: Ref = Ref::Var(0);
pub const TARGET: Ref = Ref::Var(1);

/// How the per-element values are reduced.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Reduce {
    Mean,
    Sum,
}

/// What a constant that is not `f32`, or has no value, is told.
const MESSAGES: constants::Messages = constants::Messages {
    not_f32: errors::loss_const_type,
    without_value: errors::loss_const_default,
};

/// A checked loss: the element's value and its derivative by the prediction.
pub struct Checked {
    /// Each constant's value.
    pub consts: Vec<f64>,
    pub value: TExpr,
    pub grad: TExpr,
    pub reduce: Reduce,
}

/// Reports each `f64(..)` (lane code has no per-step scalars to compute in `f64`) and each
/// `powi` with a computed exponent (lane code multiplies by a literal one); returns `e` with
/// each `f64(y)` replaced by `y`, so that the mistake gives no second error.
fn no_f64(e: &Expr, errs: &mut Errors) -> Expr {
    let mut r = |x: &Expr| Box::new(no_f64(x, errs));
    match e {
        Expr::Num { .. } | Expr::Name(_) => e.clone(),
        Expr::Call(Func::F64, args, span) => {
            errs.at(*span, errors::loss_f64());
            no_f64(&args[0], errs)
        }
        Expr::Neg(x, s) => Expr::Neg(r(x), *s),
        Expr::Bin(op, a, b, s) => Expr::Bin(*op, r(a), r(b), *s),
        Expr::Cmp(op, a, b, s) => Expr::Cmp(*op, r(a), r(b), *s),
        Expr::Call(f, args, s) => {
            if *f == Func::Powi && matches!(ir::powi_literal(&args[1]), ir::PowiExponent::Expr) {
                errs.at(args[1].span(), errors::powi_lane_literal());
            }
            Expr::Call(*f, args.iter().map(|a| no_f64(a, errs)).collect(), *s)
        }
        Expr::If(c, a, b, s) => Expr::If(r(c), r(a), r(b), *s),
    }
}

/// Resolves a definition and differentiates it; every mistake in it is reported together.
pub fn check(def: &Def) -> Result<Checked, syn::Error> {
    let mut errs = Errors::default();
    let declared = declarations(def, &mut errs);
    let consts = def
        .consts
        .iter()
        .map(|c| constants::value(c, &MESSAGES, &mut errs))
        .collect();
    let reduce = reduction(def, &mut errs);
    let Some((lets, value)) = body_parts(&def.body, &mut errs) else {
        return Err(errs.finish().expect_err("an error was reported"));
    };
    let stmts: Vec<Stmt> = ast::parse_stmts(lets, &mut errs)
        .into_iter()
        .map(|s| match s {
            Stmt::Let(i, e) => Stmt::Let(i, e.map(|e| no_f64(&e, &mut errs))),
            other => other,
        })
        .collect();
    let value = ast::parse_expr(value, &mut errs).map(|v| no_f64(&v, &mut errs));
    let Some([pred, target]) = def.params.get(..2).map(|p| [&p[0], &p[1]]) else {
        return Err(errs.finish().expect_err("an error was reported"));
    };
    let mut scope = body_scope(def, [pred, target], &stmts);
    resolve_lets(&stmts, &declared, &mut scope, &mut errs);
    let value = value.and_then(|v| ir::resolve(&v, &scope, &mut errs));
    // Only when nothing else is wrong: a mistake above (a duplicate name, a failed `let`)
    // can hide the prediction, and one mistake gives one error.
    if let Some(v) = value.as_ref().filter(|_| errs.is_empty()) {
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

/// The parameters and constants, each with what it is: two parameters, every name once.
fn declarations(def: &Def, errs: &mut Errors) -> Vec<(String, &'static str)> {
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
    for i in 0..def.consts.len() {
        constants::check_collision(&def.consts, i, super::expand::const_ident, errs);
    }
    declared
}

/// The `reduce = ..` option, the only one.
fn reduction(def: &Def, errs: &mut Errors) -> Reduce {
    let mut reduce = Reduce::Mean;
    let mut seen_reduce = false;
    for (key, value) in &def.options {
        if key != "reduce" {
            errs.at(key.span(), errors::loss_option(&key.to_string()));
        } else if std::mem::replace(&mut seen_reduce, true) {
            errs.at(key.span(), errors::option_twice("reduce"));
        } else if value == "sum" {
            reduce = Reduce::Sum;
        } else if value != "mean" {
            errs.at(value.span(), errors::loss_reduce());
        }
    }
    reduce
}

/// The body's `let`s and its value; `None` after reporting a block that does not end with one.
fn body_parts<'a>(
    body: &'a syn::Expr,
    errs: &mut Errors,
) -> Option<(&'a [syn::Stmt], &'a syn::Expr)> {
    match body {
        syn::Expr::Block(b) if b.label.is_none() => match b.block.stmts.split_last() {
            Some((syn::Stmt::Expr(e, None), lets)) => Some((lets, e)),
            _ => {
                errs.at(b.span(), errors::loss_body_end());
                None
            }
        },
        e => Some((&[][..], e)),
    }
}

/// What the body reads: the prediction, the target and the constants.
fn body_scope(def: &Def, [pred, target]: [&Ident; 2], stmts: &[Stmt]) -> Scope {
    let const_names = errors::quoted_list(def.consts.iter().map(|c| &c.name));
    let known = errors::loss_readable(&pred.to_string(), &target.to_string(), &const_names);
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
    scope
}

/// Binds each `let` to its value, inlined where it is read; reports assignments.
fn resolve_lets(
    stmts: &[Stmt],
    declared: &[(String, &'static str)],
    scope: &mut Scope,
    errs: &mut Errors,
) {
    for s in stmts {
        match s {
            Stmt::Let(ident, e) => {
                let name = ident.to_string();
                if let Some((_, what)) = declared.iter().find(|(n, _)| *n == name) {
                    errs.at(ident.span(), errors::duplicate(&name, what));
                }
                let te = e.as_ref().and_then(|e| ir::resolve(e, scope, errs));
                scope.later.retain(|n| *n != name);
                scope.bind(name, te.map_or(Binding::Reported, Binding::Inline));
            }
            Stmt::Assign { target, .. } => {
                errs.at(target.span(), errors::loss_assign(&target.to_string()));
            }
        }
    }
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
