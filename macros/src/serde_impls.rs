//! `Serialize` and `Deserialize` for a kind.

use kinject_model::KindModel;
use proc_macro2::TokenStream as TokenStream2;
use quote::quote;
use syn::Type;

/// `Serialize` and `Deserialize`: `apiVersion` and `kind` written, and
/// checked when read.
pub(crate) fn expand_serde(model: &KindModel, metadata_ty: &Type) -> TokenStream2 {
    let serialize = expand_serialize(model);
    let deserialize = expand_deserialize(model, metadata_ty);
    quote!(#serialize #deserialize)
}

fn expand_serialize(model: &KindModel) -> TokenStream2 {
    let rt = quote!(::kinject_types::__private);
    let ident = &model.ident;
    let (kind, api_version) = (model.kind(), model.api_version());
    let spec = model
        .spec
        .as_ref()
        .map(|_| quote!(state.serialize_field("spec", &self.spec)?;));
    let status = model.status.as_ref().map(|_| {
        quote! {
            match &self.status {
                ::std::option::Option::Some(status) => state.serialize_field("status", status)?,
                ::std::option::Option::None => state.skip_field("status")?,
            }
        }
    });
    let field_count = 3 + usize::from(model.spec.is_some()) + usize::from(model.status.is_some());
    quote! {
        impl #rt::serde::Serialize for #ident {
            fn serialize<S: #rt::serde::Serializer>(&self, serializer: S) -> ::std::result::Result<S::Ok, S::Error> {
                use #rt::serde::ser::SerializeStruct as _;
                let mut state = serializer.serialize_struct(#kind, #field_count)?;
                state.serialize_field("apiVersion", #api_version)?;
                state.serialize_field("kind", #kind)?;
                state.serialize_field("metadata", &self.metadata)?;
                #spec
                #status
                state.end()
            }
        }
    }
}

fn expand_deserialize(model: &KindModel, metadata_ty: &Type) -> TokenStream2 {
    let rt = quote!(::kinject_types::__private);
    let ident = &model.ident;
    let (kind, api_version) = (model.kind(), model.api_version());
    let serde_crate = "::kinject_types::__private::serde";
    let spec_repr = model.spec.as_ref().map(|ty| quote!(#[serde(default)] spec: #ty,));
    let status_repr = model
        .status
        .as_ref()
        .map(|ty| quote!(#[serde(default)] status: ::std::option::Option<#ty>,));
    let spec_move = model.spec.as_ref().map(|_| quote!(spec: repr.spec,));
    let status_move = model.status.as_ref().map(|_| quote!(status: repr.status,));
    quote! {
        const _: () = {
            #[derive(#rt::serde::Deserialize)]
            #[serde(crate = #serde_crate)]
            struct Repr {
                #[serde(rename = "apiVersion", default)]
                api_version: ::std::option::Option<::std::string::String>,
                #[serde(default)]
                kind: ::std::option::Option<::std::string::String>,
                #[serde(default)]
                metadata: #metadata_ty,
                #spec_repr
                #status_repr
            }

            impl<'de> #rt::serde::Deserialize<'de> for #ident {
                fn deserialize<D: #rt::serde::Deserializer<'de>>(deserializer: D) -> ::std::result::Result<Self, D::Error> {
                    let repr = <Repr as #rt::serde::Deserialize>::deserialize(deserializer)?;
                    // An object of another kind must not be read as this one; a
                    // missing apiVersion or kind (a bare test fixture) is fine.
                    if let ::std::option::Option::Some(found) = &repr.api_version {
                        if found != #api_version {
                            return ::std::result::Result::Err(<D::Error as #rt::serde::de::Error>::custom(
                                ::std::format!("apiVersion {:?} is not {:?}, the apiVersion of {}", found, #api_version, #kind),
                            ));
                        }
                    }
                    if let ::std::option::Option::Some(found) = &repr.kind {
                        if found != #kind {
                            return ::std::result::Result::Err(<D::Error as #rt::serde::de::Error>::custom(
                                ::std::format!("kind {:?} is not {:?}", found, #kind),
                            ));
                        }
                    }
                    ::std::result::Result::Ok(#ident { metadata: repr.metadata, #spec_move #status_move })
                }
            }
        };
    }
}
