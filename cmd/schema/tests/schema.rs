#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

//! The schema command against the checked-in CRD manifests.

use std::path::{Path, PathBuf};
use std::process::Command;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

fn schema(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_schema"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn config_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config")
}

fn manifest(kind: &str) -> (String, Value) {
    let path = config_dir().join(format!("300-{}.yaml", kind.to_lowercase()));
    let text = std::fs::read_to_string(&path).unwrap();
    let value: Value = serde_saphyr::from_str(&text).unwrap();
    (text, value)
}

/// The kinds as the generated registry lists them: adding a kind changes no
/// test here.
fn kinds() -> Vec<String> {
    generated::registry::custom_kinds()
        .into_iter()
        .map(|k| k.kind)
        .collect()
}

#[test]
fn dump_equals_the_schema_in_the_checked_in_crd() {
    for kind in kinds() {
        let kind = kind.as_str();
        let (code, dumped, stderr) = schema(&["dump", kind]);
        assert_eq!(code, 0, "{stderr}");
        let (text, crd) = manifest(kind);
        let in_file = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
        let dumped_value: Value = serde_saphyr::from_str(&dumped).unwrap();
        assert_eq!(&dumped_value, in_file, "{kind}: run hack/update-codegen.sh");
        // Byte for byte too: the file holds the dump, indented under its key.
        let indented: String = dumped.lines().map(|l| format!("          {l}\n")).collect();
        assert!(
            text.contains(&indented),
            "{kind}: the schema block is not the dump as printed"
        );
    }
}

#[test]
fn dump_is_the_runtime_schema() {
    let (_, dumped, _) = schema(&["dump", "AddressableService"]);
    let dumped: Value = serde_saphyr::from_str(&dumped).unwrap();
    assert_eq!(
        dumped,
        kinject_types::schema::openapi_v3_schema::<apis::v1alpha1::AddressableService>()
    );
}

#[test]
fn dump_has_knatives_shape() {
    let (_, dumped, _) = schema(&["dump", "SimpleDeployment"]);
    assert!(
        dumped.starts_with("type: object\nproperties:\n  spec:\n"),
        "{dumped}"
    );
    assert!(
        dumped.contains("        type: integer\n        format: int32\n"),
        "{dumped}"
    );
    assert!(
        dumped.contains("    required:\n      - image\n      - replicas\n"),
        "{dumped}"
    );
}

#[test]
fn unknown_kind_exits_2_naming_the_known_ones() {
    let (code, stdout, stderr) = schema(&["dump", "Nope"]);
    assert_eq!(code, 2);
    assert_eq!(stdout, "");
    assert_eq!(
        stderr.trim_end(),
        format!("unknown Kind: Nope, expected one of [{}]", kinds().join(", "))
    );
    assert_eq!(schema(&["crd", "Nope"]).0, 2);
    assert_eq!(schema(&["frobnicate"]).0, 2);
}

#[test]
fn crd_prints_the_generated_crd() {
    let (code, printed, stderr) = schema(&["crd", "AddressableService"]);
    assert_eq!(code, 0, "{stderr}");
    let printed: Value = serde_saphyr::from_str(&printed).unwrap();
    let built = serde_json::to_value(
        kinject_types::crd::custom_resource_definition::<apis::v1alpha1::AddressableService>().unwrap(),
    )
    .unwrap();
    assert_eq!(printed, built);
}

#[test]
fn checked_in_crds_agree_with_the_kinds() {
    for kind in generated::registry::custom_kinds() {
        let (text, _) = manifest(&kind.kind);
        let file: CustomResourceDefinition = serde_saphyr::from_str(&text).unwrap();
        let built = kind.crd().unwrap();
        assert_eq!(file.metadata.name, built.metadata.name);
        let labels = file.metadata.labels.unwrap();
        assert_eq!(labels["samples.knative.dev/release"], "devel");
        assert_eq!(labels["knative.dev/crd-install"], "true");
        assert_eq!(file.spec.group, built.spec.group);
        assert_eq!(file.spec.scope, built.spec.scope);
        let (mut names, built_names) = (file.spec.names, built.spec.names);
        // kubectl derives listKind; the manifest, like Knative's, leaves it out.
        names.list_kind = built_names.list_kind.clone();
        assert_eq!(names, built_names);
        let (version, built_version) = (&file.spec.versions[0], &built.spec.versions[0]);
        assert_eq!(
            (
                &version.name,
                version.served,
                version.storage,
                &version.subresources,
                &version.schema
            ),
            (
                &built_version.name,
                built_version.served,
                built_version.storage,
                &built_version.subresources,
                &built_version.schema
            )
        );
        let columns: Vec<_> = version
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| (c.name.as_str(), c.json_path.as_str()))
            .collect();
        assert!(columns.contains(&("Ready", ".status.conditions[?(@.type=='Ready')].status")));
        assert!(columns.contains(&("Reason", ".status.conditions[?(@.type=='Ready')].reason")));
    }
    let (text, _) = manifest("AddressableService");
    assert!(
        text.contains("- name: Address\n          type: string\n          jsonPath: .status.address.url\n")
    );
}

#[test]
fn generated_crds_of_kinds_with_conditions_print_ready_reason_and_age() {
    for kind in generated::registry::custom_kinds() {
        let has_conditions = kind
            .schema()
            .pointer("/properties/status/properties/conditions")
            .is_some();
        let crd = kind.crd().unwrap();
        let columns: Vec<(String, String, String)> = crd.spec.versions[0]
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| (c.name.clone(), c.type_.clone(), c.json_path.clone()))
            .collect();
        let want = if has_conditions {
            vec![
                (
                    "Ready".to_owned(),
                    "string".to_owned(),
                    ".status.conditions[?(@.type=='Ready')].status".to_owned(),
                ),
                (
                    "Reason".to_owned(),
                    "string".to_owned(),
                    ".status.conditions[?(@.type=='Ready')].reason".to_owned(),
                ),
                (
                    "Age".to_owned(),
                    "date".to_owned(),
                    ".metadata.creationTimestamp".to_owned(),
                ),
            ]
        } else {
            Vec::new()
        };
        assert_eq!(columns, want, "{}", kind.kind);
    }
}

#[test]
fn update_crds_verify_reports_a_stale_schema_and_update_fixes_it() {
    let dir = std::env::temp_dir().join(format!("schema-update-crds-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for kind in kinds() {
        let name = format!("300-{}.yaml", kind.to_lowercase());
        std::fs::copy(config_dir().join(&name), dir.join(&name)).unwrap();
    }
    let dir_arg = dir.to_str().unwrap();
    assert_eq!(schema(&["update-crds", "--verify", dir_arg]).0, 0);

    let path = dir.join("300-simpledeployment.yaml");
    let original = std::fs::read_to_string(&path).unwrap();
    let edited = original.replace("format: int32", "format: int64");
    std::fs::write(&path, &edited).unwrap();
    let (code, _, stderr) = schema(&["update-crds", "--verify", dir_arg]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("300-simpledeployment.yaml (openAPIV3Schema differs)"),
        "{stderr}"
    );
    assert!(stderr.contains("run `hack/update-codegen.sh`"), "{stderr}");
    assert!(!stderr.contains("300-addressableservice.yaml"), "{stderr}");

    assert_eq!(schema(&["update-crds", dir_arg]).0, 0);
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        original,
        "only the schema block changes"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
