//! Syntax of `loss!`: one or more definitions
//! `attrs vis Name { constants }? (pred, target) = body (, reduce = mean|sum)? ;`.

use crate::constants::{self, Const};
use syn::parse::discouraged::Speculative;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{parenthesized, Attribute, Ident, Token, Visibility};

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
    let consts = constants::parse_braced(input)?;
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
                    constants::skip_definition(input)?;
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
