//! `#[derive(Kind)]`: the model of the struct and its markers, and every
//! impl the derive writes from it.

use kinject_model::{KindModel, Scope};
use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;
use quote::quote;
use syn::{DeriveInput, Type, parse_macro_input};

use crate::fields::field_type;
use crate::schema::expand_schema;
use crate::serde_impls::expand_serde;

/// The derive's expansion of `input`, or the compile errors that say what to fix.
pub(crate) fn derive(input: TokenStream) -> TokenStream {
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
    let schema = expand_schema(input, &model)?;
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
    let hub = model
        .hub()
        .then(|| quote!(impl ::kinject_types::conversion::Hub for #ident {}));
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

        #hub
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
