//! The CRD manifests in `config/`: each kind's whole CRD, checked as the API
//! server would, with the labels and annotations written there kept.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use kinject_types::registry::KindDefinition;

use crate::yaml;

/// A kind's manifest: a comment saying where it comes from, then the whole
/// CRD built from the kind's markers, with the `labels` and `annotations` of
/// `metadata` as written there before (for a new kind, the labels of the CRD
/// manifests already there, so selectors over them, a release label or an
/// install label, find the new one too).
fn manifest(definition: &KindDefinition, kept: &serde_json::Value) -> Result<String, String> {
    let mut crd = checked_crd(definition)?;
    for key in ["labels", "annotations"] {
        if let Some(value) = kept.get(key) {
            crd["metadata"][key] = value.clone();
        }
    }
    Ok(format!(
        "# The CRD of {kind} ({plural}.{group}), generated from its Rust type\n\
         # and #[kind] markers by hack/update-codegen.sh; print it with\n\
         # `cargo run -p schema -- crd {kind}`. Change the type or its markers, not this\n\
         # file: only metadata.labels and metadata.annotations are kept as written.\n{yaml}",
        plural = definition.crd.spec.names.plural,
        group = definition.crd.spec.group,
        kind = definition.kind,
        yaml = yaml::to_yaml(&crd)
    ))
}

/// The kind's CRD, checked as kube-apiserver would check it when plain
/// `kubectl apply` sends it, so a CRD the API server refuses is an error here,
/// naming the type, not a surprise at apply time.
pub(crate) fn checked_crd(definition: &KindDefinition) -> Result<serde_json::Value, String> {
    let places: Vec<&str> = definition
        .defined_at
        .iter()
        .map(String::as_str)
        .filter(|at| !at.is_empty())
        .collect();
    let at = if places.is_empty() {
        String::new()
    } else {
        format!("{}: ", places.join(", "))
    };
    let crd = serde_json::to_value(&definition.crd)
        .map_err(|e| format!("{at}cannot encode the CRD of {}: {e}", definition.kind))?;
    kinject_testenv::check_custom_resource_definition(&crd).map_err(|status| {
        let at_markers = refused_rules(definition, &crd, &status.causes);
        if !at_markers.is_empty() {
            return at_markers.join("\n");
        }
        let hint = if status.message.contains("metadata.annotations: Too long") {
            "; plain `kubectl apply` keeps a copy of the whole CRD in an annotation: cap the \
             descriptions with #[kind(max_description_len = 0)] (or a few hundred), or apply \
             with `kubectl apply --server-side`"
        } else {
            "; change the type or its #[kind] markers so the schema is structural (every field \
             has a type; use `#[schemars(...)]` to describe fields schemars cannot)"
        };
        format!(
            "{at}the CRD of {} would be refused by the API server: {}{hint}",
            definition.kind, status.message
        )
    })?;
    Ok(crd)
}

/// When any cause points into a rule written with `#[rule]`: every cause,
/// each led by the `file:line` of its marker (or of the type, for the
/// others), so the error leads to the line to fix.
fn refused_rules(
    definition: &KindDefinition,
    crd: &serde_json::Value,
    causes: &[kinject_testenv::StatusCause],
) -> Vec<String> {
    let marker_of = |field: &str| {
        let rest = field.strip_prefix("spec.versions[")?;
        let (index, rest) = rest.split_once(']')?;
        let in_schema = rest.strip_prefix(".schema.openAPIV3Schema.")?;
        let version = crd
            .pointer(&format!("/spec/versions/{index}/name"))
            .and_then(serde_json::Value::as_str)?;
        let (_, sites) = definition.rule_sites.iter().find(|(name, _)| name == version)?;
        let site = sites.iter().find(|site| {
            in_schema
                .strip_prefix(site.path.as_str())
                .is_some_and(|after| after.is_empty() || after.starts_with('.'))
        })?;
        Some((site.defined_at.clone(), version.to_owned()))
    };
    if !causes.iter().any(|cause| marker_of(&cause.field).is_some()) {
        return Vec::new();
    }
    let type_at = definition.defined_at.join(", ");
    causes
        .iter()
        .map(|cause| match marker_of(&cause.field) {
            Some((place, version)) => format!(
                "{place}: the API server would refuse this #[rule] of {} {version}: {}: {}",
                definition.kind, cause.field, cause.message
            ),
            None => format!(
                "{type_at}: the API server would refuse the CRD of {}: {}: {}",
                definition.kind, cause.field, cause.message
            ),
        })
        .collect()
}

