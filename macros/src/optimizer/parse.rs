//! Syntax of `optimizer!`: a struct-like header and its sections.

use crate::errors;
use crate::expr::emit::Prec;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{braced, parenthesized, Attribute, Ident, Token, Type, Visibility};

/// `name: f32 = default` in `hyper`.
pub struct Hyper {
    pub attrs: Vec<Attribute>,
    pub name: Ident,
    pub ty: Type,
    pub default: syn::Expr,
}

/// `name = init` in `slots` or `carry`, or `name: [dims] = init` for a slot that keeps a
/// row or column statistic; `name = expr` in `views` (doc comments are allowed and not kept).
pub struct Init {
    pub name: Ident,
    /// The dimensions written in `[..]`: `rows`, `cols` or `1` each.
    pub dims: Option<(proc_macro2::Span, Vec<syn::Expr>)>,
    pub init: syn::Expr,
}

/// One `update` section: `update { .. }`, or a branch `update name when cond { .. }`.
pub struct Branch {
    /// The `update` keyword.
    pub keyword: Ident,
    pub name: Option<Ident>,
    /// The condition after `when`.
    pub when: Option<syn::Expr>,
    pub stmts: Vec<syn::Stmt>,
}

/// The whole definition, as written.
pub struct Def {
    pub attrs: Vec<Attribute>,
    pub vis: Visibility,
    pub name: Ident,
    pub hyper: Vec<Hyper>,
    pub slots: Vec<Init>,
    pub carry: Vec<Init>,
    /// `views { name = expr, .. }`: other values of the parameters.
    pub views: Vec<Init>,
    pub prec: Prec,
    pub step: Vec<syn::Stmt>,
    pub update: Vec<Branch>,
}

impl Parse for Hyper {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let name = input.parse()?;
        input.parse::<Token![:]>()?;
        let ty = input.parse()?;
        input.parse::<Token![=]>()?;
        let default = input.parse()?;
        Ok(Hyper {
            attrs,
            name,
            ty,
            default,
        })
    }
}

impl Parse for Init {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        input.call(Attribute::parse_outer)?;
        let name = input.parse()?;
        let dims = if input.peek(Token![:]) {
            input.parse::<Token![:]>()?;
            let content;
            let bracket = syn::bracketed!(content in input);
            let dims = Punctuated::<syn::Expr, Token![,]>::parse_terminated(&content)?;
            Some((bracket.span.join(), dims.into_iter().collect()))
        } else {
            None
        };
        input.parse::<Token![=]>()?;
        let init = input.parse()?;
        Ok(Init { name, dims, init })
    }
}

impl Parse for Def {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let vis = input.parse()?;
        input.parse::<Token![struct]>()?;
        let name = input.parse()?;
        let content;
        braced!(content in input);
        let mut def = Def {
            attrs,
            vis,
            name,
            hyper: Vec::new(),
            slots: Vec::new(),
            carry: Vec::new(),
            views: Vec::new(),
            prec: Prec::F32,
            step: Vec::new(),
            update: Vec::new(),
        };
        let mut seen: Vec<String> = Vec::new();
        while !content.is_empty() {
            let section: Ident = content.parse()?;
            let key = section.to_string();
            if key == "update" {
                def.update.push(branch(section, &content)?);
                continue;
            }
            if seen.contains(&key) {
                return Err(syn::Error::new(section.span(), errors::section_twice(&key)));
            }
            seen.push(key.clone());
            if key == "step" && content.peek(syn::token::Paren) {
                let p;
                parenthesized!(p in content);
                let ty: Ident = p.parse()?;
                def.prec = match ty.to_string().as_str() {
                    "f64" => Prec::F64,
                    "f32" => Prec::F32,
                    _ => return Err(syn::Error::new(ty.span(), errors::precision())),
                };
            }
            let body;
            braced!(body in content);
            match key.as_str() {
                "hyper" => {
                    def.hyper = Punctuated::<Hyper, Token![,]>::parse_terminated(&body)?
                        .into_iter()
                        .collect()
                }
                "slots" => {
                    def.slots = Punctuated::<Init, Token![,]>::parse_terminated(&body)?
                        .into_iter()
                        .collect()
                }
                "carry" => {
                    def.carry = Punctuated::<Init, Token![,]>::parse_terminated(&body)?
                        .into_iter()
                        .collect()
                }
                "views" => {
                    def.views = Punctuated::<Init, Token![,]>::parse_terminated(&body)?
                        .into_iter()
                        .collect()
                }
                "step" => def.step = syn::Block::parse_within(&body)?,
                _ => {
                    return Err(syn::Error::new(
                        section.span(),
                        errors::unknown_section(&key),
                    ))
                }
            }
        }
        Ok(def)
    }
}

/// The rest of an `update` section after its keyword: an optional name and `when` condition,
/// and the block.
fn branch(keyword: Ident, input: ParseStream) -> syn::Result<Branch> {
    let mut name = None;
    let mut when = None;
    if input.peek(Ident) {
        let first: Ident = input.parse()?;
        let when_keyword = if first == "when" {
            Some(first)
        } else {
            name = Some(first);
            input
                .peek(Ident)
                .then(|| input.parse::<Ident>())
                .transpose()?
        };
        if let Some(w) = when_keyword {
            if w != "when" {
                return Err(syn::Error::new(w.span(), errors::branch_condition()));
            }
            when = Some(input.call(syn::Expr::parse_without_eager_brace)?);
        }
    }
    let body;
    braced!(body in input);
    Ok(Branch {
        keyword,
        name,
        when,
        stmts: syn::Block::parse_within(&body)?,
    })
}
