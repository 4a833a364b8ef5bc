//! Syntax of `#[model(...)]` and the struct it decorates.

use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{parenthesized, Attribute, Ident, Token, Type, Visibility};

/// A layer field.
pub struct Field {
    pub attrs: Vec<Attribute>,
    pub vis: Visibility,
    pub name: Ident,
    pub ty: Type,
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
    pub graph: Option<(Ident, Vec<Assign>)>,
}

enum Arg {
    Loss(Type),
    Graph(Ident, Vec<Assign>),
}

impl Parse for Assign {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let name = input.parse()?;
        input.parse::<Token![=]>()?;
        let expr = input.parse()?;
        Ok(Assign { name, expr })
    }
}

impl Parse for Arg {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let key: Ident = input.parse()?;
        match key.to_string().as_str() {
            "loss" => {
                input.parse::<Token![=]>()?;
                Ok(Arg::Loss(input.parse()?))
            }
            "graph" => {
                let body;
                parenthesized!(body in input);
                let assigns = Punctuated::<Assign, Token![,]>::parse_terminated(&body)?;
                Ok(Arg::Graph(key, assigns.into_iter().collect()))
            }
            other => Err(syn::Error::new(
                key.span(),
                format!("unknown model option `{other}`; write `loss = LossType` and optionally `graph(name = expr, ..)`"),
            )),
        }
    }
}

pub fn parse(attr: proc_macro2::TokenStream, item: proc_macro2::TokenStream) -> syn::Result<Def> {
    let args = syn::parse::Parser::parse2(Punctuated::<Arg, Token![,]>::parse_terminated, attr)?;
    let item: syn::ItemStruct = syn::parse2(item)?;
    if !item.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(
            &item.generics,
            "a model cannot be generic: its shapes are the const parameters of its layer types",
        ));
    }
    let syn::Fields::Named(named) = &item.fields else {
        return Err(syn::Error::new_spanned(
            &item.fields,
            "a model is a struct with named layer fields, such as `fc1: Dense<784, 128, Relu>`",
        ));
    };
    let fields = named
        .named
        .iter()
        .map(|f| Field {
            attrs: f.attrs.clone(),
            vis: f.vis.clone(),
            name: f.ident.clone().expect("named field"),
            ty: f.ty.clone(),
        })
        .collect();
    let mut def = Def {
        attrs: item.attrs,
        vis: item.vis,
        name: item.ident,
        fields,
        loss: None,
        graph: None,
    };
    for a in args {
        match a {
            Arg::Loss(t) => def.loss = Some(t),
            Arg::Graph(k, g) => def.graph = Some((k, g)),
        }
    }
    Ok(def)
}
