//! How kubectl finds a kind besides its names: short names and categories.

use proc_macro2::TokenStream;
use quote::quote;
use syn::meta::ParseNestedMeta;

use super::marker::{KindContext, Marker, not_a_label};
use crate::attr::string_list;

/// `shortnames = ["asvc"]`: names `kubectl get` accepts for the kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShortNames(pub Vec<String>);

impl Marker for ShortNames {
    const KEYS: &'static [&'static str] = &["shortnames"];

    fn parse(meta: &ParseNestedMeta<'_>) -> syn::Result<Self> {
        Ok(ShortNames(string_list(meta)?))
    }

    fn check(&self, _: &KindContext<'_>) -> Vec<String> {
        self.0
            .iter()
            .filter_map(|name| not_a_label("short name", name))
            .collect()
    }

    fn crd_marker(&self) -> Option<TokenStream> {
        let names = &self.0;
        Some(quote!(::kinject_types::CrdMarker::ShortNames(&[#(#names),*])))
    }
}

/// `categories = ["all", "knative"]`: groups of kinds `kubectl get <category>`
/// lists together.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Categories(pub Vec<String>);

impl Marker for Categories {
    const KEYS: &'static [&'static str] = &["categories"];

    fn parse(meta: &ParseNestedMeta<'_>) -> syn::Result<Self> {
        Ok(Categories(string_list(meta)?))
    }

    fn check(&self, _: &KindContext<'_>) -> Vec<String> {
        self.0
            .iter()
            .filter_map(|name| not_a_label("category", name))
            .collect()
    }

    fn crd_marker(&self) -> Option<TokenStream> {
        let categories = &self.0;
        Some(quote!(::kinject_types::CrdMarker::Categories(&[#(#categories),*])))
    }
}
