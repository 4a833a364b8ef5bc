//! Syntax of `#[model(...)]` and the struct it decorates.

use crate::errors;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{parenthesized, Attribute, Ident, Token, Type, Visibility};

/// A layer field.
pub struct Field {
    /// Its attributes but `#[frozen]`.
    pub attrs: Vec<Attribute>,
    pub vis: Visibility,
    pub name: Ident,
    pub ty: Type,
    /// `#[frozen]` or `#[frozen(weight, ...)]`: what of the layer does not train.
    pub frozen: Option<Frozen>,
}

/// What `#[frozen]` freezes.
pub enum Frozen {
    /// `#[frozen]`: every tensor of the layer (the attribute's span).
    Layer(proc_macro2::Span),
    /// `#[frozen(weight, ...)]`: the tensors named.
    Tensors(Vec<Ident>),
    /// `#[frozen(static = PATH)]`: every tensor, read from the `static` array `PATH` (in
    /// flash on a microcontroller), not from the model's parameter buffer.
    Static(syn::Path),
    /// `#[frozen(torch = "file.safetensors")]`, with `key = "prefix"` when the file's keys of
    /// the layer do not start with the field's name: every tensor, read from a file saved by
    /// PyTorch when the crate compiles, into a `static` array.
    Torch {
        file: syn::LitStr,
        key: Option<syn::LitStr>,
    },
}

impl Frozen {
    /// Where the attribute is.
    pub fn span(&self) -> proc_macro2::Span {
        match self {
            Frozen::Layer(span) => *span,
            Frozen::Tensors(names) => names[0].span(),
            Frozen::Static(path) => syn::spanned::Spanned::span(path),
            Frozen::Torch { file, .. } => file.span(),
        }
    }
}

/// A field's `#[frozen]` attributes, taken out of `attrs`; a malformed or repeated one goes to
/// `errors`.
fn take_frozen(attrs: &mut Vec<Attribute>, errors: &mut Vec<syn::Error>) -> Option<Frozen> {
    let mut frozen = None;
    let mut rest = Vec::new();
    for attr in attrs.drain(..) {
        if !attr.path().is_ident("frozen") {
            rest.push(attr);
            continue;
        }
        if frozen.is_some() {
            errors.push(syn::Error::new_spanned(&attr, errors::frozen_twice()));
            continue;
        }
        match frozen_of(&attr) {
            Ok(f) => frozen = Some(f),
            Err(e) => errors.push(e),
        }
    }
    *attrs = rest;
    frozen
}

/// `static = PATH`, or `torch = "file"` with an optional `, key = "prefix"`; `None` for
/// anything else (a list of tensor names), consuming nothing.
fn from_static(input: ParseStream) -> syn::Result<Option<Frozen>> {
    if input.peek(Token![static]) {
        input.parse::<Token![static]>()?;
        input.parse::<Token![=]>()?;
        return Ok(Some(Frozen::Static(input.parse()?)));
    }
    let torch = input.fork().parse::<Ident>().is_ok_and(|i| i == "torch") && input.peek2(Token![=]);
    if !torch {
        // Leave the names to the caller.
        input.parse::<proc_macro2::TokenStream>()?;
        return Ok(None);
    }
    input.parse::<Ident>()?;
    input.parse::<Token![=]>()?;
    let file = input.parse()?;
    let mut key = None;
    if input.parse::<Option<Token![,]>>()?.is_some() && !input.is_empty() {
        let k: Ident = input.parse()?;
        if k != "key" {
            return Err(syn::Error::new(k.span(), errors::frozen_syntax()));
        }
        input.parse::<Token![=]>()?;
        key = Some(input.parse()?);
    }
    Ok(Some(Frozen::Torch { file, key }))
}

/// `#[frozen]` or `#[frozen(a, b)]` with distinct names.
fn frozen_of(attr: &Attribute) -> syn::Result<Frozen> {
    let list = match &attr.meta {
        syn::Meta::Path(p) => return Ok(Frozen::Layer(syn::spanned::Spanned::span(p))),
        syn::Meta::List(list) => list,
        syn::Meta::NameValue(nv) => {
            return Err(syn::Error::new_spanned(nv, errors::frozen_syntax()));
        }
    };
    if let Some(frozen) = list
        .parse_args_with(from_static)
        .map_err(|e| syn::Error::new(e.span(), errors::frozen_syntax()))?
    {
        return Ok(frozen);
    }
    let names = list
        .parse_args_with(Punctuated::<Ident, Token![,]>::parse_terminated)
        .map_err(|e| syn::Error::new(e.span(), errors::frozen_syntax()))?;
    let names: Vec<Ident> = names.into_iter().collect();
    if names.is_empty() {
        return Err(syn::Error::new_spanned(list, errors::frozen_syntax()));
    }
    for (i, n) in names.iter().enumerate() {
        if names[..i].contains(n) {
            return Err(syn::Error::new(
                n.span(),
                errors::frozen_named_twice(&n.to_string()),
            ));
        }
    }
    Ok(Frozen::Tensors(names))
}

/// `name = expr` in `graph(...)`.
pub struct Assign {
    pub name: Ident,
    pub expr: syn::Expr,
}

