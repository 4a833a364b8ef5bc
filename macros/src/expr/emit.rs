//! IR to Rust: scalar code (`f32` or `f64`, math from `::fusegraph::__private_0_1::math`) and lane
//! code over a type parameter bounded by the runtime's `Lane` trait, whose methods have
//! `wide`'s `f32x8`'s names. Generated code never uses
//! `mul_add`: the frameworks round every operation, and so do we.

use super::ast::{BinOp, CmpOp, Func};
use super::ir::{Node, Ref, TExpr};
use crate::paths;
use proc_macro2::{Ident, Literal, TokenStream};
use quote::{format_ident, quote};

/// Precision of scalar code.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Prec {
    F32,
    F64,
}

impl Prec {
    pub fn ty(self) -> TokenStream {
        match self {
            Prec::F32 => quote!(f32),
            Prec::F64 => quote!(f64),
        }
    }

    fn lit(self, v: f64) -> Literal {
        match self {
            Prec::F32 => Literal::f32_suffixed(v as f32),
            Prec::F64 => Literal::f64_suffixed(v),
        }
    }
}

fn bin(op: BinOp, a: TokenStream, b: TokenStream) -> TokenStream {
    match op {
        BinOp::Add => quote!((#a + #b)),
        BinOp::Sub => quote!((#a - #b)),
        BinOp::Mul => quote!((#a * #b)),
        BinOp::Div => quote!((#a / #b)),
    }
}

fn powi(x: TokenStream, k: i32, one: TokenStream) -> TokenStream {
    let n = k.unsigned_abs();
    if n == 0 {
        return one;
    }
    let factors = (0..n).map(|_| quote!(__x));
    let product = quote!(#(#factors)*);
    let product: TokenStream = {
        let mut it = product.into_iter();
        let mut out = TokenStream::new();
        if let Some(first) = it.next() {
            out.extend([first]);
            for t in it {
                out.extend(quote!(* #t));
            }
        }
        out
    };
    if k < 0 {
        quote!({ let __x = #x; #one / (#product) })
    } else {
        quote!({ let __x = #x; #product })
    }
}

/// Scalar code for `e` in precision `prec`; `refs` names each resolved reference as a value of
/// the precision it is asked in.
pub fn scalar(e: &TExpr, refs: &dyn Fn(Ref, Prec) -> TokenStream, prec: Prec) -> TokenStream {
    let m = paths::math();
    let s = |x: &TExpr| scalar(x, refs, prec);
    match &e.node {
        Node::Num(v) => {
            let l = prec.lit(*v);
            quote!(#l)
        }
        Node::Ref(r) => refs(*r, prec),
        Node::Lifted(_) => unreachable!("scalar code is never lifted"),
        Node::Call(Func::F64, args) => {
            let wide = scalar(&args[0], refs, Prec::F64);
            match prec {
                Prec::F32 => quote!(((#wide) as f32)),
                Prec::F64 => wide,
            }
        }
        Node::Neg(x) => {
            let x = s(x);
            quote!((-#x))
        }
        Node::Bin(op, a, b) => bin(*op, s(a), s(b)),
        Node::Cmp(op, a, b) => {
            let (a, b) = (s(a), s(b));
            match op {
                CmpOp::Gt => quote!((#a > #b)),
                CmpOp::Lt => quote!((#a < #b)),
                CmpOp::Ge => quote!((#a >= #b)),
                CmpOp::Le => quote!((#a <= #b)),
                CmpOp::Eq => quote!((#a == #b)),
                CmpOp::Ne => quote!((#a != #b)),
            }
        }
        Node::PowiLit(x, k) => {
            let one = prec.lit(1.0);
            powi(s(x), *k, quote!(#one))
        }
        Node::If(c, a, b) => {
            let (c, a, b) = (s(c), s(a), s(b));
            quote!((if #c { #a } else { #b }))
        }
        Node::Call(Func::Softplus, args) => {
            let (x, zero, one) = (s(&args[0]), prec.lit(0.0), prec.lit(1.0));
            quote!({ let __x = #x; #m::max(__x, #zero) + #m::ln(#one + #m::exp(-#m::abs(__x))) })
        }
        Node::Call(f @ (Func::Cosh | Func::Sinh), args) => {
            let (x, half) = (s(&args[0]), prec.lit(0.5));
            let op = if *f == Func::Cosh {
                quote!(+)
            } else {
                quote!(-)
            };
            quote!({ let __x = #x; (#m::exp(__x) #op #m::exp(-__x)) * #half })
        }
        Node::Call(f, args) => {
            let a: Vec<TokenStream> = args.iter().map(s).collect();
            let name = match f {
                Func::Sqrt => "sqrt",
                Func::Abs => "abs",
                Func::Signum => "signum",
                Func::Sign => "sign",
                Func::Min => "min",
                Func::Max => "max",
                Func::Exp => "exp",
                Func::Expm1 => "expm1",
                Func::Erf => "erf",
                Func::Ln => "ln",
                Func::Powi | Func::Powf => "powf",
                Func::Tanh => "tanh",
                Func::Sigmoid => "sigmoid",
                Func::Clamp => "clamp",
                Func::F64 | Func::Softplus | Func::Cosh | Func::Sinh => {
                    unreachable!("handled above")
                }
                Func::Tensor(_) => {
                    unreachable!("the planner replaces reductions and matrix steps")
                }
            };
            let name = format_ident!("{}", name);
            quote!(#m::#name(#(#a),*))
        }
    }
}

/// Name of field `i` of the step struct.
pub fn lifted_field(i: usize) -> proc_macro2::Ident {
    format_ident!("__v{}", i)
}

/// Lane code for `e` over the lane type `ty`, whose scalar parts were lifted into `step` (the
/// step struct's binding).
pub fn lane(
    e: &TExpr,
    ty: &TokenStream,
    refs: &dyn Fn(Ref) -> TokenStream,
    lifted: &[TExpr],
    step: &TokenStream,
) -> TokenStream {
    Lanes {
        ty,
        refs,
        lifted,
        step,
        shared: &[],
    }
    .emit(e)
}

/// Lane code over the lane type `f` for several outputs computed together, each sub-expression that is not a literal
/// or a name and occurs more than once (by structural equality) computed once into a
/// `let __tN` first: the `let`s, then each output's expression.
pub fn lanes_shared(
    outputs: &[&TExpr],
    f: &TokenStream,
    refs: &dyn Fn(Ref) -> TokenStream,
) -> (Vec<TokenStream>, Vec<TokenStream>) {
    let mut seen: Vec<(&TExpr, usize)> = Vec::new();
    for e in outputs {
        count(e, &mut seen);
    }
    let shared: Vec<(TExpr, Ident)> = seen
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .enumerate()
        .map(|(i, (e, _))| (e.clone(), format_ident!("__t{}", i)))
        .collect();
    let step = TokenStream::new();
    let lets = (0..shared.len())
        .map(|i| {
            let (e, id) = &shared[i];
            let v = Lanes {
                ty: f,
                refs,
                lifted: &[],
                step: &step,
                shared: &shared[..i],
            }
            .emit_node(e);
            quote!(let #id: #f = #v;)
        })
        .collect();
    let all = Lanes {
        ty: f,
        refs,
        lifted: &[],
        step: &step,
        shared: &shared,
    };
    (lets, outputs.iter().map(|e| all.emit(e)).collect())
}

/// Counts the uses of each non-trivial sub-expression, children before parents; a repeated
/// sub-expression's own children are counted once (they are computed once, inside it).
fn count<'a>(e: &'a TExpr, seen: &mut Vec<(&'a TExpr, usize)>) {
    if matches!(e.node, Node::Num(_) | Node::Ref(_) | Node::Lifted(_)) {
        return;
    }
    if let Some(entry) = seen.iter_mut().find(|(x, _)| *x == e) {
        entry.1 += 1;
        return;
    }
    for c in e.children() {
        count(c, seen);
    }
    seen.push((e, 1));
}

/// What lane code is emitted against.
struct Lanes<'a> {
    /// The lane type.
    ty: &'a TokenStream,
    refs: &'a dyn Fn(Ref) -> TokenStream,
    lifted: &'a [TExpr],
    step: &'a TokenStream,
    /// Sub-expressions already bound to a name.
    shared: &'a [(TExpr, Ident)],
}

impl Lanes<'_> {
    fn emit(&self, e: &TExpr) -> TokenStream {
        match self.shared.iter().find(|(x, _)| x == e) {
            Some((_, id)) => quote!(#id),
            None => self.emit_node(e),
        }
    }

    fn emit_node(&self, e: &TExpr) -> TokenStream {
        let f = self.ty;
        let ln = paths::lane();
        let l = |x: &TExpr| self.emit(x);
        let step = self.step;
        match &e.node {
            Node::Num(v) => {
                let v = Literal::f32_suffixed(*v as f32);
                quote!(#f::splat(#v))
            }
            Node::Lifted(i) => {
                let field = lifted_field(*i);
                if matches!(self.lifted[*i].node, Node::Cmp(..)) {
                    quote!(#step.#field)
                } else {
                    quote!(#f::splat(#step.#field))
                }
            }
            Node::Ref(r) => (self.refs)(*r),
            Node::Neg(x) => {
                let x = l(x);
                quote!((-#x))
            }
            Node::Bin(op, a, b) => bin(*op, l(a), l(b)),
            Node::Cmp(op, a, b) => {
                let (a, b) = (l(a), l(b));
                let m = match op {
                    CmpOp::Gt => quote!(simd_gt),
                    CmpOp::Lt => quote!(simd_lt),
                    CmpOp::Ge => quote!(simd_ge),
                    CmpOp::Le => quote!(simd_le),
                    CmpOp::Eq => quote!(simd_eq),
                    CmpOp::Ne => quote!(simd_ne),
                };
                quote!(#a.#m(#b))
            }
            Node::PowiLit(x, k) => powi(l(x), *k, quote!(#f::ONE)),
            Node::If(c, a, b) => {
                let (cc, a, b) = (l(c), l(a), l(b));
                if matches!(c.node, Node::Lifted(_)) {
                    quote!((if #cc { #a } else { #b }))
                } else {
                    quote!(#cc.select(#a, #b))
                }
            }
            Node::Call(func, args) => {
                let a: Vec<TokenStream> = args.iter().map(l).collect();
                match func {
                    Func::Sqrt => method(&a[0], "sqrt", &[]),
                    Func::Abs => method(&a[0], "abs", &[]),
                    Func::Signum => method(&a[0], "signum", &[]),
                    Func::Exp => method(&a[0], "exp", &[]),
                    Func::Expm1 => method(&a[0], "exp_m1", &[]),
                    Func::Erf => quote!(#ln::erf(#(#a),*)),
                    Func::Ln => method(&a[0], "ln", &[]),
                    Func::Tanh => method(&a[0], "tanh", &[]),
                    Func::Cosh => method(&a[0], "cosh", &[]),
                    Func::Sinh => method(&a[0], "sinh", &[]),
                    Func::Min => method(&a[0], "min", &a[1..]),
                    Func::Max => method(&a[0], "max", &a[1..]),
                    Func::Powi | Func::Powf => method(&a[0], "powf_simd", &a[1..]),
                    Func::Sign => quote!(#ln::sign(#(#a),*)),
                    Func::Sigmoid => quote!(#ln::sigmoid(#(#a),*)),
                    Func::Softplus => quote!(#ln::softplus(#(#a),*)),
                    Func::Clamp => quote!(#ln::clamp(#(#a),*)),
                    Func::F64 => unreachable!("`f64(..)` is a scalar, lifted out of lane code"),
                    Func::Tensor(_) => {
                        unreachable!("the planner replaces reductions and matrix steps")
                    }
                }
            }
        }
    }
}

fn method(recv: &TokenStream, name: &str, args: &[TokenStream]) -> TokenStream {
    let name = format_ident!("{}", name);
    quote!(#recv.#name(#(#args),*))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::diff::derivative;
    use crate::expr::ir::Kind;
    use crate::expr::simplify::{add, call, mul, select};

    fn x() -> TExpr {
        TExpr::var(Ref::Var(0), Kind::Lane)
    }

    /// The `let __tN` names each `let` reads, per `let`, in order.
    fn reads(lets: &[TokenStream]) -> Vec<(usize, Vec<usize>)> {
        lets.iter()
            .enumerate()
            .map(|(i, l)| {
                let s = l.to_string();
                let rhs = &s[s.find('=').expect("a let")..];
                let used = (0..lets.len())
                    .filter(|j| {
                        rhs.contains(&format!("__t{j} ")) || rhs.contains(&format!("__t{j})"))
                    })
                    .collect();
                (i, used)
            })
            .collect()
    }

    /// A `let` reads only `let`s before it, and each shared sub-expression is computed once,
    /// for a deeply nested repeated expression and its derivative, and for a sub-expression
    /// shared between the branches of a select.
    #[test]
    fn shared_lets_come_after_what_they_read() {
        let t1 = call(Func::Tanh, vec![x()]);
        let t2 = call(Func::Tanh, vec![t1.clone()]);
        let t3 = call(Func::Tanh, vec![t2.clone()]);
        let f = mul(t3.clone(), add(t3.clone(), t2.clone()));
        let df = derivative(&f, Ref::Var(0));
        let s = call(Func::Sqrt, vec![add(TExpr::num(1.0), mul(x(), x()))]);
        let c = TExpr::new(
            Node::Cmp(CmpOp::Gt, Box::new(x()), Box::new(TExpr::num(0.0))),
            Kind::Lane,
        );
        let g = select(c, mul(s.clone(), x()), add(s.clone(), t3.clone()));
        let refs = |_: Ref| quote!(__x);
        let (lets, outs) = lanes_shared(&[&f, &df, &g], &quote!(__L), &refs);
        assert!(lets.len() >= 3, "{lets:?}");
        for (i, used) in reads(&lets) {
            assert!(
                used.iter().all(|&j| j < i),
                "let {i} reads {used:?}: {lets:?}"
            );
        }
        let all = quote!(#(#lets)* #(#outs)*).to_string();
        assert_eq!(all.matches(". tanh ()").count(), 3, "{all}");
        assert_eq!(all.matches(". sqrt ()").count(), 1, "{all}");
    }
}
