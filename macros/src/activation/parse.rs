//! Syntax of `activation!`: definitions `Name { constants } [learnable] (x) = expr;`, each
//! parsed on its own so that a syntax error in one still leaves the others (and its type)
//! defined.

use crate::constants::{self, Const};
use proc_macro2::{Span, TokenTree};
use syn::parse::discouraged::Speculative;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{bracketed, parenthesized, Attribute, Ident, Token, Visibility};

/// `name = initial value` in the square brackets: a learnable per-feature parameter.
pub struct Learnable {
    pub name: Ident,
    pub init: Option<syn::Expr>,
}

/// What follows the name: the constants, the learnable parameters, the variable and the
/// expression.
pub struct Body {
    pub params: Vec<Const>,
    /// The square brackets (for the span of an empty `[]`) and what they hold; `None` without
    /// brackets.
    pub learnables: Option<(Span, Vec<Learnable>)>,
    pub var: Ident,
    pub expr: syn::Expr,
}

/// One definition, as written; `body` is the syntax error when the part after the name did
/// not parse.
pub struct Def {
    pub attrs: Vec<Attribute>,
    pub vis: Visibility,
    pub name: Ident,
    /// Whether the definition has square brackets before its `=`: a layer generic over its
    /// feature count, even when the rest did not parse.
    pub learnable: bool,
    pub body: Result<Body, syn::Error>,
}

/// Every definition of one invocation.
pub struct Defs(pub Vec<Def>);

impl Parse for Learnable {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let name: Ident = input.parse()?;
        let init = if input.parse::<Option<Token![=]>>()?.is_some() {
            Some(input.parse()?)
        } else if input.is_empty() || input.peek(Token![,]) {
            None
        } else {
            return Err(input.error(crate::errors::learnable_form(&name.to_string())));
        };
        Ok(Learnable { name, init })
    }
}

fn body(input: ParseStream) -> syn::Result<Body> {
    let params = constants::parse_braced(input)?;
    let learnables = if input.peek(syn::token::Bracket) {
        let content;
        let brackets = bracketed!(content in input);
        let list = Punctuated::<Learnable, Token![,]>::parse_terminated(&content)?;
        Some((brackets.span.join(), list.into_iter().collect()))
    } else {
        None
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
    Ok(Body {
        params,
        learnables,
        var,
        expr,
    })
}

impl Parse for Defs {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut defs = Vec::new();
        while !input.is_empty() {
            let attrs = input.call(Attribute::parse_outer)?;
            let vis = input.parse()?;
            let name = input.parse()?;
            let learnable = has_brackets(input);
            let fork = input.fork();
            let body = match body(&fork) {
                Ok(b) => {
                    input.advance_to(&fork);
                    Ok(b)
                }
                Err(e) => {
                    // Skip to the end of this definition.
                    constants::skip_definition(input)?;
                    Err(e)
                }
            };
            defs.push(Def {
                attrs,
                vis,
                name,
                learnable,
                body,
            });
        }
        Ok(Defs(defs))
    }
}

/// Whether square brackets come before the first `=` of the definition that `input` starts.
fn has_brackets(input: ParseStream) -> bool {
    let mut rest = input.cursor();
    while let Some((tt, next)) = rest.token_tree() {
        match &tt {
            TokenTree::Group(g) if g.delimiter() == proc_macro2::Delimiter::Bracket => return true,
            TokenTree::Punct(p) if matches!(p.as_char(), '=' | ';') => return false,
            _ => rest = next,
        }
    }
    false
}
