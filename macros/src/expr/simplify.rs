//! Simplification of generated expressions (derivatives): constant folding and identities that
//! IEEE arithmetic keeps exact, applied by the constructors as nodes are built and by
//! [`simplify`] bottom-up over a whole expression.
//!
//! The rewrites: literal arithmetic folded in `f32` (as the generated code would round it, and
//! only when the result is finite), `x * 1`, `1 * x`, `x / 1`, `x - 0`, `x * -1` (to `-x`),
//! `--x`, `-literal`, `x + (-0)`, `(-0) + x` and `x - (+0)` (exact for every `x`; `x + 0` is
//! not folded, since `-0 + 0` is `+0`, and the sign of a zero reaches `1 / z`, `sqrt` and
//! `signum`), and `if c { a } else { a }` to `a`. `x - x` and `x / x` are never folded (NaN and
//! infinite `x`), nor `0 * x`:
//! it is NaN for an infinite or NaN `x`. Derivatives do not need it: `diff` leaves out terms of
//! sub-expressions that do not depend on the variable, as autograd does, instead of
//! multiplying them by a zero.

use super::ast::{BinOp, Func};
use super::ir::{Kind, Node, TExpr};

fn is(e: &TExpr, v: f64) -> bool {
    e.as_num() == Some(v)
}

/// Whether `e` is the literal zero with the given sign.
fn is_zero(e: &TExpr, negative: bool) -> bool {
    e.as_num()
        .is_some_and(|v| v == 0.0 && v.is_sign_negative() == negative)
}

/// `-a`.
pub fn neg(a: TExpr) -> TExpr {
    match a.node {
        Node::Num(v) => TExpr::num(-v),
        Node::Neg(x) => *x,
        node => TExpr::new(Node::Neg(Box::new(TExpr::new(node, a.kind))), a.kind),
    }
}

/// `a op b`.
pub fn bin(op: BinOp, a: TExpr, b: TExpr) -> TExpr {
    if let (Some(x), Some(y)) = (a.as_num(), b.as_num()) {
        let (x, y) = (x as f32, y as f32);
        let v = match op {
            BinOp::Add => x + y,
            BinOp::Sub => x - y,
            BinOp::Mul => x * y,
            BinOp::Div => x / y,
        };
        if v.is_finite() {
            return TExpr::num(f64::from(v));
        }
    }
    match op {
        BinOp::Add if is_zero(&b, true) => return a,
        BinOp::Add if is_zero(&a, true) => return b,
        BinOp::Sub if is_zero(&b, false) => return a,
        BinOp::Mul if is(&b, 1.0) => return a,
        BinOp::Mul if is(&a, 1.0) => return b,
        BinOp::Mul if is(&b, -1.0) => return neg(a),
        BinOp::Mul if is(&a, -1.0) => return neg(b),
        BinOp::Div if is(&b, 1.0) => return a,
        _ => {}
    }
    let kind = a.kind.join(b.kind);
    TExpr::new(Node::Bin(op, Box::new(a), Box::new(b)), kind)
}

/// `a + b`.
pub fn add(a: TExpr, b: TExpr) -> TExpr {
    bin(BinOp::Add, a, b)
}

/// `a - b`.
pub fn sub(a: TExpr, b: TExpr) -> TExpr {
    bin(BinOp::Sub, a, b)
}

/// `a * b`.
pub fn mul(a: TExpr, b: TExpr) -> TExpr {
    bin(BinOp::Mul, a, b)
}

/// `a / b`.
pub fn div(a: TExpr, b: TExpr) -> TExpr {
    bin(BinOp::Div, a, b)
}

/// `f(args..)`.
pub fn call(f: Func, args: Vec<TExpr>) -> TExpr {
    let kind = args.iter().fold(Kind::Scalar, |k, a| k.join(a.kind));
    TExpr::new(Node::Call(f, args), kind)
}

/// `if c { a } else { b }`.
pub fn select(c: TExpr, a: TExpr, b: TExpr) -> TExpr {
    if a == b {
        return a;
    }
    let kind = c.kind.join(a.kind).join(b.kind);
    TExpr::new(Node::If(Box::new(c), Box::new(a), Box::new(b)), kind)
}

/// `e` rebuilt bottom-up through the simplifying constructors.
pub fn simplify(e: &TExpr) -> TExpr {
    let s = |x: &TExpr| simplify(x);
    match &e.node {
        Node::Num(_) | Node::Ref(_) | Node::Lifted(_) => e.clone(),
        Node::Neg(x) => neg(s(x)),
        Node::Bin(op, a, b) => bin(*op, s(a), s(b)),
        Node::Cmp(op, a, b) => TExpr::new(Node::Cmp(*op, Box::new(s(a)), Box::new(s(b))), e.kind),
        Node::Call(f, args) => call(*f, args.iter().map(s).collect()),
        Node::PowiLit(x, 1) => s(x),
        Node::PowiLit(x, k) => TExpr::new(Node::PowiLit(Box::new(s(x)), *k), e.kind),
        Node::If(c, a, b) => select(s(c), s(a), s(b)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::ir::Ref;

    fn x() -> TExpr {
        TExpr::var(Ref::Var(0), Kind::Lane)
    }

    #[test]
    fn identities_and_literals_fold() {
        assert_eq!(mul(x(), TExpr::num(1.0)), x());
        assert_eq!(mul(TExpr::num(1.0), x()), x());
        assert_eq!(add(TExpr::num(-0.0), x()), x());
        assert_eq!(sub(x(), TExpr::num(0.0)), x());
        assert_eq!(div(x(), TExpr::num(1.0)), x());
        assert_eq!(neg(neg(x())), x());
        assert_eq!(mul(TExpr::num(2.0), TExpr::num(0.25)), TExpr::num(0.5));
        assert_eq!(
            sub(TExpr::num(1.0), TExpr::num(0.999)).as_num(),
            Some(f64::from(1.0f32 - 0.999f32))
        );
        assert_eq!(
            select(x(), TExpr::num(1.0), TExpr::num(1.0)),
            TExpr::num(1.0)
        );
    }

    /// `-0 + 0` is `+0`: folding `x + 0` would give `-0` for `x = -0`, whose sign reaches
    /// `1 / x`, `sqrt` and `signum`. Only the folds exact for every `x` remain.
    #[test]
    fn signed_zeros_are_kept() {
        let (pz, nz) = (TExpr::num(0.0), TExpr::num(-0.0));
        let kept = |e: TExpr| assert!(matches!(e.node, Node::Bin(..)), "{e:?}");
        kept(add(x(), pz.clone()));
        kept(add(pz.clone(), x()));
        kept(sub(x(), nz.clone()));
        assert_eq!(add(x(), nz.clone()), x());
        assert_eq!(add(nz, x()), x());
        assert_eq!(sub(x(), pz), x());
        kept(sub(x(), x()));
        kept(div(x(), x()));
    }

    #[test]
    fn zero_times_x_is_kept() {
        let e = mul(TExpr::num(0.0), x());
        assert!(matches!(e.node, Node::Bin(BinOp::Mul, ..)));
        assert!(
            div(TExpr::num(1.0), TExpr::num(0.0)).as_num().is_none(),
            "inf is not folded"
        );
    }
}
