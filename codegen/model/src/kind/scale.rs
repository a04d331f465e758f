//! `scale(...)`: the scale subresource.

use std::collections::BTreeSet;

use proc_macro2::TokenStream;
use quote::quote;
use syn::meta::ParseNestedMeta;

use super::marker::{KindContext, Marker, check_json_path};
use crate::attr::{given_once, key_of, string_value, unreachable_key};

/// `scale(spec_replicas = .., status_replicas = .., label_selector = ..)` in
/// `#[kind]`: the scale subresource (kubebuilder's `+kubebuilder:subresource:scale`),
/// through which `kubectl scale` and autoscalers set replicas.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Scale {
    /// The desired replicas, under `.spec`.
    pub spec_replicas: String,
    /// The observed replicas, under `.status`.
    pub status_replicas: String,
    /// A label selector in string form, under `.spec` or `.status`.
    pub label_selector: Option<String>,
}

const KEYS: [&str; 3] = ["spec_replicas", "status_replicas", "label_selector"];

impl Marker for Scale {
    const KEYS: &'static [&'static str] = &["scale"];

    fn parse(meta: &ParseNestedMeta<'_>) -> syn::Result<Self> {
        let (mut spec, mut status, mut selector) = (None, None, None);
        let mut given = BTreeSet::new();
        meta.parse_nested_meta(|inner| {
            let key = key_of(&inner, "scale(...) of #[kind]", &KEYS)?;
            given_once(&inner, &key, "scale(...) of #[kind]", &mut given)?;
            let value = string_value(&inner)?;
            match key.as_str() {
                "spec_replicas" => spec = Some(value),
                "status_replicas" => status = Some(value),
                "label_selector" => selector = Some(value),
                _ => unreachable_key(&inner)?,
            }
            Ok(())
        })?;
        let missing = |what: &str, example: &str| {
            meta.error(format!(
                "scale(...) is missing `{what}`; add `{what} = {example}`"
            ))
        };
        let spec = spec.ok_or_else(|| missing("spec_replicas", "\".spec.replicas\""))?;
        let status = status.ok_or_else(|| missing("status_replicas", "\".status.replicas\""))?;
        check_json_path(&spec, ".spec.", "the spec")?;
        check_json_path(&status, ".status.", "the status")?;
        if let Some(selector) = &selector
            && !selector.value().starts_with(".status.")
        {
            check_json_path(selector, ".spec.", "the spec or the status")?;
        }
        Ok(Scale {
            spec_replicas: spec.value(),
            status_replicas: status.value(),
            label_selector: selector.map(|s| s.value()),
        })
    }

    fn check(&self, kind: &KindContext<'_>) -> Vec<String> {
        if kind.has_status != Some(false) {
            return Vec::new();
        }
        vec![format!(
            "scale(...) on `{}` reads replicas from the status, but the kind has no `status` field; \
             add `pub status: Option<...>` with the replicas field",
            kind.ident
        )]
    }

    fn crd_marker(&self) -> Option<TokenStream> {
        let (spec, status) = (&self.spec_replicas, &self.status_replicas);
        let selector = self.label_selector.as_deref().unwrap_or_default();
        Some(quote! {
            ::kinject_types::CrdMarker::Scale(::kinject_types::ScalePaths {
                spec_replicas: #spec, status_replicas: #status, label_selector: #selector,
            })
        })
    }
}