/// The model as written.
pub struct Def {
    pub attrs: Vec<Attribute>,
    pub vis: Visibility,
    pub name: Ident,
    pub fields: Vec<Field>,
    pub loss: Option<Type>,
    /// `input = f32` or `input = u32` (token ids); `f32` when absent.
    pub input: Option<Type>,
    pub graph: Option<(Ident, Vec<Assign>)>,
    /// `inline`: parameters and state in arrays inside the struct.
    pub inline: bool,
    /// Every `key = value` and flag of the attribute besides `loss` and `graph`, as written;
    /// `check` makes a budget of them.
    pub options: Vec<Opt>,
    /// Keys given more than once (the second and later).
    pub repeated: Vec<Ident>,
    /// A syntax error in the attribute: reported by `check`, so that the struct still gets its
    /// fallback expansion.
    pub attr_error: Option<syn::Error>,
    /// Mistakes in the fields' `#[frozen]` attributes, reported by `check`.
    pub frozen_errors: Vec<syn::Error>,
}

/// A memory-budget option as written.
pub enum OptValue {
    /// `max_bytes = N`, `batch = N`.
    Int(syn::Expr),
    /// `optimizer = Rule`.
    Type(Type),
    /// `fused`.
    Flag,
}

/// `key = value` or `key`, for the memory budget.
pub struct Opt {
    pub key: Ident,
    pub value: OptValue,
}

enum Arg {
    Loss(Ident, Type),
    Input(Ident, Type),
    Graph(Ident, Vec<Assign>),
    Inline(Ident),
    Budget(Opt),
}

impl Parse for Assign {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let name = input.parse()?;
        input.parse::<Token![=]>()?;
        let expr = input.parse()?;
        Ok(Assign { name, expr })
    }
}

/// A flag: an error if a value follows.
fn flag(key: &Ident, input: ParseStream) -> syn::Result<()> {
    if input.peek(Token![=]) {
        return Err(syn::Error::new(
            key.span(),
            errors::flag_with_value(&key.to_string()),
        ));
    }
    Ok(())
}

impl Parse for Arg {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let key: Ident = input.parse()?;
        match key.to_string().as_str() {
            "loss" => {
                input.parse::<Token![=]>()?;
                Ok(Arg::Loss(key, input.parse()?))
            }
            "input" => {
                input.parse::<Token![=]>()?;
                let ty: Type = input.parse()?;
                let known = matches!(&ty, Type::Path(t) if t.path.is_ident("f32") || t.path.is_ident("u32"));
                if !known {
                    return Err(syn::Error::new_spanned(ty, errors::unknown_input()));
                }
                Ok(Arg::Input(key, ty))
            }
            "graph" => {
                let body;
                parenthesized!(body in input);
                let assigns = Punctuated::<Assign, Token![,]>::parse_terminated(&body)?;
                Ok(Arg::Graph(key, assigns.into_iter().collect()))
            }
            "inline" => {
                flag(&key, input)?;
                Ok(Arg::Inline(key))
            }
            "fused" => {
                flag(&key, input)?;
                Ok(Arg::Budget(Opt {
                    key,
                    value: OptValue::Flag,
                }))
            }
            "max_bytes" | "batch" => {
                input.parse::<Token![=]>()?;
                let value = OptValue::Int(input.parse()?);
                Ok(Arg::Budget(Opt { key, value }))
            }
            "optimizer" => {
                input.parse::<Token![=]>()?;
                let value = OptValue::Type(input.parse()?);
                Ok(Arg::Budget(Opt { key, value }))
            }
            other => Err(syn::Error::new(
                key.span(),
                errors::unknown_model_option(other),
            )),
        }
    }
}

pub fn parse(attr: proc_macro2::TokenStream, item: proc_macro2::TokenStream) -> syn::Result<Def> {
    let item: syn::ItemStruct = syn::parse2(item)?;
    let (args, attr_error) =
        match syn::parse::Parser::parse2(Punctuated::<Arg, Token![,]>::parse_terminated, attr) {
            Ok(args) => (args, None),
            Err(e) => (Punctuated::new(), Some(e)),
        };
    if !item.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(
            &item.generics,
            errors::model_generic(),
        ));
    }
    let syn::Fields::Named(named) = &item.fields else {
        return Err(syn::Error::new_spanned(
            &item.fields,
            errors::model_fields(),
        ));
    };
    let mut frozen_errors = Vec::new();
    let fields = named
        .named
        .iter()
        .map(|f| {
            let mut attrs = f.attrs.clone();
            let frozen = take_frozen(&mut attrs, &mut frozen_errors);
            Field {
                attrs,
                vis: f.vis.clone(),
                name: f.ident.clone().expect("named field"),
                ty: f.ty.clone(),
                frozen,
            }
        })
        .collect();
    let mut def = Def {
        attrs: item.attrs,
        vis: item.vis,
        name: item.ident,
        fields,
        loss: None,
        input: None,
        graph: None,
        inline: false,
        options: Vec::new(),
        repeated: Vec::new(),
        attr_error,
        frozen_errors,
    };
    let mut seen: Vec<String> = Vec::new();
    for a in args {
        let key = match &a {
            Arg::Loss(k, _) | Arg::Input(k, _) | Arg::Graph(k, _) | Arg::Inline(k) => k,
            Arg::Budget(o) => &o.key,
        };
        if seen.contains(&key.to_string()) {
            def.repeated.push(key.clone());
            continue;
        }
        seen.push(key.to_string());
        match a {
            Arg::Loss(_, t) => def.loss = Some(t),
            Arg::Input(_, t) => def.input = Some(t),
            Arg::Graph(k, g) => def.graph = Some((k, g)),
            Arg::Inline(_) => def.inline = true,
            Arg::Budget(o) => def.options.push(o),
        }
    }
    Ok(def)
}
