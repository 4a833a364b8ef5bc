//! Syntax of `loss!`: one or more definitions
//! `attrs vis Name { constants }? (pred, target) = body (, reduce = mean|sum)? ;`.

use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{braced, parenthesized, Attribute, Ident, Token, Type, Visibility};

/// `name: f32 = default`, a constant of the loss.
pub struct Const {
    pub attrs: Vec<Attribute>,
    pub name: Ident,
    pub ty: Type,
    pub default: syn::Expr,
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

/// Every definition of one invocation.
pub struct Defs(pub Vec<Def>);

impl Parse for Const {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let name = input.parse()?;
        input.parse::<Token![:]>()?;
        let ty = input.parse()?;
        input.parse::<Token![=]>()?;
        let default = input.parse()?;
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
}

impl Parse for Defs {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut defs = Vec::new();
        while !input.is_empty() {
            defs.push(input.parse()?);
        }
        Ok(Defs(defs))
    }
}
