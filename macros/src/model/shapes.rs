//! Shapes of the built-in layer types, read from literal const generics, so that every wiring
//! mistake and every size a layer cannot have is reported at the user's field with the sizes
//! and the type to write. Types whose generics are not literals (or layers from other crates)
//! are checked by the runtime's const assertions instead.

use quote::ToTokens;
use syn::{GenericArgument, PathArguments, Type};

/// A per-sample shape as a layer reads or writes it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Shape {
    /// Values read as one vector (features, or an image read whole).
    Flat(usize),
    /// `len` positions of `features` values each, position after position.
    Seq { len: usize, features: usize },
}

impl Shape {
    /// Values per sample.
    pub fn width(self) -> usize {
        match self {
            Shape::Flat(n) => n,
            Shape::Seq { len, features } => len * features,
        }
    }
}

/// Where a generic argument is written: its index, then indices within type arguments
/// (`PerPosition<Dense<IN, OUT>, T>`'s `IN` is at `[0, 0]`).
pub type ArgPath = Vec<usize>;

/// Where a layer's input sizes are written among its generic arguments.
#[derive(Clone, Debug)]
pub enum InputArgs {
    /// One argument, the input's width.
    Flat(ArgPath),
    /// The sequence length and the features per position.
    Seq { len: ArgPath, features: ArgPath },
    /// Several arguments multiplied (an image's height, width and channels).
    Derived,
}

