//! Name resolution of an activation into the IR, its derivative, and what the backward pass
//! reads.

use super::parse::Body;
use crate::constants::{self, literal};
use crate::errors::{self, Errors};
use crate::expr::ast::{self, Expr, Func};
use crate::expr::diff;
use crate::expr::ir::{self, Binding, Kind, Ref, Scope, TExpr};
use syn::spanned::Spanned;

/// A constant: its name and default, as a value and as written.
pub struct Const {
    pub value: f64,
    pub text: String,
}

/// A learnable per-feature parameter: its name, initial value, and the derivative of the
/// activation with respect to it.
pub struct Learned {
    pub name: String,
    pub value: f64,
    /// `∂f/∂p`, reading `Ref::Out` as `grad` does.
    pub grad: TExpr,
}

/// What a constant that is not `f32`, or has no value, is told.
const MESSAGES: constants::Messages = constants::Messages {
    not_f32: errors::activation_const_type,
    without_value: errors::activation_const_default,
};

/// A checked activation.
pub struct Checked {
    pub consts: Vec<Const>,
    /// The learnable parameters (`Ref::Var(1 + i)`), in order; empty without brackets.
    pub learned: Vec<Learned>,
    /// `f(x)`, over `Ref::Var(0)`, the learnable parameters and the constants (`Ref::Hyper`).
    pub forward: TExpr,
    /// `f'(x)`, reading `Ref::Out` for every sub-expression equal to `f(x)`.
    pub grad: TExpr,
    /// Whether `grad` still reads `x`.
    pub needs_z: bool,
}

/// Checks one definition whose syntax parsed; every mistake in it is reported together.
pub fn check(body: &Body) -> Result<Checked, syn::Error> {
    let mut errs = Errors::default();
    let errs = &mut errs;
    let var = body.var.to_string();
    let mut consts = Vec::new();
    let mut scope = Scope::new(known(body));
    scope.bind(var.clone(), Binding::Ref(Ref::Var(0), Kind::Lane));
    let mut seen: Vec<String> = vec![var];
    for (i, p) in body.params.iter().enumerate() {
        let name = p.name.to_string();
        if seen.contains(&name) {
            errs.at(p.name.span(), errors::activation_duplicate(&name));
        } else {
            constants::check_collision(&body.params, i, super::expand::const_ident, errs);
        }
        seen.push(name.clone());
        let value = constants::value(p, &MESSAGES, errs);
        let text = p
            .default
            .as_ref()
            .map(|d| quote::ToTokens::to_token_stream(d).to_string())
            .unwrap_or_default();
        consts.push(Const { value, text });
        scope.bind(name, Binding::Ref(Ref::Hyper(i), Kind::Scalar));
    }
    let learnables = body.learnables.as_ref().map_or(&[][..], |(_, l)| l);
    if let Some((span, [])) = body.learnables.as_ref().map(|(s, l)| (s, l.as_slice())) {
        errs.at(*span, errors::learnable_empty());
    }
    let mut values = Vec::new();
    for (i, p) in learnables.iter().enumerate() {
        let name = p.name.to_string();
        if seen.contains(&name) {
            errs.at(p.name.span(), errors::activation_duplicate(&name));
        }
        seen.push(name.clone());
        values.push(match &p.init {
            None => {
                errs.at(p.name.span(), errors::learnable_without_value(&name));
                0.0
            }
            Some(d) => literal(d).unwrap_or_else(|| {
                errs.at(d.span(), errors::learnable_literal(&name));
                0.0
            }),
        });
        scope.bind(name, Binding::Ref(Ref::Var(1 + i), Kind::Lane));
    }
    let forward = parse_body(&body.expr, errs).and_then(|e| ir::resolve(&e, &scope, errs));
    std::mem::take(errs).finish()?;
    // Parsing and resolution report every `None` they return.
    let forward =
        forward.ok_or_else(|| syn::Error::new(body.expr.span(), errors::unsupported_expr()))?;
    let reads_lanes = (0..=learnables.len()).any(|i| forward.reads(Ref::Var(i)));
    let derivative = |wrt: Ref| {
        let d = diff::derivative(&forward, wrt);
        if reads_lanes {
            d.replace(&forward, &TExpr::var(Ref::Out, Kind::Lane))
        } else {
            d
        }
    };
    let grad = derivative(Ref::Var(0));
    let needs_z = grad.reads(Ref::Var(0));
    let mut learned = Vec::new();
    for (i, (p, value)) in learnables.iter().zip(values).enumerate() {
        let name = p.name.to_string();
        let grad = derivative(Ref::Var(1 + i));
        if !forward.reads(Ref::Var(1 + i)) {
            errs.at(p.name.span(), errors::learnable_unread(&name));
        } else if grad.as_num() == Some(0.0) {
            errs.at(p.name.span(), errors::learnable_zero_gradient(&name));
        }
        learned.push(Learned { name, value, grad });
    }
    std::mem::take(errs).finish()?;
    Ok(Checked {
        consts,
        learned,
        forward,
        grad,
        needs_z,
    })
}

