//! `validate`: manifests checked against the project's CRDs with no cluster,
//! as kube-apiserver would check them on `kubectl apply`: the schema
//! (types, required fields, bounds, enums, formats testenv knows), the CEL
//! rules, and, with `--old`, the transition rules.
//!
//! The manifests are applied, in order, to an in-memory API server (testenv)
//! that serves the project's CRDs, built from its types as `update-crds`
//! writes them: the first of a name is created, a later one of the same
//! name updates it, as `kubectl apply` of the whole list would. With
//! `--old`, the old manifests are stored first as they are (they passed
//! once), so each new one is an update of its old self. A
//! CustomResourceDefinition among the manifests is checked as a CRD.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use kinject_testenv::{Error, TestEnv};
use kinject_types::registry::KindDefinition;
use serde_json::Value;

/// One document of a manifest file.
struct Document {
    /// `config/samples/widget.yaml, document 2`.
    place: String,
    object: Value,
}

/// Checks every manifest of `paths` (files, or directories of `.yaml` and
/// `.yml` files) against `definitions`; prints kube-apiserver's message for
/// each refusal and fails when there is one.
pub(crate) fn validate(
    definitions: &[KindDefinition],
    paths: &[PathBuf],
    old: &[PathBuf],
    skip_unknown: bool,
) -> ExitCode {
    let (documents, old_documents) = match (read_all(paths), read_all(old)) {
        (Ok(documents), Ok(old)) => (documents, old),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let report = match check(definitions, &documents, &old_documents, skip_unknown) {
        Ok(report) => report,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    for line in &report.refused {
        println!("{line}");
    }
    for line in &report.skipped {
        eprintln!("{line}");
    }
    eprintln!(
        "{} of {} objects valid against {} CRDs{}",
        report.valid,
        documents.len(),
        definitions.len(),
        if old_documents.is_empty() {
            String::new()
        } else {
            format!(", as updates of {} old objects", old_documents.len())
        }
    );
    if report.refused.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// What [`check`] found.
#[derive(Debug, Default)]
struct Report {
    valid: usize,
    /// `<place>: <the API server's message>`, one per refused object.
    refused: Vec<String>,
    skipped: Vec<String>,
}

fn check(
    definitions: &[KindDefinition],
    documents: &[Document],
    old_documents: &[Document],
    skip_unknown: bool,
) -> Result<Report, String> {
    let env = TestEnv::new();
    for definition in definitions {
        env.install_crd(&definition.crd)
            .map_err(|e| format!("the CRD of {} does not install: {e}", definition.kind))?;
    }
    let mut report = Report::default();
    for document in old_documents {
        ensure_namespace(&env, &document.object);
        if let Err(e) = env.seed_object(document.object.clone()) {
            report.refused.push(format!(
                "{}: the old object cannot be stored: {e}",
                document.place
            ));
        }
    }
    for document in documents {
        match apply(&env, &document.object) {
            Ok(()) => report.valid += 1,
            Err(Error::Api(status)) if status.code == 404 && skip_unknown => {
                report
                    .skipped
                    .push(format!("{}: skipped: {}", document.place, status.message));
            }
            Err(Error::Api(status)) => report
                .refused
                .push(format!("{}: {}", document.place, status.message)),
            Err(e) => report.refused.push(format!("{}: {e}", document.place)),
        }
    }
    Ok(report)
}

/// Creates the object, or updates the one stored under its name.
fn apply(env: &TestEnv, object: &Value) -> Result<(), Error> {
    if object.get("kind").and_then(Value::as_str) == Some("CustomResourceDefinition") {
        return kinject_testenv::check_custom_resource_definition(object).map_err(Error::Api);
    }
    ensure_namespace(env, object);
    let Some(resource) = env.resource_for_kind(
        object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default(),
        object.get("kind").and_then(Value::as_str).unwrap_or_default(),
    ) else {
        return Err(Error::Api(kinject_testenv::ErrorStatus::new(
            404,
            "NotFound",
            format!(
                "no kind {:?} in {:?}: it is neither a CRD of this project nor a Kubernetes kind \
                 (--skip-unknown skips such objects)",
                object.get("kind").and_then(Value::as_str).unwrap_or_default(),
                object
                    .get("apiVersion")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
            ),
        )));
    };
    let name = object.pointer("/metadata/name").and_then(Value::as_str);
    let namespace = object.pointer("/metadata/namespace").and_then(Value::as_str);
    let (group, version) = split_api_version(object);
    // A namespaced object without a namespace goes to `default`.
    let stored = name.and_then(|name| {
        env.get_object(group, version, &resource, namespace, name)
            .or_else(|| env.get_object(group, version, &resource, namespace.or(Some("default")), name))
    });
    match stored {
        None => env.create_object(object.clone()).map(drop),
        Some(stored) => {
            let mut update = object.clone();
            if let (Some(meta), Some(version)) = (
                update.get_mut("metadata").and_then(Value::as_object_mut),
                stored.pointer("/metadata/resourceVersion"),
            ) {
                meta.insert("resourceVersion".to_owned(), version.clone());
            }
            env.update_object(update).map(drop)
        }
    }
}

fn split_api_version(object: &Value) -> (&str, &str) {
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    api_version.rsplit_once('/').unwrap_or(("", api_version))
}

/// The namespace an object names, created when missing so the check is of
/// the object, not of the cluster it would go to.
fn ensure_namespace(env: &TestEnv, object: &Value) {
    let Some(namespace) = object.pointer("/metadata/namespace").and_then(Value::as_str) else {
        return;
    };
    if env.get_object("", "v1", "namespaces", None, namespace).is_none() {
        let _created = env.create_object(serde_json::json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace},
        }));
    }
}

