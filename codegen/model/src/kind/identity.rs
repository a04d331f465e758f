//! Who a kind is: its API group and version, its resource names and its
//! scope.

use kinject_types::validation::{is_dns1123_subdomain, is_kube_version};
use proc_macro2::{Ident, TokenStream};
use quote::quote;
use syn::meta::ParseNestedMeta;

use super::marker::{Absent, KindContext, Marker, not_a_label};
use crate::attr::{flag, string_value};

/// `group = "samples.knative.dev"`: the API group (required).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group(pub String);

impl Marker for Group {
    const KEYS: &'static [&'static str] = &["group"];

    fn parse(meta: &ParseNestedMeta<'_>) -> syn::Result<Self> {
        Ok(Group(string_value(meta)?.value()))
    }

    fn absent(_: &Ident) -> Absent<Self> {
        Absent::Required(
            "#[kind(...)] is missing `group`; add `group = \"<api group>\"`, e.g. `group = \"samples.knative.dev\"`",
        )
    }

    fn check(&self, _: &KindContext<'_>) -> Vec<String> {
        let group = &self.0;
        (!is_dns1123_subdomain(group).is_empty())
            .then(|| {
                format!(
                    "group {group:?} is not a DNS subdomain; use lower-case words joined by dots, e.g. \"samples.knative.dev\""
                )
            })
            .into_iter()
            .collect()
    }
}

/// `version = "v1alpha1"`: the API version (required).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Version(pub String);

impl Marker for Version {
    const KEYS: &'static [&'static str] = &["version"];

    fn parse(meta: &ParseNestedMeta<'_>) -> syn::Result<Self> {
        Ok(Version(string_value(meta)?.value()))
    }

    fn absent(_: &Ident) -> Absent<Self> {
        Absent::Required(
            "#[kind(...)] is missing `version`; add `version = \"<version>\"`, e.g. `version = \"v1alpha1\"`",
        )
    }

    fn check(&self, _: &KindContext<'_>) -> Vec<String> {
        let version = &self.0;
        (!is_kube_version(version).is_empty())
            .then(|| {
                format!(
                    "version {version:?} is not a Kubernetes API version; use v<N>, v<N>alpha<M> or v<N>beta<M>, e.g. \"v1alpha1\""
                )
            })
            .into_iter()
            .collect()
    }
}

/// `plural = "addressableservices"`: the resource name; by default the
/// kind's English plural in lower case (see [`pluralize`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plural(pub String);

impl Marker for Plural {
    const KEYS: &'static [&'static str] = &["plural"];

    fn parse(meta: &ParseNestedMeta<'_>) -> syn::Result<Self> {
        Ok(Plural(string_value(meta)?.value()))
    }

    fn absent(kind: &Ident) -> Absent<Self> {
        Absent::Default(Plural(pluralize(&kind.to_string())))
    }

    fn check(&self, _: &KindContext<'_>) -> Vec<String> {
        not_a_label("plural", &self.0).into_iter().collect()
    }
}

/// `singular = "addressableservice"`: the lower-case singular name; by
/// default the kind in lower case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Singular(pub String);

impl Marker for Singular {
    const KEYS: &'static [&'static str] = &["singular"];

    fn parse(meta: &ParseNestedMeta<'_>) -> syn::Result<Self> {
        Ok(Singular(string_value(meta)?.value()))
    }

    fn absent(kind: &Ident) -> Absent<Self> {
        Absent::Default(Singular(kind.to_string().to_lowercase()))
    }

    fn check(&self, _: &KindContext<'_>) -> Vec<String> {
        not_a_label("singular", &self.0).into_iter().collect()
    }

    fn crd_marker(&self) -> Option<TokenStream> {
        let singular = &self.0;
        Some(quote!(::kinject_types::CrdMarker::Singular(#singular)))
    }
}

/// `namespaced` or `cluster_scoped`: whether objects of a kind live in a
/// namespace (required).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Objects live in a namespace.
    Namespaced,
    /// Objects are cluster-wide.
    Cluster,
}

impl Marker for Scope {
    const KEYS: &'static [&'static str] = &["namespaced", "cluster_scoped"];

    fn parse(meta: &ParseNestedMeta<'_>) -> syn::Result<Self> {
        flag(meta)?;
        Ok(if meta.path.is_ident("namespaced") {
            Scope::Namespaced
        } else {
            Scope::Cluster
        })
    }

    fn absent(_: &Ident) -> Absent<Self> {
        Absent::Required("#[kind(...)] does not say the kind's scope; add `namespaced` or `cluster_scoped`")
    }

    fn crd_marker(&self) -> Option<TokenStream> {
        Some(match self {
            Scope::Namespaced => quote!(::kinject_types::CrdMarker::Namespaced),
            Scope::Cluster => quote!(::kinject_types::CrdMarker::ClusterScoped),
        })
    }
}

/// The English plural of a kind, lower-cased, by the rules Kubernetes' generators
/// use (`AddressableService` → `addressableservices`, `Policy` → `policies`).
pub fn pluralize(kind: &str) -> String {
    let singular = kind.to_lowercase();
    if singular == "endpoints" {
        return singular;
    }
    let chars: Vec<char> = singular.chars().collect();
    let n = chars.len();
    if n < 2 {
        return singular;
    }
    let (last, before) = (chars[n - 1], chars[n - 2]);
    let stem: String = chars[..n - 1].iter().collect();
    match last {
        's' | 'x' | 'z' => format!("{singular}es"),
        'y' if !"aeiou".contains(before) => format!("{stem}ies"),
        'h' if before == 'c' || before == 's' => format!("{singular}es"),
        'e' if before == 'f' => format!("{}ves", &singular[..singular.len() - 2]),
        'f' => format!("{stem}ves"),
        _ => format!("{singular}s"),
    }
}
