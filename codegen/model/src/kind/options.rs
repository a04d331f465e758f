//! Markers for the CRD as a whole: how long its descriptions may be, and
//! which of a kind's versions the API server stores and which converts for
//! the others.

use proc_macro2::TokenStream;
use quote::quote;
use syn::meta::ParseNestedMeta;

use super::marker::Marker;
use crate::attr::flag;

/// `max_description_len = 120`: descriptions in the CRD's schema are cut to
/// this many bytes (0 drops them; controller-gen's `maxDescLen`), for kinds
/// that embed big Kubernetes types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaxDescriptionLen(pub usize);

impl Marker for MaxDescriptionLen {
    const KEYS: &'static [&'static str] = &["max_description_len"];

    fn parse(meta: &ParseNestedMeta<'_>) -> syn::Result<Self> {
        let value: syn::LitInt = meta.value()?.parse().map_err(|e| {
            syn::Error::new(
                e.span(),
                "`max_description_len` takes a whole number of bytes, e.g. max_description_len = 0",
            )
        })?;
        let bytes = value.base10_parse::<usize>().map_err(|_| {
            syn::Error::new(
                value.span(),
                "`max_description_len` must be a whole number of bytes, 0 or more",
            )
        })?;
        Ok(MaxDescriptionLen(bytes))
    }

    fn crd_marker(&self) -> Option<TokenStream> {
        let bytes = self.0;
        Some(quote!(::kinject_types::CrdMarker::MaxDescriptionLen(#bytes)))
    }
}

/// `storage`: of the kind's versions, this one is what the API server stores
/// (needed when there are several).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Storage;

impl Marker for Storage {
    const KEYS: &'static [&'static str] = &["storage"];

    fn parse(meta: &ParseNestedMeta<'_>) -> syn::Result<Self> {
        flag(meta)?;
        Ok(Storage)
    }

    fn crd_marker(&self) -> Option<TokenStream> {
        Some(quote!(::kinject_types::CrdMarker::Storage))
    }
}

/// `hub`: of the kind's versions, the one every other converts to and from
/// (`kinject_types::conversion`); the stored version unless another says
/// `storage`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hub;

impl Marker for Hub {
    const KEYS: &'static [&'static str] = &["hub"];

    fn parse(meta: &ParseNestedMeta<'_>) -> syn::Result<Self> {
        flag(meta)?;
        Ok(Hub)
    }

    fn crd_marker(&self) -> Option<TokenStream> {
        Some(quote!(::kinject_types::CrdMarker::Hub))
    }
}
