//! Constant parameters of `activation!` and `loss!`: the `{ name: f32 = value, .. }` after a
//! definition's name, each an associated constant of the generated type. Both macros parse,
//! check and expand them here; each keeps its own naming of the associated constants, its
//! messages and its docs, and passes them in.

use crate::errors::{self, Errors};
use crate::expr::ast::{self, Expr};
use proc_macro2::{Literal, TokenStream, TokenTree};
use quote::quote;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{braced, Attribute, Ident, Token, Type, Visibility};

/// `name: f32 = value`, a constant of a definition.
pub struct Const {
    pub attrs: Vec<Attribute>,
    pub name: Ident,
    pub ty: Type,
    /// `None` when the `= value` is missing (reported by `check`).
    pub default: Option<syn::Expr>,
}

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

/// The constants in the braces `input` starts with; none without braces.
pub fn parse_braced(input: ParseStream) -> syn::Result<Vec<Const>> {
    if !input.peek(syn::token::Brace) {
        return Ok(Vec::new());
    }
    let content;
    braced!(content in input);
    Ok(Punctuated::<Const, Token![,]>::parse_terminated(&content)?
        .into_iter()
        .collect())
}

/// Skips the rest of a definition that did not parse, up to and including its `;`, so that
/// the definitions after it are still parsed.
pub fn skip_definition(input: ParseStream) -> syn::Result<()> {
    input.step(|cursor| {
        let mut rest = *cursor;
        while let Some((tt, next)) = rest.token_tree() {
            rest = next;
            if matches!(&tt, TokenTree::Punct(p) if p.as_char() == ';') {
                break;
            }
        }
        Ok(((), rest))
    })
}

/// The names defined so far in one invocation: a name defined again is an error at the later
/// definition, and the first definition's type is the one both macros expand.
#[derive(Default)]
pub struct Definitions {
    names: Vec<String>,
}

impl Definitions {
    /// Records the definition named `name`: an error when an earlier one has that name.
    pub fn add(&mut self, name: &Ident) -> syn::Result<()> {
        let text = name.to_string();
        if self.names.contains(&text) {
            return Err(syn::Error::new(
                name.span(),
                errors::definition_twice(&text),
            ));
        }
        self.names.push(text);
        Ok(())
    }
}

/// How a macro names the associated constant of a constant (`alpha` -> `ALPHA`).
pub type Naming = fn(&Ident) -> Ident;

/// A macro's messages for a constant that is not `f32` and one without a value.
pub struct Messages {
    pub not_f32: fn(&str) -> String,
    pub without_value: fn(&str) -> String,
}

/// Reports `consts[i]` when an earlier constant of another name has its associated constant.
pub fn check_collision(consts: &[Const], i: usize, naming: Naming, errs: &mut Errors) {
    let c = &consts[i];
    let ident = naming(&c.name).to_string();
    let first = consts[..i]
        .iter()
        .find(|d| d.name != c.name && naming(&d.name) == ident);
    if let Some(first) = first {
        let (name, first) = (c.name.to_string(), first.name.to_string());
        errs.at(
            c.name.span(),
            errors::const_collision(&name, &first, &ident),
        );
    }
}

/// The value of a constant, after reporting a type other than `f32`, a missing value and a
/// value that is not a number literal; 0 when the value is wrong, so that the definition is
/// still checked.
pub fn value(c: &Const, msgs: &Messages, errs: &mut Errors) -> f64 {
    let is_f32 = matches!(&c.ty, syn::Type::Path(p) if p.qself.is_none() && p.path.is_ident("f32"));
    if !is_f32 {
        errs.at(c.ty.span(), (msgs.not_f32)(&c.name.to_string()));
    }
    match &c.default {
        None => {
            errs.at(c.name.span(), (msgs.without_value)(&c.name.to_string()));
            0.0
        }
        Some(d) => literal(d).unwrap_or_else(|| {
            errs.at(d.span(), errors::default_literal());
            0.0
        }),
    }
}

/// A number literal, possibly negated, that fits in an `f32`.
pub fn literal(e: &syn::Expr) -> Option<f64> {
    let mut errs = Errors::default();
    let v = match ast::parse_expr(e, &mut errs)? {
        Expr::Num { value, .. } => value,
        Expr::Neg(x, _) => match *x {
            Expr::Num { value, .. } => -value,
            _ => return None,
        },
        _ => return None,
    };
    (errs.is_empty() && (v as f32).is_finite()).then_some(v)
}

