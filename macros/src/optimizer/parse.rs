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

/// `name = init` in `slots` or `carry` (doc comments are allowed and not kept).
pub struct Init {
    pub name: Ident,
    pub init: syn::Expr,
}

/// The whole definition, as written.
pub struct Def {
    pub attrs: Vec<Attribute>,
    pub vis: Visibility,
    pub name: Ident,
    pub hyper: Vec<Hyper>,
    pub slots: Vec<Init>,
    pub carry: Vec<Init>,
    pub prec: Prec,
    pub step: Vec<syn::Stmt>,
    pub update: Option<(Ident, Vec<syn::Stmt>)>,
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
        input.parse::<Token![=]>()?;
        let init = input.parse()?;
        Ok(Init { name, init })
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
            prec: Prec::F32,
            step: Vec::new(),
            update: None,
        };
        let mut seen: Vec<String> = Vec::new();
        while !content.is_empty() {
            let section: Ident = content.parse()?;
            let key = section.to_string();
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
                "step" => def.step = syn::Block::parse_within(&body)?,
                "update" => def.update = Some((section, syn::Block::parse_within(&body)?)),
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
