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
fn manifest(
    definition: &KindDefinition,
    kept: &serde_json::Value,
    webhook: Option<&WebhookService>,
) -> Result<String, String> {
    let definition = &with_conversion(definition, webhook)?;
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

/// The CRD of `definition` with its conversion through `webhook` when the
/// kind has a hub: the conversion is part of what the API server checks.
fn with_conversion<'a>(
    definition: &'a KindDefinition,
    webhook: Option<&WebhookService>,
) -> Result<std::borrow::Cow<'a, KindDefinition>, String> {
    let (Some(_), Some(webhook)) = (&definition.hub, webhook) else {
        return Ok(std::borrow::Cow::Borrowed(definition));
    };
    let mut converted = definition.clone();
    converted.crd.spec.conversion = Some(
        serde_json::from_value(webhook.conversion())
            .map_err(|e| format!("cannot write the conversion of {}: {e}", definition.kind))?,
    );
    Ok(std::borrow::Cow::Owned(converted))
}

/// The kind's CRD as `update-crds` writes it into `dir` (without the kept
/// labels and annotations): with the conversion through the webhook Service
/// among the manifests of `dir` when the kind has a hub.
pub(crate) fn crd_for(definition: &KindDefinition, dir: &Path) -> Result<serde_json::Value, String> {
    let webhook = match definition.hub {
        Some(_) => Some(WebhookService::find(dir)?),
        None => None,
    };
    checked_crd(with_conversion(definition, webhook.as_ref())?.as_ref())
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

/// The Service the conversion webhook is reached at, as the manifests in
/// `config/` declare it.
#[derive(Debug)]
struct WebhookService {
    name: String,
    namespace: String,
}

/// The name of the webhook's Service (`kinject_webhook::Options`' default).
const WEBHOOK_SERVICE: &str = "webhook";

impl WebhookService {
    /// The Service named `webhook` among the manifests of `dir`.
    fn find(dir: &Path) -> Result<WebhookService, String> {
        let files = kinject_testenv::manifest_files(dir)
            .map_err(|e| format!("{}: cannot read: {e}", dir.display()))?;
        for file in files {
            let Ok(text) = std::fs::read_to_string(&file) else {
                continue;
            };
            let Ok(documents) = kinject_testenv::yaml_documents(&file.display().to_string(), &text) else {
                continue;
            };
            for (_, doc) in documents {
                let field = |pointer: &str| doc.pointer(pointer).and_then(serde_json::Value::as_str);
                if field("/kind") == Some("Service") && field("/metadata/name") == Some(WEBHOOK_SERVICE) {
                    return Ok(WebhookService {
                        name: WEBHOOK_SERVICE.to_owned(),
                        namespace: field("/metadata/namespace").unwrap_or("default").to_owned(),
                    });
                }
            }
        }
        Err(format!(
            "{}: no Service named {WEBHOOK_SERVICE:?}, which the CRD of a kind with a hub names as its \
             conversion webhook; add the webhook's Service (`kinject init` writes config/400-webhook-service.yaml)",
            dir.display()
        ))
    }

    /// The CRD's conversion through this Service. The webhook writes the
    /// `caBundle` once it has made its certificates.
    fn conversion(&self) -> serde_json::Value {
        serde_json::json!({
            "strategy": "Webhook",
            "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": {"service": {
                    "name": self.name,
                    "namespace": self.namespace,
                    "path": kinject_types::conversion::WEBHOOK_PATH,
                    "port": 443,
                }},
            },
        })
    }
}

/// `<dir>/300-<kind>.yaml`.
fn manifest_path(dir: &Path, definition: &KindDefinition) -> PathBuf {
    dir.join(format!("300-{}.yaml", definition.kind.to_lowercase()))
}

