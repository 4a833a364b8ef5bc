//! Shapes of the built-in layer types, read from literal const generics, so that wiring
//! mistakes are reported with both sizes at the user's field. Types whose generics are not
//! literals (or layers from other crates) are checked by const assertions instead.

use syn::{GenericArgument, PathArguments, Type};

/// The last path segment's name and its generic arguments.
fn segments(ty: &Type) -> Option<(String, Vec<&GenericArgument>)> {
    let Type::Path(p) = ty else { return None };
    let last = p.path.segments.last()?;
    let args = match &last.arguments {
        PathArguments::AngleBracketed(a) => a.args.iter().collect(),
        PathArguments::None => Vec::new(),
        PathArguments::Parenthesized(_) => return None,
    };
    Some((last.ident.to_string(), args))
}

fn lit(arg: Option<&&GenericArgument>) -> Option<usize> {
    match arg? {
        GenericArgument::Const(syn::Expr::Lit(l)) => match &l.lit {
            syn::Lit::Int(i) => i.base10_parse().ok(),
            _ => None,
        },
        GenericArgument::Const(syn::Expr::Block(b)) => match b.block.stmts.as_slice() {
            [syn::Stmt::Expr(syn::Expr::Lit(l), None)] => match &l.lit {
                syn::Lit::Int(i) => i.base10_parse().ok(),
                _ => None,
            },
            _ => None,
        },
        _ => None,
    }
}

fn type_name(arg: Option<&&GenericArgument>) -> Option<String> {
    match arg? {
        GenericArgument::Type(Type::Path(p)) => p.path.segments.last().map(|s| s.ident.to_string()),
        _ => None,
    }
}

/// Whether padding argument `i` selects `Same` (absent: `Valid`); `None` for another type.
fn same_padding(a: &[&GenericArgument], i: usize) -> Option<bool> {
    if a.len() <= i {
        return Some(false);
    }
    match type_name(a.get(i))?.as_str() {
        "Same" => Some(true),
        "Valid" => Some(false),
        _ => None,
    }
}

fn conv_out(n: usize, k: usize, stride: usize, same: bool) -> Option<usize> {
    if stride == 0 {
        return None;
    }
    if same {
        Some(n.div_ceil(stride))
    } else {
        n.checked_sub(k).map(|d| d / stride + 1)
    }
}

/// Per-sample input and output sizes of a built-in layer type written with literals.
pub fn dims(ty: &Type) -> Option<(usize, usize)> {
    let (name, a) = segments(ty)?;
    let n = |i: usize| lit(a.get(i));
    match name.as_str() {
        "Dense" => Some((n(0)?, n(1)?)),
        "Conv2d" => {
            let (h, w, c, f, kh, kw) = (n(0)?, n(1)?, n(2)?, n(3)?, n(4)?, n(5)?);
            let stride = if a.len() > 6 { n(6)? } else { 1 };
            let same = same_padding(&a, 7)?;
            let oh = conv_out(h, kh, stride, same)?;
            let ow = conv_out(w, kw, stride, same)?;
            Some((h * w * c, oh * ow * f))
        }
        "Conv1d" => {
            let (t, c_in, c_out, k) = (n(0)?, n(1)?, n(2)?, n(3)?);
            let stride = if a.len() > 4 { n(4)? } else { 1 };
            Some((
                t * c_in,
                conv_out(t, k, stride, same_padding(&a, 5)?)? * c_out,
            ))
        }
        "MeanOverTime" => Some((n(0)? * n(1)?, n(1)?)),
        "PerPosition" => {
            let GenericArgument::Type(inner) = a.first()? else {
                return None;
            };
            let ((i, o), t) = (dims(inner)?, n(1)?);
            Some((t * i, t * o))
        }
        "MaxPool2d" | "AvgPool2d" => {
            let (h, w, c, pool) = (n(0)?, n(1)?, n(2)?, n(3)?);
            let stride = if a.len() > 4 { n(4)? } else { pool };
            Some((
                h * w * c,
                conv_out(h, pool, stride, false)? * conv_out(w, pool, stride, false)? * c,
            ))
        }
        "Flatten" | "Dropout" | "LayerNorm" => Some((n(0)?, n(0)?)),
        // `Gru<T, IN, H, LAYERS = 1, O = Last>`: `[T, IN]` in, `[H]` or (`Sequence`) `[T, H]` out.
        "Gru" | "Lstm" => {
            let (t, inputs, hidden) = (n(0)?, n(1)?, n(2)?);
            let sequence = match a.len() > 4 {
                true => match type_name(a.get(4))?.as_str() {
                    "Sequence" => true,
                    "Last" => false,
                    _ => return None,
                },
                false => false,
            };
            Some((t * inputs, if sequence { t * hidden } else { hidden }))
        }
        "BatchNorm" => {
            let spatial = if a.len() > 1 { n(1)? } else { 1 };
            Some((n(0)? * spatial, n(0)? * spatial))
        }
        _ => None,
    }
}

