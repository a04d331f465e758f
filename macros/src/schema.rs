//! `JsonSchema` for a kind, in Knative's shape.

use kinject_model::KindModel;
use proc_macro2::TokenStream as TokenStream2;
use quote::quote;
use syn::{DeriveInput, Type};

use crate::fields::field_docs;

/// Knative's schema of a kind: an object with `spec` and `status` only; the API
/// server always keeps `apiVersion`, `kind` and `metadata`.
pub(crate) fn expand_schema(input: &DeriveInput, model: &KindModel) -> TokenStream2 {
    let rt = quote!(::kinject_types::__private);
    let ident = &model.ident;
    let kind = model.kind();
    let property = |name: &str, ty: &Type| {
        let description = field_docs(input, name).map(|d| {
            quote! {
                if let ::std::option::Option::Some(object) = schema.as_object_mut() {
                    object.insert("description".to_owned(), #rt::serde_json::Value::String(#d.to_owned()));
                }
            }
        });
        quote! {
            let mut schema = generator.subschema_for::<#ty>();
            #description
            properties.insert(#name.to_owned(), schema.to_value());
        }
    };
    let spec = model.spec.as_ref().map(|ty| property("spec", ty));
    let status = model.status.as_ref().map(|ty| property("status", ty));
    quote! {
        impl #rt::schemars::JsonSchema for #ident {
            fn schema_name() -> ::std::borrow::Cow<'static, str> {
                ::std::borrow::Cow::Borrowed(#kind)
            }

            fn json_schema(generator: &mut #rt::schemars::SchemaGenerator) -> #rt::schemars::Schema {
                let mut properties = #rt::serde_json::Map::new();
                #spec
                #status
                #rt::schemars::json_schema!({ "type": "object", "properties": properties })
            }
        }
    }
}