/// A size a layer type cannot have, found in its own generic arguments.
#[derive(Debug, PartialEq, Eq)]
pub enum Mistake {
    /// The size named so is 0.
    Zero(&'static str),
    /// `heads` does not divide the model `width`: the type with the number of heads nearest
    /// that divides it, and with the next width that `heads` divides.
    HeadsDoNotDivide {
        width: usize,
        heads: usize,
        other_heads: String,
        other_width: String,
    },
    /// A positional table of `table` rows for a sequence of `len`: the type with `len` rows.
    TableTooShort {
        table: usize,
        len: usize,
        fixed: String,
    },
    /// A padding id outside the vocabulary: the type without padding.
    PaddingOutside {
        pad: usize,
        vocab: usize,
        fixed: String,
    },
    /// A vocabulary larger than `max` ids.
    VocabTooLarge { vocab: usize, max: u64 },
    /// A window (`what`: a kernel, a pooling window) of `k` along `along` (of size `n`) with
    /// valid padding, longer than the input.
    WindowTooLong {
        what: &'static str,
        k: usize,
        along: &'static str,
        n: usize,
    },
    /// More stacked recurrent layers than `max`.
    TooManyLayers { layers: usize, max: usize },
    /// A dropout rate of 1000 per mille or more.
    DropoutRate(usize),
}

/// What the macro knows of a built-in layer type written with literals.
#[derive(Debug)]
pub struct Layer {
    /// The shape it reads.
    pub input: Shape,
    /// The shape it writes; `None` when its own sizes leave it undefined.
    pub output: Option<Shape>,
    /// Where its input sizes are written.
    pub input_args: InputArgs,
    /// Whether the output is the input's shape whatever it is (dropout): a sequence stays one.
    pub keeps_shape: bool,
    /// The sizes it cannot have.
    pub mistakes: Vec<Mistake>,
    /// A recurrent layer's type with the other output (`Sequence` for `Last` and back), and
    /// that output's shape.
    pub other_output: Option<(Type, Shape)>,
}

/// The most stacked layers of a recurrent type (the runtime's `MAX_RNN_LAYERS`).
const MAX_RNN_LAYERS: usize = 8;

/// The largest vocabulary of an `Embedding`: every id a `u32` addresses, 2^32.
const MAX_VOCAB: u64 = 1 << 32;

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
    let int = |l: &syn::ExprLit| match &l.lit {
        syn::Lit::Int(i) => i.base10_parse().ok(),
        _ => None,
    };
    match arg? {
        GenericArgument::Const(syn::Expr::Lit(l)) => int(l),
        GenericArgument::Const(syn::Expr::Block(b)) => match b.block.stmts.as_slice() {
            [syn::Stmt::Expr(syn::Expr::Lit(l), None)] => int(l),
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

/// Output length of a window `k` long moving by `stride` over `n`; `None` when it does not fit.
fn window_out(n: usize, k: usize, stride: usize, same: bool) -> Option<usize> {
    if stride == 0 || k == 0 {
        return None;
    }
    if same {
        Some(n.div_ceil(stride))
    } else {
        n.checked_sub(k).map(|d| d / stride + 1)
    }
}

/// The argument at `i` if given, else `default`; `None` when it is given but not a literal.
fn lit_or(a: &[&GenericArgument], i: usize, default: usize) -> Option<usize> {
    match a.len() > i {
        true => lit(a.get(i)),
        false => Some(default),
    }
}

/// A zero among `sizes` (name, value): one mistake, the first.
fn zeros(sizes: &[(&'static str, usize)]) -> Vec<Mistake> {
    let zero = sizes.iter().find(|(_, v)| *v == 0);
    zero.map(|(name, _)| Mistake::Zero(name))
        .into_iter()
        .collect()
}

/// A valid-padding window `k` longer than `n`.
fn window_fits(
    what: &'static str,
    k: usize,
    along: &'static str,
    n: usize,
    same: bool,
) -> Option<Mistake> {
    (!same && k > n).then_some(Mistake::WindowTooLong { what, k, along, n })
}

/// A window (`what`, `kh` by `kw`) moving by `stride` over an `h`x`w`x`c` image, giving
/// `out_c` channels: a convolution or a pooling layer, whose sizes `sizes` are at least 1.
fn image_window(
    (h, w, c): (usize, usize, usize),
    (what, kh, kw): (&'static str, usize, usize),
    stride: usize,
    same: bool,
    out_c: usize,
    sizes: &[(&'static str, usize)],
) -> Layer {
    let mut mistakes = zeros(sizes);
    if mistakes.is_empty() {
        mistakes.extend(window_fits(what, kh, "rows", h, same));
        mistakes.extend(window_fits(what, kw, "columns", w, same));
    }
    let out = window_out(h, kh, stride, same).zip(window_out(w, kw, stride, same));
    Layer {
        input: Shape::Flat(h * w * c),
        output: out.map(|(oh, ow)| Shape::Flat(oh * ow * out_c)),
        input_args: InputArgs::Derived,
        keeps_shape: false,
        mistakes,
        other_output: None,
    }
}

/// A layer that writes the sequence of `len` positions of `features` it reads, whose sizes
/// are at `input_args`.
fn same_sequence(
    (len, features): (usize, usize),
    input_args: InputArgs,
    mistakes: Vec<Mistake>,
) -> Layer {
    let shape = Shape::Seq { len, features };
    Layer {
        input: shape,
        output: Some(shape),
        input_args,
        keeps_shape: false,
        mistakes,
        other_output: None,
    }
}

/// A layer reading and writing `Flat(n)` whose size is its first argument.
fn flat(n: usize, size: &'static str) -> Layer {
    Layer {
        input: Shape::Flat(n),
        output: Some(Shape::Flat(n)),
        input_args: InputArgs::Flat(vec![0]),
        keeps_shape: false,
        mistakes: zeros(&[(size, n)]),
        other_output: None,
    }
}

/// What the macro knows of a built-in layer type written with literals; `None` for another
/// type, or one whose sizes are not all literals.
pub fn layer(ty: &Type) -> Option<Layer> {
    let (name, a) = segments(ty)?;
    let n = |i: usize| lit(a.get(i));
    let seq_args = |len: usize, features: usize| InputArgs::Seq {
        len: vec![len],
        features: vec![features],
    };
    let layer = match name.as_str() {
        "Dense" => {
            let (i, o) = (n(0)?, n(1)?);
            Layer {
                output: Some(Shape::Flat(o)),
                mistakes: zeros(&[("the input size", i), ("the output size", o)]),
                ..flat(i, "the input size")
            }
        }
        "Flatten" => flat(n(0)?, "the size"),
        "LayerNorm" => flat(n(0)?, "the width"),
        // `Act<A, N>`: an activation as a layer, of any shape.
        "Act" => {
            let size = n(1)?;
            Layer {
                input_args: InputArgs::Flat(vec![1]),
                keeps_shape: true,
                ..flat(size, "the size")
            }
        }
        "Dropout" => {
            // The rate does not change the shape: a constant is checked by the runtime.
            let (size, rate) = (n(0)?, n(1));
            let mut l = flat(size, "the size");
            l.keeps_shape = true;
            let too_high = rate.filter(|&r| r >= 1000);
            l.mistakes.extend(too_high.map(Mistake::DropoutRate));
            l
        }
        "BatchNorm" => {
            let (c, spatial) = (n(0)?, lit_or(&a, 1, 1)?);
            let mistakes = zeros(&[
                ("the number of channels", c),
                ("the number of positions", spatial),
            ]);
            // One position is a flat vector: what reads a sequence fits it by its width.
            match spatial > 1 {
                true => {
                    let shape = Shape::Seq {
                        len: spatial,
                        features: c,
                    };
                    Layer {
                        input: shape,
                        output: Some(shape),
                        input_args: seq_args(1, 0),
                        mistakes,
                        ..flat(c, "the number of channels")
                    }
                }
                false => flat(c, "the number of channels"),
            }
        }
        "Conv2d" => {
            let (h, w, c, f, kh, kw) = (n(0)?, n(1)?, n(2)?, n(3)?, n(4)?, n(5)?);
            let stride = lit_or(&a, 6, 1)?;
            let same = same_padding(&a, 7)?;
            let sizes = [
                ("the number of rows", h),
                ("the number of columns", w),
                ("the number of channels", c),
                ("the number of filters", f),
                ("the kernel height", kh),
                ("the kernel width", kw),
                ("the stride", stride),
            ];
            image_window((h, w, c), ("kernel", kh, kw), stride, same, f, &sizes)
        }
        "MaxPool2d" | "AvgPool2d" => {
            let (h, w, c, pool) = (n(0)?, n(1)?, n(2)?, n(3)?);
            let stride = lit_or(&a, 4, pool)?;
            let sizes = [
                ("the number of rows", h),
                ("the number of columns", w),
                ("the number of channels", c),
                ("the window", pool),
                ("the stride", stride),
            ];
            image_window((h, w, c), ("window", pool, pool), stride, false, c, &sizes)
        }
        "Conv1d" => {
            let (t, c_in, c_out, k) = (n(0)?, n(1)?, n(2)?, n(3)?);
            let stride = lit_or(&a, 4, 1)?;
            let same = same_padding(&a, 5)?;
            let mut mistakes = zeros(&[
                ("the sequence length", t),
                ("the number of input channels", c_in),
                ("the number of filters", c_out),
                ("the kernel length", k),
                ("the stride", stride),
            ]);
            if mistakes.is_empty() {
                mistakes.extend(window_fits("kernel", k, "positions", t, same));
            }
            Layer {
                input: Shape::Seq {
                    len: t,
                    features: c_in,
                },
                output: window_out(t, k, stride, same).map(|len| Shape::Seq {
                    len,
                    features: c_out,
                }),
                input_args: seq_args(0, 1),
                keeps_shape: false,
                mistakes,
                other_output: None,
            }
        }
        "MeanOverTime" => {
            let (t, c) = (n(0)?, n(1)?);
            Layer {
                input: Shape::Seq {
                    len: t,
                    features: c,
                },
                output: Some(Shape::Flat(c)),
                input_args: seq_args(0, 1),
                keeps_shape: false,
                mistakes: zeros(&[("the sequence length", t), ("the number of channels", c)]),
                other_output: None,
            }
        }
        "PerPosition" => {
            let GenericArgument::Type(inner_ty) = a.first()? else {
                return None;
            };
            let (inner, t) = (layer(inner_ty)?, n(1)?);
            let features = match inner.input_args {
                InputArgs::Flat(path) => [vec![0], path].concat(),
                _ => return None,
            };
            let mut mistakes = zeros(&[("the sequence length", t)]);
            mistakes.extend(inner.mistakes);
            let per = |s: Shape| Shape::Seq {
                len: t,
                features: s.width(),
            };
            Layer {
                input: per(inner.input),
                output: inner.output.map(per),
                input_args: InputArgs::Seq {
                    len: vec![1],
                    features,
                },
                keeps_shape: false,
                mistakes,
                other_output: None,
            }
        }
        // `Gru<T, IN, H, LAYERS = 1, O = Last>`: `[T, IN]` in, `[H]` or (`Sequence`) `[T, H]` out.
        "Gru" | "Lstm" => {
            let (t, inputs, hidden) = (n(0)?, n(1)?, n(2)?);
            let layers = lit_or(&a, 3, 1);
            let sequence = match a.len() > 4 {
                true => match type_name(a.get(4))?.as_str() {
                    "Sequence" => true,
                    "Last" => false,
                    _ => return None,
                },
                false => false,
            };
            let output = |sequence: bool| match sequence {
                true => Shape::Seq {
                    len: t,
                    features: hidden,
                },
                false => Shape::Flat(hidden),
            };
            let mut mistakes = zeros(&[
                ("the sequence length", t),
                ("the number of input features", inputs),
                ("the number of hidden units", hidden),
                ("the number of layers", layers.unwrap_or(1)),
            ]);
            if let Some(layers) = layers.filter(|&l| l > MAX_RNN_LAYERS) {
                mistakes.push(Mistake::TooManyLayers {
                    layers,
                    max: MAX_RNN_LAYERS,
                });
            }
            let other_type = if sequence { "Last" } else { "Sequence" };
            let other = layers.map(|l| (with_output(ty, l, other_type), output(!sequence)));
            Layer {
                input: Shape::Seq {
                    len: t,
                    features: inputs,
                },
                output: Some(output(sequence)),
                input_args: seq_args(0, 1),
                keeps_shape: false,
                mistakes,
                other_output: other,
            }
        }
        "CausalSelfAttention" => {
            let (t, width, heads) = (n(0)?, n(1)?, n(2)?);
            let mut mistakes = zeros(&[
                ("the sequence length", t),
                ("the width", width),
                ("the number of heads", heads),
            ]);
            if mistakes.is_empty() && !width.is_multiple_of(heads) {
                let divisor = nearest_divisor(width, heads);
                mistakes.push(Mistake::HeadsDoNotDivide {
                    width,
                    heads,
                    other_heads: render(&with_args(ty, &[(vec![2], divisor)])),
                    other_width: render(&with_args(
                        ty,
                        &[(vec![1], width.div_ceil(heads) * heads)],
                    )),
                });
            }
            same_sequence((t, width), seq_args(0, 1), mistakes)
        }
        "PositionalEmbedding" => {
            let (table, width, t) = (n(0)?, n(1)?, n(2)?);
            let mut mistakes = zeros(&[
                ("the table length", table),
                ("the width", width),
                ("the sequence length", t),
            ]);
            if mistakes.is_empty() && t > table {
                mistakes.push(Mistake::TableTooShort {
                    table,
                    len: t,
                    fixed: render(&with_args(ty, &[(vec![0], t)])),
                });
            }
            same_sequence((t, width), seq_args(2, 1), mistakes)
        }
        "Embedding" => {
            let (vocab, width, t) = (n(0)?, n(1)?, n(2)?);
            // `NO_PADDING` (or another constant) is no padding id the macro can check.
            let pad = n(3);
            let mut mistakes = zeros(&[
                ("the vocabulary", vocab),
                ("the width", width),
                ("the sequence length", t),
            ]);
            if vocab as u64 > MAX_VOCAB {
                mistakes.push(Mistake::VocabTooLarge {
                    vocab,
                    max: MAX_VOCAB,
                });
            }
            if let Some(pad) = pad.filter(|&p| vocab > 0 && p >= vocab) {
                mistakes.push(Mistake::PaddingOutside {
                    pad,
                    vocab,
                    fixed: render(&without_arg(ty, 3)),
                });
            }
            Layer {
                input: Shape::Flat(t),
                output: Some(Shape::Seq {
                    len: t,
                    features: width,
                }),
                input_args: InputArgs::Flat(vec![2]),
                keeps_shape: false,
                mistakes,
                other_output: None,
            }
        }
        _ => return None,
    };
    Some(layer)
}

/// The divisor of `width` nearest `heads` (the larger of two as near).
fn nearest_divisor(width: usize, heads: usize) -> usize {
    (1..=width)
        .filter(|d| width.is_multiple_of(*d))
        .min_by_key(|&d| (d.abs_diff(heads), usize::MAX - d))
        .unwrap_or(1)
}

/// Per-sample input and output sizes of a built-in layer type written with literals.
#[cfg(test)]
fn dims(ty: &Type) -> Option<(usize, usize)> {
    let l = layer(ty)?;
    Some((l.input.width(), l.output?.width()))
}

/// The generic arguments of `ty`'s last segment, to edit.
fn args_mut(
    ty: &mut Type,
) -> Option<&mut syn::punctuated::Punctuated<GenericArgument, syn::Token![,]>> {
    let Type::Path(p) = ty else { return None };
    match &mut p.path.segments.last_mut()?.arguments {
        PathArguments::AngleBracketed(a) => Some(&mut a.args),
        _ => None,
    }
}

/// Sets the argument at `path` of `ty` to `value`.
fn set_arg(ty: &mut Type, path: &[usize], value: GenericArgument) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    let Some(arg) = args_mut(ty).and_then(|a| a.iter_mut().nth(*first)) else {
        return;
    };
    match (rest.is_empty(), arg) {
        (true, arg) => *arg = value,
        (false, GenericArgument::Type(inner)) => set_arg(inner, rest, value),
        _ => {}
    }
}

/// `ty` with the size at each path set to its value.
pub fn with_args(ty: &Type, sizes: &[(ArgPath, usize)]) -> Type {
    let mut ty = ty.clone();
    for (path, v) in sizes {
        let value = syn::parse_str(&v.to_string()).expect("an integer is a generic argument");
        set_arg(&mut ty, path, value);
    }
    ty
}

/// `ty` without its generic arguments from `i` on (back to their defaults).
fn without_arg(ty: &Type, i: usize) -> Type {
    let mut ty = ty.clone();
    if let Some(args) = args_mut(&mut ty) {
        *args = args.iter().take(i).cloned().collect();
    }
    ty
}

/// A recurrent type of `layers` layers with the output `output` (`Last` or `Sequence`).
fn with_output(ty: &Type, layers: usize, output: &str) -> Type {
    let mut ty = without_arg(ty, 3);
    if let Some(args) = args_mut(&mut ty) {
        args.push(syn::parse_str(&layers.to_string()).expect("an integer"));
        args.push(syn::parse_str(output).expect("a type name"));
    }
    ty
}

/// `ty` with its input sizes made `have`'s, when the layer's arguments say where they are
/// and `have` fits them; the positional table grows to a longer sequence.
pub fn with_input(ty: &Type, l: &Layer, have: Shape) -> Option<Type> {
    let edits = match (&l.input_args, have, l.input) {
        (InputArgs::Flat(path), have, _) => vec![(path.clone(), have.width())],
        (
            InputArgs::Seq { len, features },
            Shape::Seq {
                len: t,
                features: f,
            },
            _,
        ) => {
            vec![(len.clone(), t), (features.clone(), f)]
        }
        (
            InputArgs::Seq { len, features },
            Shape::Flat(n),
            Shape::Seq {
                len: t,
                features: f,
            },
        ) => match (f > 0 && n.is_multiple_of(f), t > 0 && n.is_multiple_of(t)) {
            (true, _) => vec![(len.clone(), n / f)],
            (false, true) => vec![(features.clone(), n / t)],
            _ => return None,
        },
        _ => return None,
    };
    let mut fixed = with_args(ty, &edits);
    if let Some(Mistake::TableTooShort { len, .. }) = layer(&fixed)
        .into_iter()
        .flat_map(|l| l.mistakes)
        .find(|m| matches!(m, Mistake::TableTooShort { .. }))
    {
        fixed = with_args(&fixed, &[(vec![0], len)]);
    }
    Some(fixed)
}

/// A type as a user writes it: `Gru<16, 16, 32>`, `fusegraph::layers::Dense<4, 2, Relu>`.
pub fn render(ty: &Type) -> String {
    let Type::Path(p) = ty else {
        return ty.to_token_stream().to_string();
    };
    let lead = if p.path.leading_colon.is_some() {
        "::"
    } else {
        ""
    };
    let segments: Vec<String> = p
        .path
        .segments
        .iter()
        .map(|s| match &s.arguments {
            PathArguments::AngleBracketed(a) => {
                let args: Vec<String> = a.args.iter().map(render_arg).collect();
                format!("{}<{}>", s.ident, args.join(", "))
            }
            _ => s.to_token_stream().to_string(),
        })
        .collect();
    format!("{lead}{}", segments.join("::"))
}

fn render_arg(a: &GenericArgument) -> String {
    match a {
        GenericArgument::Type(t) => render(t),
        other => other.to_token_stream().to_string(),
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

    fn ty(s: &str) -> Type {
        syn::parse_str(s).unwrap()
    }

    fn d(s: &str) -> Option<(usize, usize)> {
        dims(&ty(s))
    }

    fn mistakes(s: &str) -> Vec<Mistake> {
        layer(&ty(s)).expect("a built-in layer").mistakes
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
        assert_eq!(d("BatchNorm<16, 4>"), Some((64, 64)));
        assert_eq!(d("Act<Relu, 8>"), Some((8, 8)));
        let bn = layer(&ty("BatchNorm<16, 1>")).unwrap();
        assert_eq!(bn.input, Shape::Flat(16), "one position is flat");
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
        assert_eq!(d("Embedding<100, 8, 12>"), Some((12, 96)));
        assert_eq!(d("PositionalEmbedding<16, 8, 12>"), Some((96, 96)));
        assert_eq!(
            d("CausalSelfAttention<12, 8, 2, true, false>"),
            Some((96, 96))
        );
        assert_eq!(d("Dense<N, 4>"), None);
        assert_eq!(d("MyLayer<3>"), None);
        assert_eq!(
            d("Conv1d<4, 2, 3, 5>"),
            None,
            "a kernel longer than the sequence"
        );
    }

    #[test]
    fn losses() {
        let classes = |s: &str| sequence_classes(&ty(s));
        assert_eq!(classes("SequenceCrossEntropy<5>"), Some(5));
        assert_eq!(classes("loss::SequenceCrossEntropy<C>"), None);
        assert_eq!(classes("SoftmaxCrossEntropy"), None);
    }

    /// Each size a layer cannot have is one mistake, with the type to write where there is
    /// one.
    #[test]
    fn own_mistakes() {
        assert_eq!(mistakes("Dense<0, 0>"), [Mistake::Zero("the input size")]);
        assert_eq!(
            mistakes("CausalSelfAttention<16, 30, 4>"),
            [Mistake::HeadsDoNotDivide {
                width: 30,
                heads: 4,
                other_heads: "CausalSelfAttention<16, 30, 5>".into(),
                other_width: "CausalSelfAttention<16, 32, 4>".into(),
            }]
        );
        assert_eq!(
            mistakes("PositionalEmbedding<6, 4, 8>"),
            [Mistake::TableTooShort {
                table: 6,
                len: 8,
                fixed: "PositionalEmbedding<8, 4, 8>".into()
            }]
        );
        assert_eq!(
            mistakes("Embedding<10, 4, 8, 10>"),
            [Mistake::PaddingOutside {
                pad: 10,
                vocab: 10,
                fixed: "Embedding<10, 4, 8>".into()
            }]
        );
        assert_eq!(mistakes("Embedding<10, 4, 8, NO_PADDING>"), []);
        assert_eq!(mistakes("Gru<4, 2, 3, 9>").len(), 1);
        assert_eq!(mistakes("Conv1d<4, 2, 3, 5>").len(), 1);
        assert_eq!(mistakes("Conv1d<4, 2, 3, 5, 1, Same>"), []);
        assert_eq!(
            mistakes("PerPosition<Dense<4, 0>, 3>"),
            [Mistake::Zero("the output size")]
        );
        assert_eq!(mistakes("Dropout<8, 1000>"), [Mistake::DropoutRate(1000)]);
        assert_eq!(mistakes("Dropout<8, RATE>"), []);
    }

    /// The type to write takes the input's sizes where the type's arguments hold them.
    #[test]
    fn fixed_inputs() {
        let fix = |s: &str, have: Shape| {
            let t = ty(s);
            with_input(&t, &layer(&t).unwrap(), have).map(|t| render(&t))
        };
        let seq = |len, features| Shape::Seq { len, features };
        assert_eq!(
            fix("Gru<12, 16, 32>", seq(16, 16)).as_deref(),
            Some("Gru<16, 16, 32>")
        );
        assert_eq!(
            fix("PerPosition<Dense<4, 6, Gelu>, 10>", seq(3, 8)).as_deref(),
            Some("PerPosition<Dense<8, 6, Gelu>, 3>")
        );
        assert_eq!(
            fix("PositionalEmbedding<6, 4, 6>", seq(8, 4)).as_deref(),
            Some("PositionalEmbedding<8, 4, 8>")
        );
        assert_eq!(
            fix("fusegraph::layers::Dense<3, 2>", Shape::Flat(7)).as_deref(),
            Some("fusegraph::layers::Dense<7, 2>")
        );
        assert_eq!(
            fix("MeanOverTime<4, 8>", Shape::Flat(24)).as_deref(),
            Some("MeanOverTime<3, 8>")
        );
        assert_eq!(
            fix("MeanOverTime<4, 8>", Shape::Flat(20)).as_deref(),
            Some("MeanOverTime<4, 5>")
        );
        assert_eq!(fix("MeanOverTime<4, 8>", Shape::Flat(7)), None);
        assert_eq!(fix("Conv2d<8, 8, 1, 4, 3, 3>", Shape::Flat(7)), None);
        let other = |s: &str| {
            layer(&ty(s))
                .unwrap()
                .other_output
                .map(|(t, s)| (render(&t), s))
        };
        assert_eq!(
            other("Gru<4, 2, 3>"),
            Some(("Gru<4, 2, 3, 1, Sequence>".into(), seq(4, 3)))
        );
        assert_eq!(
            other("Lstm<4, 2, 3, 2, Sequence>"),
            Some(("Lstm<4, 2, 3, 2, Last>".into(), Shape::Flat(3)))
        );
    }
}