/// The loss's name, for loss-specific checks.
pub fn loss_name(ty: &Type) -> Option<String> {
    segments(ty).map(|(n, _)| n)
}

/// The classes of a `SequenceCrossEntropy<C>` written with a literal.
pub fn sequence_classes(ty: &Type) -> Option<usize> {
    match segments(ty)? {
        (name, a) if name == "SequenceCrossEntropy" => lit(a.first()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Option<(usize, usize)> {
        dims(&syn::parse_str(s).unwrap())
    }

    #[test]
    fn built_in_shapes() {
        assert_eq!(d("Dense<784, 128, Relu>"), Some((784, 128)));
        assert_eq!(d("fusegraph::layers::Dense<4, 2>"), Some((4, 2)));
        assert_eq!(d("Conv2d<8, 8, 1, 4, 3, 3>"), Some((64, 6 * 6 * 4)));
        assert_eq!(
            d("Conv2d<8, 8, 3, 2, 3, 3, 2, Same>"),
            Some((192, 4 * 4 * 2))
        );
        assert_eq!(d("Conv2d<7, 7, 1, 1, 3, 3, 2, Valid>"), Some((49, 9)));
        assert_eq!(d("MaxPool2d<6, 6, 4, 2>"), Some((144, 36)));
        assert_eq!(d("BatchNorm<16>"), Some((16, 16)));
        assert_eq!(d("Conv1d<10, 3, 5, 3, 1, Same, Relu>"), Some((30, 50)));
        assert_eq!(d("Conv1d<10, 5, 4, 3>"), Some((50, 32)));
        assert_eq!(d("Conv1d<10, 2, 3, 5, 2, Valid>"), Some((20, 9)));
        assert_eq!(d("MeanOverTime<8, 4>"), Some((32, 4)));
        assert_eq!(d("PerPosition<Dense<4, 6, Gelu>, 10>"), Some((40, 60)));
        assert_eq!(d("PerPosition<MyLayer<4>, 10>"), None);
        assert_eq!(d("Gru<6, 3, 5>"), Some((18, 5)));
        assert_eq!(d("Lstm<6, 3, 5, 2, Sequence>"), Some((18, 30)));
        assert_eq!(d("Gru<6, 3, 5, 2, Last>"), Some((18, 5)));
        assert_eq!(d("Lstm<6, 3, 5, 1, MyOutput>"), None);
        assert_eq!(d("Dense<N, 4>"), None);
        let classes = |s: &str| sequence_classes(&syn::parse_str(s).unwrap());
        assert_eq!(classes("SequenceCrossEntropy<5>"), Some(5));
        assert_eq!(classes("loss::SequenceCrossEntropy<C>"), None);
        assert_eq!(classes("SoftmaxCrossEntropy"), None);
        assert_eq!(d("MyLayer<3>"), None);
    }
}
