//! `#[derive(Kind)]`: makes a Knative-shaped API type a Kubernetes kind, with
//! its CRD, from marker attributes.
//!
//! # Where it stands
//!
//! This is the compile-time end of kinject's code generation. It reads a
//! struct's markers through `kinject-model`, the one marker parser (the
//! generator, `kinject-codegen`, uses the same), and depends on nothing else
//! but `syn`, `quote` and `proc-macro2`: no Kubernetes, formatting or I/O
//! crates, so a crate of API types builds it quickly (kinject-types' layering
//! test holds it to that). The code it expands to names only
//! `kinject-types`, which re-exports what that code needs (k8s-openapi,
//! kube-core, serde, schemars), so an API crate depends on `kinject-types`,
//! this crate and `serde`.
//!
//! What a kind looks like (the same example runs in `kinject-types`' crate
//! docs: a proc-macro crate's own doctests would build kube and k8s-openapi a
//! second time, for the host):
//!
//! ```ignore
//! # use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
//! # use kinject_macros::Kind;
//! # #[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
//! # pub struct AddressableServiceSpec { pub service_name: String }
//! # #[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
//! # pub struct AddressableServiceStatus {}
//! #[derive(Kind, Clone, Debug, PartialEq)]
//! #[kind(group = "samples.knative.dev", version = "v1alpha1", namespaced,
//!        shortnames = ["asvc"], categories = ["all", "knative"])]
//! #[genclient]
//! #[genreconciler(krshapedlogic = false)]
//! pub struct AddressableService {
//!     pub metadata: ObjectMeta,
//!     pub spec: AddressableServiceSpec,
//!     pub status: Option<AddressableServiceStatus>,
//! }
//!
//! use kinject_types::KindInfo;
//! use kube::Resource;
//! assert_eq!(AddressableService::plural(&()), "addressableservices");
//! assert_eq!(AddressableService::SHORT_NAMES, ["asvc"]);
//! let asvc = AddressableService::new("rut", AddressableServiceSpec::default());
//! assert_eq!(serde_json::to_value(&asvc).unwrap()["kind"], "AddressableService");
//!
//! // The markers, folded over the kind's identity and schema, make its CRD.
//! let crd = kinject_types::crd::custom_resource_definition::<AddressableService>().unwrap();
//! assert_eq!(crd.metadata.name.as_deref(), Some("addressableservices.samples.knative.dev"));
//! assert_eq!(crd.spec.names.categories, Some(vec!["all".to_owned(), "knative".to_owned()]));
//! assert!(crd.spec.versions[0].subresources.as_ref().is_some_and(|s| s.status.is_some()));
//! ```
//!
//! # What it writes
//!
//! The struct has `metadata`, optionally `spec` (whose type implements `Default`)
//! and optionally `status: Option<S>`. The derive implements `kube::Resource`
//! (from the identity markers: group, version, plural, scope),
//! `kinject_types::KindInfo` (every marker that shapes the CRD, as a
//! `kinject_types::CrdMarker` value), `kinject_types::HasStatus` (with a status),
//! `serde::Serialize` and `Deserialize` (writing `apiVersion` and `kind`, checking
//! them when read), `schemars::JsonSchema` in Knative's shape (`spec` and
//! `status` only), and a constructor `new(name, spec)`. `#[genclient]` and
//! `#[genreconciler]` are read by the generator; the derive checks them so
//! that a bad marker fails the build.
//!
//! See `kinject_model`'s documentation for every key and how a marker is
//! added.

use kinject_model::{KindModel, Scope};
use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;
use quote::quote;
use syn::{Data, DeriveInput, Fields, Type, parse_macro_input};

/// Derives the traits that make a struct a Kubernetes kind; see the crate docs.
#[proc_macro_derive(Kind, attributes(kind, genclient, genreconciler))]
pub fn derive_kind(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand(&input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

fn expand(input: &DeriveInput) -> syn::Result<TokenStream2> {
    if !input.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(
            &input.generics,
            "Kind cannot be derived for a generic struct; give the kind concrete field types",
        ));
    }
    let model = KindModel::from_derive_input(input)?;
    let metadata_ty = field_type(input, "metadata").ok_or_else(|| {
        syn::Error::new(
            input.ident.span(),
            "`metadata` field not found; add `pub metadata: ObjectMeta`",
        )
    })?;
    let resource = expand_resource(&model, &metadata_ty);
    let has_status = expand_has_status(&model);
    let constructor = expand_constructor(&model, &metadata_ty);
    let serde = expand_serde(&model, &metadata_ty);
    let schema = expand_schema(input, &model);
    Ok(quote! {
        #resource
        #has_status
        #constructor
        #serde
        #schema
    })
}