pub(crate) fn update_crds(definitions: &[KindDefinition], dir: &Path, verify: bool) -> ExitCode {
    let mut stale = Vec::new();
    let webhook = if definitions.iter().any(|d| d.hub.is_some()) {
        match WebhookService::find(dir) {
            Ok(service) => Some(service),
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        None
    };
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
        let updated = match manifest(kind, &keep, webhook.as_ref()) {
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

    pub mod v1alpha1 {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
        use kinject_macros::Kind;
        use kinject_types::FieldError;
        use kinject_types::conversion::{Convertible, Restored};
        use schemars::JsonSchema;
        use serde::{Deserialize, Serialize};

        #[derive(Kind, Clone, Debug, Default, PartialEq)]
        #[kind(group = "tutorial.example.com", version = "v1alpha1", namespaced)]
        pub struct Widget {
            pub metadata: ObjectMeta,
            pub spec: WidgetSpec,
        }

        #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
        pub struct WidgetSpec {
            pub size: i32,
        }

        impl Convertible for Widget {
            type Hub = super::v1::Widget;

            fn convert_to(self, _: &Restored<super::v1::Widget>) -> Result<super::v1::Widget, FieldError> {
                Ok(super::v1::Widget {
                    metadata: self.metadata,
                    spec: super::v1::WidgetSpec { size: self.spec.size },
                })
            }

            fn convert_from(hub: super::v1::Widget) -> Result<Self, FieldError> {
                Ok(Widget {
                    metadata: hub.metadata,
                    spec: WidgetSpec { size: hub.spec.size },
                })
            }
        }
    }

    pub mod v1 {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
        use kinject_macros::Kind;
        use schemars::JsonSchema;
        use serde::{Deserialize, Serialize};

        #[derive(Kind, Clone, Debug, Default, PartialEq)]
        #[kind(group = "tutorial.example.com", version = "v1", namespaced, hub)]
        pub struct Widget {
            pub metadata: ObjectMeta,
            pub spec: WidgetSpec,
        }

        #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
        pub struct WidgetSpec {
            pub size: i32,
        }
    }

    /// `dump` without a version shows the stored one: the hub, when no
    /// version says `storage`.
    #[test]
    fn a_kind_with_a_hub_dumps_the_hub_by_default() {
        let kinds = [
            CustomKind::of::<v1::Widget>(),
            CustomKind::of::<v1alpha1::Widget>().converted::<v1alpha1::Widget>(),
        ];
        let found = crate::cli::find_version(&kinds, "Widget", None).unwrap();
        assert_eq!(found.version, "v1");
        let found = crate::cli::find_version(&kinds, "Widget", Some("v1alpha1")).unwrap();
        assert_eq!(found.version, "v1alpha1");
        let error = crate::cli::find_version(&kinds, "Widget", Some("v2")).unwrap_err();
        assert_eq!(error, "Widget has no version v2; its versions are [v1, v1alpha1]");
    }

    /// The CRD of a kind with a hub names the webhook Service of the
    /// manifests as its conversion; without that Service it is an error that
    /// says what to add.
    #[test]
    fn a_kind_with_a_hub_converts_through_the_manifests_webhook_service() {
        let definitions = custom_resource_definitions(&[
            CustomKind::of::<v1::Widget>(),
            CustomKind::of::<v1alpha1::Widget>().converted::<v1alpha1::Widget>(),
        ])
        .unwrap_or_default();
        let dir = std::env::temp_dir().join(format!("kinject-schema-conversion-{}", std::process::id()));
        let _fresh = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_default();
        assert_eq!(
            super::update_crds(&definitions, &dir, false),
            std::process::ExitCode::FAILURE
        );
        assert!(
            !dir.join("300-widget.yaml").exists(),
            "nothing written without the Service"
        );

        let service = "apiVersion: v1\nkind: Service\nmetadata:\n  name: webhook\n  namespace: tutorial-system\n\
                       spec:\n  ports:\n    - port: 443\n";
        std::fs::write(dir.join("400-webhook-service.yaml"), service).unwrap_or_default();
        assert_eq!(
            super::update_crds(&definitions, &dir, false),
            std::process::ExitCode::SUCCESS
        );
        let written = std::fs::read_to_string(dir.join("300-widget.yaml")).unwrap_or_default();
        let crd: serde_json::Value = serde_saphyr::from_str(&written).unwrap_or_default();
        assert_eq!(
            crd["spec"]["conversion"],
            serde_json::json!({"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"],
                "clientConfig": {"service": {"name": "webhook", "namespace": "tutorial-system",
                    "path": "/resource-conversion", "port": 443}}}})
        );
        assert_eq!(
            super::update_crds(&definitions, &dir, true),
            std::process::ExitCode::SUCCESS,
            "up to date"
        );
        // `schema crd` prints the same conversion; the spoke's CRD is the hub's.
        let printed = super::crd_for(&definitions[0], &dir).unwrap_or_default();
        assert_eq!(printed["spec"]["conversion"], crd["spec"]["conversion"]);
        let _cleaned = std::fs::remove_dir_all(&dir);
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
