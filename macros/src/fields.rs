//! The struct's fields, as the derive reads them.

use syn::{Data, DeriveInput, Fields, Type};

pub(crate) fn field_type(input: &DeriveInput, name: &str) -> Option<Type> {
    let Data::Struct(data) = &input.data else {
        return None;
    };
    let Fields::Named(fields) = &data.fields else {
        return None;
    };
    fields
        .named
        .iter()
        .find(|f| f.ident.as_ref().is_some_and(|i| i == name))
        .map(|f| f.ty.clone())
}

pub(crate) fn field_docs(input: &DeriveInput, name: &str) -> Option<String> {
    let Data::Struct(data) = &input.data else {
        return None;
    };
    let Fields::Named(fields) = &data.fields else {
        return None;
    };
    let field = fields
        .named
        .iter()
        .find(|f| f.ident.as_ref().is_some_and(|i| i == name))?;
    let lines: Vec<String> = field
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .filter_map(|a| match &a.meta {
            syn::Meta::NameValue(nv) => match &nv.value {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }) => Some(s.value().trim().to_owned()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    let joined = lines.join(" ").trim().to_owned();
    (!joined.is_empty()).then_some(joined)
}

/// The attributes of the field `name` (none when there is no such field).
pub(crate) fn field_attrs(input: &DeriveInput, name: &str) -> Vec<syn::Attribute> {
    let Data::Struct(data) = &input.data else {
        return Vec::new();
    };
    let Fields::Named(fields) = &data.fields else {
        return Vec::new();
    };
    fields
        .named
        .iter()
        .find(|f| f.ident.as_ref().is_some_and(|i| i == name))
        .map(|f| f.attrs.clone())
        .unwrap_or_default()
}