fn read_all(paths: &[PathBuf]) -> Result<Vec<Document>, String> {
    let mut documents = Vec::new();
    for path in paths {
        for file in kinject_testenv::manifest_files(path).map_err(|e| format!("{}: {e}", path.display()))? {
            documents.extend(read_file(&file)?);
        }
    }
    Ok(documents)
}

fn read_file(path: &Path) -> Result<Vec<Document>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let source = path.display().to_string();
    let mut documents = Vec::new();
    for (number, object) in kinject_testenv::yaml_documents(&source, &text)? {
        let place = format!("{source}, document {number}");
        if !object.is_object() {
            return Err(format!(
                "{place}: a manifest is a YAML mapping (apiVersion, kind, metadata)"
            ));
        }
        documents.push(Document { place, object });
    }
    Ok(documents)
}

#[cfg(test)]
#[allow(unreachable_pub, reason = "a kind must be pub")]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use kinject_macros::{Kind, rules};
    use kinject_types::registry::{CustomKind, custom_resource_definitions};
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    use super::{Document, check, read_file};

    #[rules]
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    #[rule("self.min <= self.max", message = "min must not be above max")]
    pub struct RangeSpec {
        pub min: i32,
        pub max: i32,
        #[rule(
            "self == oldSelf",
            message = "zone cannot change",
            reason = "FieldValueForbidden"
        )]
        #[serde(default)]
        pub zone: String,
    }

    #[derive(Kind, Clone, Debug, Default, PartialEq)]
    #[kind(group = "tutorial.example.com", version = "v1", namespaced)]
    pub struct Range {
        pub metadata: ObjectMeta,
        pub spec: RangeSpec,
    }

    fn documents(name: &str, yaml: &str) -> Vec<Document> {
        let path = std::env::temp_dir().join(format!("kinject-validate-{}-{name}.yaml", std::process::id()));
        std::fs::write(&path, yaml).unwrap_or_default();
        let read = read_file(&path).unwrap_or_default();
        let _removed = std::fs::remove_file(&path);
        read
    }

    fn range(name: &str, min: i32, max: i32, zone: &str) -> String {
        format!(
            "apiVersion: tutorial.example.com/v1\nkind: Range\nmetadata:\n  name: {name}\n  namespace: shop\n\
             spec:\n  min: {min}\n  max: {max}\n  zone: {zone}\n"
        )
    }

    #[test]
    fn manifests_are_refused_in_the_api_servers_words_and_old_ones_make_updates() {
        let definitions = custom_resource_definitions(&[CustomKind::of::<Range>()]).unwrap_or_default();
        let new = documents(
            "new",
            &[
                range("a", 1, 2, "eu"),
                range("b", 3, 2, "eu"),
                range("c", 1, 2, "us"),
            ]
            .join("---\n"),
        );
        assert_eq!(new.len(), 3);
        let report = check(&definitions, &new, &[], false).unwrap_or_default();
        assert_eq!(report.valid, 2);
        assert_eq!(report.refused.len(), 1, "{report:?}");
        assert!(
            report.refused[0].ends_with(
                "document 2: Range.tutorial.example.com \"b\" is invalid: spec: Invalid value: \"object\": min must \
                 not be above max"
            ),
            "{report:?}"
        );

        // Against the objects as stored, the zone of `c` changed.
        let old = documents(
            "old",
            &[range("a", 1, 2, "eu"), range("c", 1, 2, "eu")].join("---\n"),
        );
        let report = check(&definitions, &new, &old, false).unwrap_or_default();
        assert_eq!(report.refused.len(), 2, "{report:?}");
        assert!(
            report.refused[1].ends_with("\"c\" is invalid: spec.zone: Forbidden: zone cannot change"),
            "{report:?}"
        );

        let unknown = documents(
            "unknown",
            "apiVersion: other.example.com/v1\nkind: Thing\nmetadata:\n  name: t\n",
        );
        let report = check(&definitions, &unknown, &[], false).unwrap_or_default();
        assert!(report.refused[0].contains("no kind \"Thing\""), "{report:?}");
        let report = check(&definitions, &unknown, &[], true).unwrap_or_default();
        assert!(
            report.refused.is_empty() && report.skipped.len() == 1,
            "{report:?}"
        );
    }
}