/// What the expression can read, for the unknown-identifier message.
fn known(body: &Body) -> String {
    let consts = errors::quoted_list(body.params.iter().map(|p| &p.name));
    let learnables = body.learnables.as_ref().map_or(&[][..], |(_, l)| l);
    let learnables = errors::quoted_list(learnables.iter().map(|p| &p.name));
    errors::activation_readable(&body.var.to_string(), &consts, &learnables)
}

/// The expression, with the mistakes specific to an activation's body named first.
fn parse_body(e: &syn::Expr, errs: &mut Errors) -> Option<Expr> {
    match e {
        syn::Expr::Block(b) if b.block.stmts.len() != 1 => {
            errs.at(b.span(), errors::activation_statement());
            None
        }
        syn::Expr::Block(b) if !matches!(b.block.stmts[0], syn::Stmt::Expr(_, None)) => {
            errs.at(b.span(), errors::activation_statement());
            None
        }
        syn::Expr::Assign(_) => {
            errs.at(e.span(), errors::activation_statement());
            None
        }
        syn::Expr::Binary(b) if is_compound_assign(&b.op) => {
            errs.at(e.span(), errors::activation_statement());
            None
        }
        _ => {
            let e = ast::parse_expr(e, errs)?;
            let before = errs.is_empty();
            no_f64(&e, errs);
            (errs.is_empty() == before).then_some(e)
        }
    }
}

/// What only an optimizer's per-step scalars can use: `f64(..)` (an activation has no
/// per-step scalars) and `powi` with a computed exponent (lane code multiplies by a literal
/// one; a constant exponent may be fractional, which is `powf`).
fn no_f64(e: &Expr, errs: &mut Errors) {
    match e {
        Expr::Num { .. } | Expr::Name(_) => {}
        Expr::Neg(x, _) => no_f64(x, errs),
        Expr::Bin(_, a, b, _) | Expr::Cmp(_, a, b, _) => {
            no_f64(a, errs);
            no_f64(b, errs);
        }
        Expr::Call(f, args, span) => {
            if *f == Func::F64 {
                errs.at(*span, errors::activation_f64());
            }
            if *f == Func::Powi && matches!(ir::powi_literal(&args[1]), ir::PowiExponent::Expr) {
                errs.at(args[1].span(), errors::powi_lane_literal());
            }
            args.iter().for_each(|a| no_f64(a, errs));
        }
        Expr::If(c, a, b, _) => {
            no_f64(c, errs);
            no_f64(a, errs);
            no_f64(b, errs);
        }
    }
}

fn is_compound_assign(op: &syn::BinOp) -> bool {
    use syn::BinOp::*;
    matches!(
        op,
        AddAssign(_) | SubAssign(_) | MulAssign(_) | DivAssign(_) | RemAssign(_)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::activation::parse::Defs;

    fn checked(src: &str) -> Result<Checked, syn::Error> {
        let defs: Defs = syn::parse_str(src).expect("parses");
        check(defs.0[0].body.as_ref().unwrap())
    }

    #[test]
    fn derivatives_read_y_where_they_can() {
        assert!(!checked("Sigmoid(x) = sigmoid(x);").unwrap().needs_z);
        assert!(!checked("Tanh(x) = x.tanh();").unwrap().needs_z);
        assert!(!checked("Exp(x) = exp(x);").unwrap().needs_z);
        assert!(checked("Swish(x) = x * sigmoid(x);").unwrap().needs_z);
        let swish = checked("Swish(x) = x * sigmoid(x);").unwrap();
        assert!(swish.grad.reads(Ref::Out), "s + y * (1 - s)");
    }

    #[test]
    fn constants_and_mistakes() {
        let leaky =
            checked("L { alpha: f32 = -0.5 } (x) = if x > 0.0 { x } else { alpha * x };").unwrap();
        assert_eq!(leaky.consts[0].value, -0.5);
        let e = checked("A { a: f64, b: f32 = c } (x) = x * y;")
            .err()
            .unwrap();
        assert_eq!(
            e.into_iter().count(),
            4,
            "type, default, literal, unknown `y`"
        );
    }

    #[test]
    fn learnable_parameters_and_their_mistakes() {
        let prelu = checked("P[alpha = 0.25](x) = if x > 0.0 { x } else { alpha * x };").unwrap();
        assert_eq!((prelu.learned.len(), prelu.learned[0].value), (1, 0.25));
        assert!(
            prelu.learned[0].grad.reads(Ref::Var(0)),
            "d/dalpha = x below 0"
        );
        let both =
            checked("T { c: f32 = 1.0 } [a = 1.0, b = -0.5] (x) = a * tanh(b * x) + c;").unwrap();
        assert!(both.learned[0].grad.reads(Ref::Var(2)), "d/da = tanh(b x)");
        assert!(
            both.learned[1].grad.reads(Ref::Var(1)),
            "d/db = a (1 - t²) x"
        );
        let e = checked("A { a: f32 = 1.0 } [a, b = 1.0 + 1.0, c = 1.0] (x) = x * d;")
            .err()
            .unwrap();
        assert_eq!(
            e.into_iter().count(),
            4,
            "duplicate, no value, literal, unknown `d` (unread `c` waits for them)"
        );
    }
}