/// `attrs doc pub const NAME: f32 = value;` for each constant, with `values[i]` and the doc
/// `doc(i, c)` gives. A constant whose associated name an earlier one took is reported by
/// `check_collision`; only the first is defined, so that the mistake gives one error.
pub fn items(
    consts: &[Const],
    values: &[f64],
    naming: Naming,
    doc: impl Fn(usize, &Const) -> Option<String>,
) -> Vec<TokenStream> {
    let mut taken = Vec::new();
    consts
        .iter()
        .zip(values)
        .enumerate()
        .filter(|(_, (c, _))| {
            let id = naming(&c.name).to_string();
            let fresh = !taken.contains(&id);
            taken.push(id);
            fresh
        })
        .map(|(i, (c, v))| {
            let id = naming(&c.name);
            let attrs = &c.attrs;
            let doc = doc(i, c).map(|d| quote!(#[doc = #d]));
            let v = Literal::f32_suffixed(*v as f32);
            quote!(#(#attrs)* #doc pub const #id: f32 = #v;)
        })
        .collect()
}

/// The unit struct of a definition (generic over its feature count `N` when `generic`) and
/// the `impl` holding its constants' `items`: what the real and the fallback expansion share.
pub fn header(
    attrs: &[Attribute],
    vis: &Visibility,
    name: &Ident,
    generic: bool,
    items: &[TokenStream],
) -> TokenStream {
    let (params, args) = if generic {
        (quote!(<const N: usize>), quote!(<N>))
    } else {
        (TokenStream::new(), TokenStream::new())
    };
    let consts = (!items.is_empty()).then(|| quote!(impl #params #name #args { #(#items)* }));
    quote! {
        #(#attrs)*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        #vis struct #name #params;

        #consts
    }
}

/// The `describe` method of a definition's trait implementation: `head` writes its name into
/// `out`, then each constant follows as the type holds it, ` { alpha: 0.2, beta: 1 }`, so that
/// a checkpoint tells two values of a constant apart.
pub fn describe(head: TokenStream, consts: &[Const], naming: Naming) -> TokenStream {
    let fields = consts.iter().enumerate().map(|(i, c)| {
        let id = naming(&c.name);
        let text = format!("{}{}: {{}}", if i == 0 { " {{ " } else { ", " }, c.name);
        quote!(::core::write!(out, #text, Self::#id)?;)
    });
    let close = (!consts.is_empty()).then(|| quote!(out.write_str(" }")?;));
    quote! {
        fn describe(out: &mut dyn ::core::fmt::Write) -> ::core::fmt::Result {
            #head
            #(#fields)*
            #close
            ::core::result::Result::Ok(())
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use proc_macro2::TokenStream;

    /// The messages of one invocation (their beginnings); a panic inside the macro fails the
    /// test.
    pub(crate) fn errors(out: &TokenStream) -> Vec<String> {
        out.to_string()
            .split("compile_error")
            .skip(1)
            .map(|m| m.chars().take(120).collect())
            .collect()
    }

    /// Each mistake of `cases` is one spanned error of `expand` (never a panic, never a
    /// cascade), whose message contains the given words.
    pub(crate) fn one_error_each(expand: fn(TokenStream) -> TokenStream, cases: &[(&str, &str)]) {
        for (src, words) in cases {
            let out = expand(src.parse().expect("tokens"));
            let errs = errors(&out);
            assert_eq!(errs.len(), 1, "{src}: {errs:?}");
            assert!(errs[0].contains(words), "{src}: {errs:?}");
        }
    }

    #[test]
    fn constants_parse_with_and_without_braces() {
        let parse = |src: &str| {
            syn::parse::Parser::parse_str(super::parse_braced, src)
                .map(|c| c.iter().map(|c| c.name.to_string()).collect::<Vec<_>>())
        };
        assert_eq!(parse("").unwrap(), Vec::<String>::new());
        assert_eq!(parse("{ a: f32 = 1.0, b: f32, }").unwrap(), ["a", "b"]);
        assert!(parse("{ a = 1.0 }").is_err());
    }

    #[test]
    fn literals_fit_an_f32() {
        let lit = |src: &str| super::literal(&syn::parse_str(src).unwrap());
        assert_eq!(lit("-0.5"), Some(-0.5));
        assert_eq!(lit("2"), Some(2.0));
        assert_eq!(lit("1e39"), None);
        assert_eq!(lit("1.0 + 1.0"), None);
    }
}
