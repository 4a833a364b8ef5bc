//! Symbolic derivatives of IR expressions, with PyTorch's sub-gradients at kinks.
//!
//! Rules: the sum, product and quotient rules; the chain rule with `f'(u)` on the left
//! (`f'(u) * u'`), products built left-associated (`x * s * (1 - s)`, so that a factor equal to
//! the forward expression can be found and read from `y`); `powi`/`powf` with a literal or scalar
//! exponent (and `powf` with a per-element one, `x^y ln x`); `sqrt`, `exp`, `ln`,
//! `tanh` (`1 - t²`), `sigmoid` (`s (1 - s)`), `softplus` (`sigmoid`), `expm1` (`expm1 + 1`),
//! `erf` (`2/sqrt(pi) e^(-x²)`), `cosh`, `sinh`;
//! `abs' = sign` (0 at 0); `min`/`max` give the gradient to the smaller/larger side and half to
//! each on a tie; `clamp` passes it where `lo <= x <= hi` (bounds included) and otherwise to the
//! bound; `if c { a } else { b }` is the derivative of the branch `c` takes; `sign`, `signum`
//! and comparisons have derivative 0.
//!
//! A sub-expression that does not depend on the variable contributes no term at all (not a
//! term times zero), as in autograd: `d(alpha * x)` is `alpha`, finite even where `x` is not.

use super::ast::{BinOp, CmpOp, Func};
use super::ir::{Node, Ref, TExpr};
use super::simplify::{add, call, div, mul, neg, select, simplify, sub};

/// `de/d wrt`, simplified; a literal 0 when `e` does not depend on `wrt`.
pub fn derivative(e: &TExpr, wrt: Ref) -> TExpr {
    d(e, wrt).map_or(TExpr::num(0.0), |x| simplify(&x))
}

/// `a * b` with `b`'s factors appended one by one: `a * (p * q)` is built as `a * p * q`.
fn mul_l(a: TExpr, b: TExpr) -> TExpr {
    match b.node {
        Node::Bin(BinOp::Mul, p, q) => mul_l(mul_l(a, *p), *q),
        node => mul(a, TExpr::new(node, b.kind)),
    }
}

/// The chain rule: `f'(u) * u'`, no term when `u'` is none.
fn chain(f_prime: TExpr, du: Option<TExpr>) -> Option<TExpr> {
    du.map(|du| mul_l(f_prime, du))
}

fn sum(a: Option<TExpr>, b: Option<TExpr>) -> Option<TExpr> {
    match (a, b) {
        (Some(a), Some(b)) => Some(add(a, b)),
        (a, None) => a,
        (None, b) => b,
    }
}

fn cmp(op: CmpOp, a: &TExpr, b: &TExpr) -> TExpr {
    let kind = a.kind.join(b.kind);
    TExpr::new(
        Node::Cmp(op, Box::new(a.clone()), Box::new(b.clone())),
        kind,
    )
}

fn zero_or(x: Option<TExpr>) -> TExpr {
    x.unwrap_or(TExpr::num(0.0))
}

/// `if c { a } else { b }` of optional derivatives; none when both are.
fn pick(c: TExpr, a: Option<TExpr>, b: Option<TExpr>) -> Option<TExpr> {
    if a.is_none() && b.is_none() {
        return None;
    }
    Some(select(c, zero_or(a), zero_or(b)))
}

/// `min` (`op` is `<`) or `max` (`op` is `>`): the chosen side's derivative, half each on a tie.
fn extremum(op: CmpOp, a: &TExpr, b: &TExpr, wrt: Ref) -> Option<TExpr> {
    let (da, db) = (d(a, wrt), d(b, wrt));
    let tie = mul(TExpr::num(0.5), sum(da.clone(), db.clone())?);
    Some(select(
        cmp(CmpOp::Eq, a, b),
        tie,
        select(cmp(op, a, b), zero_or(da), zero_or(db)),
    ))
}