/// `kube::Resource` from the identity markers, and `KindInfo` with every
/// marker the CRD takes.
fn expand_resource(model: &KindModel, metadata_ty: &Type) -> TokenStream2 {
    let rt = quote!(::kinject_types::__private);
    let ident = &model.ident;
    let kind = model.kind();
    let group = model.group();
    let version = model.version();
    let api_version = model.api_version();
    let plural = model.plural();
    let markers = model.crd_markers();
    let scope = match model.scope() {
        Scope::Namespaced => quote!(#rt::k8s_openapi::NamespaceResourceScope),
        Scope::Cluster => quote!(#rt::k8s_openapi::ClusterResourceScope),
    };
    quote! {
        impl #rt::kube::Resource for #ident {
            type DynamicType = ();
            type Scope = #scope;

            fn kind(_: &()) -> ::std::borrow::Cow<'_, str> { ::std::borrow::Cow::Borrowed(#kind) }
            fn group(_: &()) -> ::std::borrow::Cow<'_, str> { ::std::borrow::Cow::Borrowed(#group) }
            fn version(_: &()) -> ::std::borrow::Cow<'_, str> { ::std::borrow::Cow::Borrowed(#version) }
            fn api_version(_: &()) -> ::std::borrow::Cow<'_, str> { ::std::borrow::Cow::Borrowed(#api_version) }
            fn plural(_: &()) -> ::std::borrow::Cow<'_, str> { ::std::borrow::Cow::Borrowed(#plural) }
            fn meta(&self) -> &#metadata_ty { &self.metadata }
            fn meta_mut(&mut self) -> &mut #metadata_ty { &mut self.metadata }
        }

        impl ::kinject_types::KindInfo for #ident {
            const MARKERS: &'static [::kinject_types::CrdMarker] = &[#(#markers),*];
        }
    }
}

/// `HasStatus`, for a kind with a `status` field.
fn expand_has_status(model: &KindModel) -> Option<TokenStream2> {
    let ident = &model.ident;
    let status_ty = model.status.as_ref()?;
    Some(quote! {
        impl ::kinject_types::HasStatus for #ident {
            type Status = #status_ty;
            fn status(&self) -> ::std::option::Option<&#status_ty> { self.status.as_ref() }
            fn status_mut(&mut self) -> &mut #status_ty {
                self.status.get_or_insert_with(::std::default::Default::default)
            }
        }
    })
}

/// `Kind::new(name, spec)`.
fn expand_constructor(model: &KindModel, metadata_ty: &Type) -> TokenStream2 {
    let ident = &model.ident;
    let (spec_param, spec_field) = match &model.spec {
        Some(spec_ty) => (quote!(, spec: #spec_ty), quote!(spec,)),
        None => (quote!(), quote!()),
    };
    let status_field = model
        .status
        .as_ref()
        .map(|_| quote!(status: ::std::option::Option::None,));
    let doc = format!(
        "A `{}` named `name`, with no namespace and no status.",
        model.kind()
    );
    quote! {
        impl #ident {
            #[doc = #doc]
            pub fn new(name: &str #spec_param) -> Self {
                Self {
                    metadata: #metadata_ty {
                        name: ::std::option::Option::Some(name.to_owned()),
                        ..::std::default::Default::default()
                    },
                    #spec_field
                    #status_field
                }
            }
        }
    }
}

fn field_type(input: &DeriveInput, name: &str) -> Option<Type> {
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

fn field_docs(input: &DeriveInput, name: &str) -> Option<String> {
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

/// `Serialize` and `Deserialize`: `apiVersion` and `kind` written, and
/// checked when read.
fn expand_serde(model: &KindModel, metadata_ty: &Type) -> TokenStream2 {
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

/// Knative's schema of a kind: an object with `spec` and `status` only; the API
/// server always keeps `apiVersion`, `kind` and `metadata`.
fn expand_schema(input: &DeriveInput, model: &KindModel) -> TokenStream2 {
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