/// The `labels` and `annotations` of a manifest's metadata, as an object.
fn kept_metadata(text: &str) -> Result<serde_json::Value, String> {
    let manifest: serde_json::Value = serde_saphyr::from_str(text)
        .map_err(|e| format!("is not valid YAML: {e}; fix it or delete the file to have it written anew"))?;
    let mut kept = serde_json::Map::new();
    for key in ["labels", "annotations"] {
        if let Some(value) = manifest
            .pointer(&format!("/metadata/{key}"))
            .filter(|v| !v.is_null())
        {
            kept.insert(key.to_owned(), value.clone());
        }
    }
    Ok(serde_json::Value::Object(kept))
}

/// `<dir>/300-<kind>.yaml`.
fn manifest_path(dir: &Path, definition: &KindDefinition) -> PathBuf {
    dir.join(format!("300-{}.yaml", definition.kind.to_lowercase()))
}

pub(crate) fn update_crds(definitions: &[KindDefinition], dir: &Path, verify: bool) -> ExitCode {
    let mut stale = Vec::new();
    let sibling_labels = definitions.iter().find_map(|kind| {
        let text = std::fs::read_to_string(manifest_path(dir, kind)).ok()?;
        let labels = kept_metadata(&text).ok()?.get("labels")?.clone();
        Some(serde_json::json!({ "labels": labels }))
    });
    for kind in definitions {
        let path = manifest_path(dir, kind);
        let (kept, why) = match std::fs::read_to_string(&path) {
            Ok(text) => match kept_metadata(&text) {
                Ok(kept) => (Some((text, kept)), "differs from the kind and its markers"),
                Err(e) => {
                    eprintln!("error: {}: {e}", path.display());
                    return ExitCode::FAILURE;
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (None, "missing"),
            Err(e) => {
                eprintln!(
                    "error: {}: cannot read the CRD manifest of {}: {e}",
                    path.display(),
                    kind.kind
                );
                return ExitCode::FAILURE;
            }
        };
        let keep = kept
            .as_ref()
            .map(|(_, kept)| kept.clone())
            .or_else(|| sibling_labels.clone())
            .unwrap_or_default();
        let updated = match manifest(kind, &keep) {
            Ok(text) => text,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        };
        if kept.as_ref().is_some_and(|(text, _)| *text == updated) {
            continue;
        }
        if verify {
            stale.push((path, why));
        } else if let Err(e) = std::fs::write(&path, updated) {
            eprintln!("error: {}: cannot write: {e}", path.display());
            return ExitCode::FAILURE;
        } else {
            eprintln!("wrote {}", path.display());
        }
    }
    if stale.is_empty() {
        return ExitCode::SUCCESS;
    }
    eprintln!("error: CRD manifests are out of date:");
    for (path, why) in &stale {
        eprintln!("  {} ({why})", path.display());
    }
    eprintln!("run `hack/update-codegen.sh` and commit the result");
    ExitCode::FAILURE
}

#[cfg(test)]
#[allow(unreachable_pub, reason = "a kind must be pub")]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use kinject_macros::{Kind, rules};
    use kinject_types::registry::{CustomKind, custom_resource_definitions};
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    #[rules]
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    #[rule("self.replicas <= self.maxReplicas", message = "too many")]
    pub struct GadgetSpec {
        pub replicas: i32,
        #[rule("self.all(a, self.all(b, a != b))")]
        pub names: Vec<String>,
    }

    #[derive(Kind, Clone, Debug, Default, PartialEq)]
    #[kind(group = "tutorial.example.com", version = "v1", namespaced)]
    pub struct Gadget {
        pub metadata: ObjectMeta,
        pub spec: GadgetSpec,
    }

    #[test]
    fn a_rule_the_api_server_would_refuse_names_its_marker() {
        let definitions = custom_resource_definitions(&[CustomKind::of::<Gadget>()]).unwrap_or_default();
        let Err(error) = super::checked_crd(&definitions[0]) else {
            unreachable!("the CRD has two bad rules");
        };
        let source = include_str!("manifests.rs");
        let line_of = |needle: &str| {
            source
                .lines()
                .position(|l| l.contains(needle))
                .unwrap_or_default()
                + 1
        };
        let lines: Vec<&str> = error.lines().filter(|l| l.starts_with("pkg/schema")).collect();
        assert_eq!(lines.len(), 2, "{error}");
        let undefined = format!(
            "pkg/schema/src/manifests.rs:{}: the API server would refuse this #[rule] of Gadget v1: \
             spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value:",
            line_of("#[rule(\"self.replicas")
        );
        assert!(error.starts_with(&undefined), "{error}");
        assert!(error.contains("undefined field 'maxReplicas'"), "{error}");
        let costly = lines
            .iter()
            .find(|l| l.contains("Forbidden"))
            .copied()
            .unwrap_or_default();
        assert!(
            costly.starts_with(&format!(
                "pkg/schema/src/manifests.rs:{}:",
                line_of("#[rule(\"self.all(a")
            )),
            "{error}"
        );
        assert!(
            costly.contains("estimated rule cost exceeds budget by factor of more than 100x"),
            "{costly}"
        );
    }
}