/// The derivative, or `None` when `e` does not depend on `wrt`.
fn d(e: &TExpr, wrt: Ref) -> Option<TExpr> {
    let one = || TExpr::num(1.0);
    match &e.node {
        Node::Num(_) | Node::Lifted(_) | Node::Cmp(..) => None,
        Node::Ref(r) => (*r == wrt).then(one),
        Node::Neg(a) => d(a, wrt).map(neg),
        Node::Bin(op, a, b) => {
            let (da, db) = (d(a, wrt), d(b, wrt));
            match op {
                BinOp::Add => sum(da, db),
                BinOp::Sub => match (da, db) {
                    (Some(da), Some(db)) => Some(sub(da, db)),
                    (da, None) => da,
                    (None, db) => db.map(neg),
                },
                BinOp::Mul => sum(
                    da.map(|da| mul_l(da, (**b).clone())),
                    db.map(|db| mul_l((**a).clone(), db)),
                ),
                // (a' - (a / b) b') / b, where `a / b` is the forward value.
                BinOp::Div => match (da, db) {
                    (da, None) => da.map(|da| div(da, (**b).clone())),
                    (da, Some(db)) => {
                        let q = mul_l(e.clone(), db);
                        let top = match da {
                            Some(da) => sub(da, q),
                            None => neg(q),
                        };
                        Some(div(top, (**b).clone()))
                    }
                },
            }
        }
        Node::PowiLit(x, k) => {
            let f_prime = match k {
                0 => return None,
                1 => one(),
                2 => mul(TExpr::num(2.0), (**x).clone()),
                k => mul(
                    TExpr::num(f64::from(*k)),
                    TExpr::new(Node::PowiLit(x.clone(), k - 1), x.kind),
                ),
            };
            chain(f_prime, d(x, wrt))
        }
        Node::If(c, a, b) => pick((**c).clone(), d(a, wrt), d(b, wrt)),
        Node::Call(f, args) => {
            let x = &args[0];
            let dx = || d(x, wrt);
            match f {
                Func::Signum | Func::Sign | Func::F64 => None,
                Func::Tensor(_) => None,
                Func::Sqrt => chain(div(TExpr::num(0.5), e.clone()), dx()),
                Func::Abs => chain(call(Func::Sign, vec![x.clone()]), dx()),
                Func::Exp => chain(e.clone(), dx()),
                // e^x = expm1(x) + 1: the forward value's bits, as a hand-written ELU has them.
                Func::Expm1 => chain(add(e.clone(), one()), dx()),
                // 2/sqrt(pi) e^(-x^2).
                Func::Erf => chain(
                    mul(
                        TExpr::num(core::f64::consts::FRAC_2_SQRT_PI),
                        call(Func::Exp, vec![neg(mul(x.clone(), x.clone()))]),
                    ),
                    dx(),
                ),
                Func::Ln => dx().map(|dx| div(dx, x.clone())),
                Func::Tanh => chain(sub(one(), mul(e.clone(), e.clone())), dx()),
                Func::Sigmoid => chain(mul(e.clone(), sub(one(), e.clone())), dx()),
                Func::Softplus => chain(call(Func::Sigmoid, vec![x.clone()]), dx()),
                Func::Cosh => chain(call(Func::Sinh, vec![x.clone()]), dx()),
                Func::Sinh => chain(call(Func::Cosh, vec![x.clone()]), dx()),
                Func::Min => extremum(CmpOp::Lt, x, &args[1], wrt),
                Func::Max => extremum(CmpOp::Gt, x, &args[1], wrt),
                Func::Clamp => {
                    let (lo, hi) = (&args[1], &args[2]);
                    let (dlo, dhi) = (d(lo, wrt), d(hi, wrt));
                    let inner = pick(cmp(CmpOp::Gt, x, hi), dhi, dx());
                    pick(cmp(CmpOp::Lt, x, lo), dlo, inner)
                }
                // x^n: n x^(n-1) x' (+ x^n ln(x) n' for a per-element exponent).
                Func::Powi | Func::Powf => {
                    let n = &args[1];
                    let lower = call(Func::Powf, vec![x.clone(), sub(n.clone(), one())]);
                    let base = chain(mul(n.clone(), lower), dx());
                    let ln_x = call(Func::Ln, vec![x.clone()]);
                    let exponent = chain(mul(e.clone(), ln_x), d(n, wrt));
                    sum(base, exponent)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::ir::Kind;

    fn x() -> TExpr {
        TExpr::var(Ref::Var(0), Kind::Lane)
    }

    fn f(func: Func, args: Vec<TExpr>) -> TExpr {
        call(func, args)
    }

    #[test]
    fn swish_derivative_is_left_associated() {
        let s = f(Func::Sigmoid, vec![x()]);
        let swish = mul(x(), s.clone());
        let want = add(
            s.clone(),
            mul(mul(x(), s.clone()), sub(TExpr::num(1.0), s.clone())),
        );
        assert_eq!(derivative(&swish, Ref::Var(0)), want);
    }

    #[test]
    fn constants_contribute_no_term() {
        let alpha = TExpr::var(Ref::Hyper(0), Kind::Scalar);
        let e = mul(alpha.clone(), x());
        assert_eq!(derivative(&e, Ref::Var(0)), alpha);
        assert_eq!(derivative(&alpha, Ref::Var(0)), TExpr::num(0.0));
        let other = TExpr::var(Ref::Var(1), Kind::Lane);
        assert_eq!(derivative(&mul(x(), other.clone()), Ref::Var(1)), x());
    }

    #[test]
    fn select_takes_the_branch_derivative() {
        let c = cmp(CmpOp::Gt, &x(), &TExpr::num(0.0));
        let relu = select(c.clone(), x(), TExpr::num(0.0));
        let want = select(c, TExpr::num(1.0), TExpr::num(0.0));
        assert_eq!(derivative(&relu, Ref::Var(0)), want);
    }

    #[test]
    fn powers() {
        let cube = TExpr::new(Node::PowiLit(Box::new(x()), 3), Kind::Lane);
        let want = mul(
            TExpr::num(3.0),
            TExpr::new(Node::PowiLit(Box::new(x()), 2), Kind::Lane),
        );
        assert_eq!(derivative(&cube, Ref::Var(0)), want);
        let sq = TExpr::new(Node::PowiLit(Box::new(x()), 2), Kind::Lane);
        assert_eq!(derivative(&sq, Ref::Var(0)), mul(TExpr::num(2.0), x()));
    }
}
