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

/// Each kind once, as the generated registry lists them (a kind of several
/// versions has an entry for each).
fn kinds() -> Vec<String> {
    let mut kinds: Vec<String> = Vec::new();
    for entry in generated::registry::custom_kinds() {
        if !kinds.contains(&entry.kind) {
            kinds.push(entry.kind);
        }
    }
    kinds
}

fn manifest(kind: &str) -> (String, Value) {
    let path = config_dir().join(format!("300-{}.yaml", kind.to_lowercase()));
    let text = std::fs::read_to_string(&path).unwrap();
    let value: Value = serde_saphyr::from_str(&text).unwrap();
    (text, value)
}

#[test]
fn dump_equals_the_schema_in_the_checked_in_crd() {
    // Every version of every kind the generated registry lists: adding a
    // kind, a version or a schema-shaping marker changes no test here.
    for entry in generated::registry::custom_kinds() {
        let (kind, version) = (entry.kind.as_str(), entry.version.as_str());
        let (code, dumped, stderr) = schema(&["dump", kind, "--version", version]);
        assert_eq!(code, 0, "{stderr}");
        let (text, crd) = manifest(kind);
        let served = crd["spec"]["versions"].as_array().unwrap();
        let in_file = served
            .iter()
            .find(|v| v["name"] == version)
            .map(|v| &v["schema"]["openAPIV3Schema"])
            .unwrap_or_else(|| panic!("config/300-{}.yaml serves no {version}", kind.to_lowercase()));
        let dumped_value: Value = serde_saphyr::from_str(&dumped).unwrap();
        assert_eq!(
            &dumped_value, in_file,
            "{kind} {version}: `schema dump` and the CRD disagree (if the file is stale, hack/update-codegen.sh refreshes it)"
        );
        // Byte for byte too: the file holds the dump, indented under its key.
        let indented: String = dumped.lines().map(|l| format!("          {l}\n")).collect();
        assert!(
            text.contains(&indented),
            "{kind} {version}: the schema block is not the dump as printed"
        );
    }
}

#[test]
fn dump_is_the_runtime_schema() {
    let (_, dumped, _) = schema(&["dump", "AddressableService"]);
    let dumped: Value = serde_saphyr::from_str(&dumped).unwrap();
    assert_eq!(
        dumped,
        kinject_types::crd::crd_schema::<apis::v1alpha1::AddressableService>()
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
fn dump_takes_every_name_kubectl_takes() {
    let (_, by_kind, _) = schema(&["dump", "AddressableService"]);
    for name in [
        "addressableservices",
        "addressableservice",
        "asvc",
        "ASVC",
        "addressableservices.samples.knative.dev",
        "AddressableService.samples.knative.dev",
    ] {
        let (code, dumped, stderr) = schema(&["dump", name]);
        assert_eq!((code, dumped.as_str()), (0, by_kind.as_str()), "{name}: {stderr}");
    }
    let (code, _, stderr) = schema(&["crd", "sdeploy"]);
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn a_near_miss_gets_the_closest_kind_suggested() {
    let (code, _, stderr) = schema(&["dump", "AddresableService"]);
    assert_eq!(code, 2);
    assert!(
        stderr.trim_end().ends_with("; did you mean AddressableService?"),
        "{stderr}"
    );
    let (code, _, stderr) = schema(&["crd", "simpledeploymnts"]);
    assert_eq!(code, 2);
    assert!(
        stderr.trim_end().ends_with("; did you mean SimpleDeployment?"),
        "{stderr}"
    );
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
fn checked_in_crds_are_the_generated_ones_with_their_labels() {
    // One CRD per kind, its versions merged, as update-crds writes them.
    let kinds = generated::registry::custom_kinds();
    for definition in kinject_types::registry::custom_resource_definitions(&kinds).unwrap() {
        let (text, _) = manifest(&definition.kind);
        let mut file: CustomResourceDefinition = serde_saphyr::from_str(&text).unwrap();
        let labels = file.metadata.labels.take().unwrap();
        assert_eq!(labels["samples.knative.dev/release"], "devel");
        assert_eq!(labels["knative.dev/crd-install"], "true");
        // A kind with a hub converts through the webhook, which update-crds
        // names from the manifests beside the CRD.
        let conversion = file.spec.conversion.take();
        if definition.hub.is_some() {
            let conversion = conversion.unwrap();
            assert_eq!(conversion.strategy, "Webhook", "{}", definition.kind);
            let service = conversion.webhook.and_then(|w| w.client_config?.service).unwrap();
            assert_eq!(
                service.path.as_deref(),
                Some(kinject_types::conversion::WEBHOOK_PATH)
            );
        } else {
            file.spec.conversion = conversion;
        }
        assert_eq!(
            file, definition.crd,
            "{}: run hack/update-codegen.sh",
            definition.kind
        );
    }
    // The sample's own column, from its printcolumn marker.
    let (text, _) = manifest("AddressableService");
    assert!(
        text.contains("- name: Address\n          type: string\n          jsonPath: .status.address.url\n")
    );
}

#[test]
fn generated_crds_of_kinds_with_conditions_print_ready_reason_and_age_last() {
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
        let generated = [
            ("Ready", "string", ".status.conditions[?(@.type=='Ready')].status"),
            (
                "Reason",
                "string",
                ".status.conditions[?(@.type=='Ready')].reason",
            ),
            ("Age", "date", ".metadata.creationTimestamp"),
        ]
        .map(|(n, t, p)| (n.to_owned(), t.to_owned(), p.to_owned()));
        if has_conditions {
            assert!(columns.ends_with(&generated), "{}: {columns:?}", kind.kind);
        } else {
            assert!(
                !columns.iter().any(|c| c.0 == "Ready"),
                "{}: {columns:?}",
                kind.kind
            );
        }
    }
}

#[test]
fn update_crds_verify_reports_a_stale_schema_and_update_fixes_it() {
    let dir = std::env::temp_dir().join(format!("schema-update-crds-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Every manifest: the CRD of a kind with a hub names the webhook's
    // Service, which update-crds finds among them.
    for entry in std::fs::read_dir(config_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
        }
    }
    let dir_arg = dir.to_str().unwrap();
    assert_eq!(schema(&["update-crds", "--verify", dir_arg]).0, 0);

    let path = dir.join("300-simpledeployment.yaml");
    let original = std::fs::read_to_string(&path).unwrap();
    let labelled = original.replace(
        "    samples.knative.dev/release: devel\n",
        "    samples.knative.dev/release: devel\n    team.example.dev/owner: platform\n",
    );
    assert_ne!(labelled, original);
    std::fs::write(
        &path,
        labelled
            .replace("format: int32", "format: int64")
            .replace("- name: Reason", "- name: Why"),
    )
    .unwrap();
    let (code, _, stderr) = schema(&["update-crds", "--verify", dir_arg]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("300-simpledeployment.yaml (differs from the kind and its markers)"),
        "{stderr}"
    );
    assert!(stderr.contains("run `hack/update-codegen.sh`"), "{stderr}");
    assert!(!stderr.contains("300-addressableservice.yaml"), "{stderr}");

    assert_eq!(schema(&["update-crds", dir_arg]).0, 0);
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        labelled,
        "the schema and columns come back from the kind; the added label stays"
    );
    std::fs::remove_file(&path).unwrap();
    assert_eq!(schema(&["update-crds", dir_arg]).0, 0);
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        original,
        "a new manifest takes its siblings' labels"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
