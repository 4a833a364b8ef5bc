//! Syntax of `loss!`: one or more definitions
//! `attrs vis Name { constants }? (pred, target) = body (, reduce = mean|sum)? ;`.

use proc_macro2::TokenTree;
use syn::parse::discouraged::Speculative;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{braced, parenthesized, Attribute, Ident, Token, Type, Visibility};

/// `name: f32 = default`, a constant of the loss.
pub struct Const {
    pub attrs: Vec<Attribute>,
    pub name: Ident,
    pub ty: Type,
    /// `None` when the `= value` is missing (reported by `check`).
    pub default: Option<syn::Expr>,
}

/// One loss, as written.
pub struct Def {
    pub attrs: Vec<Attribute>,
    pub vis: Visibility,
    pub name: Ident,
    pub consts: Vec<Const>,
    /// The parenthesized names (two when well-formed: prediction, then target), and the span
    /// of the parentheses.
    pub params: Vec<Ident>,
    pub params_span: proc_macro2::Span,
    pub body: syn::Expr,
    /// `key = value` after the body, such as `reduce = sum`.
    pub options: Vec<(Ident, Ident)>,
}

/// Every definition of one invocation, each with its syntax error if it has one: a definition
/// that did not parse is kept as its attributes, visibility and name (for the fallback type),
/// and the others are still checked and expanded.
pub struct Defs(pub Vec<(Def, Option<syn::Error>)>);

impl Parse for Const {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let name = input.parse()?;
        input.parse::<Token![:]>()?;
        let ty = input.parse()?;
        let default = if input.parse::<Option<Token![=]>>()?.is_some() {
            Some(input.parse()?)
        } else {
            None
        };
        Ok(Const {
            attrs,
            name,
            ty,
            default,
        })
    }
}

impl Parse for Def {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let vis = input.parse()?;
        let name = input.parse()?;
        rest(input, attrs, vis, name)
    }
}

/// What follows the name of a definition.
fn rest(
    input: ParseStream,
    attrs: Vec<Attribute>,
    vis: Visibility,
    name: Ident,
) -> syn::Result<Def> {
    let mut consts = Vec::new();
    if input.peek(syn::token::Brace) {
        let body;
        braced!(body in input);
        consts = Punctuated::<Const, Token![,]>::parse_terminated(&body)?
            .into_iter()
            .collect();
    }
    let params;
    let paren = parenthesized!(params in input);
    let params = Punctuated::<Ident, Token![,]>::parse_terminated(&params)?
        .into_iter()
        .collect();
    input.parse::<Token![=]>()?;
    let body = input.parse()?;
    let mut options = Vec::new();
    while input.peek(Token![,]) {
        input.parse::<Token![,]>()?;
        let key = input.parse()?;
        input.parse::<Token![=]>()?;
        options.push((key, input.parse()?));
    }
    input.parse::<Token![;]>()?;
    Ok(Def {
        attrs,
        vis,
        name,
        consts,
        params,
        params_span: paren.span.join(),
        body,
        options,
    })
}

impl Parse for Defs {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut defs = Vec::new();
        while !input.is_empty() {
            let attrs = input.call(Attribute::parse_outer)?;
            let vis: Visibility = input.parse()?;
            let name: Ident = input.parse()?;
            let fork = input.fork();
            match rest(&fork, attrs.clone(), vis.clone(), name.clone()) {
                Ok(def) => {
                    input.advance_to(&fork);
                    defs.push((def, None));
                }
                Err(e) => {
                    // Skip to the end of this definition; keep its name for the fallback.
                    input.step(|cursor| {
                        let mut rest = *cursor;
                        while let Some((tt, next)) = rest.token_tree() {
                            rest = next;
                            if matches!(&tt, TokenTree::Punct(p) if p.as_char() == ';') {
                                break;
                            }
                        }
                        Ok(((), rest))
                    })?;
                    let def = Def {
                        attrs,
                        vis,
                        params_span: name.span(),
                        name,
                        consts: Vec::new(),
                        params: Vec::new(),
                        body: syn::parse_quote!(0.0),
                        options: Vec::new(),
                    };
                    defs.push((def, Some(e)));
                }
            }
        }
        Ok(Defs(defs))
    }
}
