//! Syntax of `activation!`: definitions `Name { constants } (x) = expr;`, each parsed on its
//! own so that a syntax error in one still leaves the others (and its type) defined.

use proc_macro2::TokenTree;
use syn::parse::discouraged::Speculative;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{braced, parenthesized, Attribute, Ident, Token, Type, Visibility};

/// `name: f32 = default` in the braces after the activation's name.
pub struct Param {
    pub attrs: Vec<Attribute>,
    pub name: Ident,
    pub ty: Type,
    pub default: Option<syn::Expr>,
}

/// What follows the name: the constants, the variable and the expression.
pub struct Body {
    pub params: Vec<Param>,
    pub var: Ident,
    pub expr: syn::Expr,
}

/// One definition, as written; `body` is the syntax error when the part after the name did
/// not parse.
pub struct Def {
    pub attrs: Vec<Attribute>,
    pub vis: Visibility,
    pub name: Ident,
    pub body: Result<Body, syn::Error>,
}

/// Every definition of one invocation.
pub struct Defs(pub Vec<Def>);

impl Parse for Param {
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
        Ok(Param {
            attrs,
            name,
            ty,
            default,
        })
    }
}

fn body(input: ParseStream) -> syn::Result<Body> {
    let params = if input.peek(syn::token::Brace) {
        let content;
        braced!(content in input);
        Punctuated::<Param, Token![,]>::parse_terminated(&content)?
            .into_iter()
            .collect()
    } else {
        Vec::new()
    };
    let content;
    parenthesized!(content in input);
    let var = content.parse()?;
    if !content.is_empty() {
        return Err(content.error(crate::errors::activation_one_variable()));
    }
    input.parse::<Token![=]>()?;
    let expr = input.parse()?;
    input.parse::<Token![;]>()?;
    Ok(Body { params, var, expr })
}

impl Parse for Defs {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut defs = Vec::new();
        while !input.is_empty() {
            let attrs = input.call(Attribute::parse_outer)?;
            let vis = input.parse()?;
            let name = input.parse()?;
            let fork = input.fork();
            let body = match body(&fork) {
                Ok(b) => {
                    input.advance_to(&fork);
                    Ok(b)
                }
                Err(e) => {
                    // Skip to the end of this definition.
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
                    Err(e)
                }
            };
            defs.push(Def {
                attrs,
                vis,
                name,
                body,
            });
        }
        Ok(Defs(defs))
    }
}
