//! A CustomResourceDefinition checked as kube-apiserver checks one, without a
//! server.

use serde_json::Value;

use crate::errors::ErrorStatus;
use crate::{object_meta, registry};

/// The annotation client-side `kubectl apply` keeps the applied object in.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Checks a CustomResourceDefinition as kube-apiserver checks one that plain
/// `kubectl apply` sends, without a server: its metadata, names, versions and
/// structural schemas as on create, with the copy of the whole CRD that
/// client-side apply keeps in an annotation. A generator calls this to refuse
/// to write a CRD that would fail at apply time; `Err` is the Status a real
/// API server would answer.
pub fn check_custom_resource_definition(crd: &Value) -> Result<(), ErrorStatus> {
    let name = crd
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut meta = crd
        .get("metadata")
        .cloned()
        .unwrap_or_else(|| Value::Object(Default::default()));
    if let Some(meta) = meta.as_object_mut() {
        let annotations = meta
            .entry("annotations")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(annotations) = annotations.as_object_mut() {
            // kubectl stores the object as compact JSON plus a newline.
            annotations.insert(LAST_APPLIED.to_owned(), Value::from(format!("{crd}\n")));
        }
    }
    let mut errors = Vec::new();
    object_meta::validation::check_meta(&meta, object_meta::validation::NameRule::Subdomain, &mut errors);
    if !errors.is_empty() {
        return Err(ErrorStatus::invalid(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            name,
            errors,
        ));
    }
    registry::crd::validate(crd, name)
}
