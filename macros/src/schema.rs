//! `JsonSchema` for a kind, in Knative's shape.

use kinject_model::{KindModel, rule, rule_markers};
use proc_macro2::TokenStream as TokenStream2;
use quote::quote;
use syn::{DeriveInput, Type};

use crate::fields::{field_attrs, field_docs};

/// Knative's schema of a kind: an object with `spec` and `status` only; the API
/// server always keeps `apiVersion`, `kind` and `metadata`. `#[rule]` markers
/// on the kind add rules at the root, on `spec` or `status` to that field.
pub(crate) fn expand_schema(input: &DeriveInput, model: &KindModel) -> syn::Result<TokenStream2> {
    let rt = quote!(::kinject_types::__private);
    let ident = &model.ident;
    let kind = model.kind();
    if let Some(attr) = field_attrs(input, "metadata").iter().find(|a| rule::is_rule(a)) {
        return Err(syn::Error::new_spanned(
            attr,
            "a rule cannot sit on `metadata`; put it on the kind and read `self.metadata.name`",
        ));
    }
    let rules_of = |attrs: &[syn::Attribute]| -> syn::Result<Vec<TokenStream2>> {
        Ok(rule_markers(attrs)?.iter().map(|r| r.to_tokens()).collect())
    };
    let root_rules = rules_of(&input.attrs)?;
    let property = |name: &str, ty: &Type| -> syn::Result<TokenStream2> {
        let description = field_docs(input, name).map(|d| {
            quote! {
                if let ::std::option::Option::Some(object) = schema.as_object_mut() {
                    object.insert("description".to_owned(), #rt::serde_json::Value::String(#d.to_owned()));
                }
            }
        });
        let rules = rules_of(&field_attrs(input, name))?;
        Ok(quote! {
            let mut schema = generator.subschema_for::<#ty>().to_value();
            #description
            #( #rules.add_to(&mut schema); )*
            properties.insert(#name.to_owned(), schema);
        })
    };
    let spec = model.spec.as_ref().map(|ty| property("spec", ty)).transpose()?;
    let status = model
        .status
        .as_ref()
        .map(|ty| property("status", ty))
        .transpose()?;
    let root = if root_rules.is_empty() {
        quote!(#rt::schemars::json_schema!({ "type": "object", "properties": properties }))
    } else {
        quote! {{
            let mut root = #rt::serde_json::json!({ "type": "object", "properties": properties });
            #( #root_rules.add_to(&mut root); )*
            #rt::schemars::Schema::try_from(root).unwrap_or_default()
        }}
    };
    Ok(quote! {
        impl #rt::schemars::JsonSchema for #ident {
            fn schema_name() -> ::std::borrow::Cow<'static, str> {
                ::std::borrow::Cow::Borrowed(#kind)
            }

            fn json_schema(generator: &mut #rt::schemars::SchemaGenerator) -> #rt::schemars::Schema {
                let mut properties = #rt::serde_json::Map::new();
                #spec
                #status
                #root
            }
        }
    })
}
