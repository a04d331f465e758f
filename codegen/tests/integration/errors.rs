//! Errors name the file, line and column, say what is wrong and how to fix it.

use std::path::{Path, PathBuf};

use kinject_codegen::{ApiModule, Config, Layout};

/// Writes `files` into a fresh directory and runs the generator over it.
fn generate(case: &str, files: &[(&str, &str)]) -> Result<PathBuf, (PathBuf, String)> {
    generate_with(case, files, Vec::new()).map(|(dir, _)| dir)
}

/// [`generate`] with `externals`, returning the generated files too.
fn generate_with(
    case: &str,
    files: &[(&str, &str)],
    externals: Vec<kinject_codegen::ExternalKind>,
) -> Result<(PathBuf, kinject_codegen::Generated), (PathBuf, String)> {
    let dir = std::env::temp_dir().join(format!("codegen-errors-{}-{case}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    let mut config = Config::new(dir.join("out"));
    config.apis.push(ApiModule::new("apis", "apis::v1", dir.clone()));
    config.externals = externals;
    match kinject_codegen::generate(&config, &Layout::Crate) {
        Ok(generated) => Ok((dir, generated)),
        Err(e) => Err((dir.clone(), e.to_string())),
    }
}

fn error(case: &str, text: &str) -> String {
    let (dir, err) = generate(case, &[("types.rs", text)]).expect_err("expected an error");
    let file = dir.join("types.rs");
    let shown = err.replace(&file.display().to_string(), "types.rs");
    std::fs::remove_dir_all(&dir).unwrap();
    shown
}

#[test]
fn unknown_marker_key_points_at_the_key_and_suggests_the_fix() {
    let err = error(
        "unknown-key",
        "use kinject_macros::Kind;\n\n#[derive(Kind)]\n#[kind(group = \"x.dev\", version = \"v1\", namespacd)]\npub struct Thing {\n    pub metadata: ObjectMeta,\n}\n",
    );
    assert_eq!(
        err,
        "error: types.rs:4:41: unknown key `namespacd` in #[kind(...)]; did you mean `namespaced`? known keys: \
         group, version, plural, singular, namespaced, cluster_scoped, shortnames, categories, printcolumn, \
         scale, max_description_len, storage, hub"
    );
}

#[test]
fn every_problem_is_reported_not_just_the_first() {
    let err = error(
        "many",
        "#[derive(Kind)]\n#[kind(group = \"x.dev\", version = \"1.0\", namespaced)]\n#[genclient(only_verbs = [fetch])]\npub struct A { pub metadata: ObjectMeta }\n\n#[derive(Kind)]\n#[kind(group = \"x.dev\", version = \"v1\", namespaced)]\npub struct B { pub metadata: ObjectMeta, pub status: Status }\n",
    );
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 3, "{err}");
    assert!(
        lines[0]
            .starts_with("error: types.rs:2:1: version \"1.0\" is not a Kubernetes API version; use v<N>"),
        "{err}"
    );
    assert!(
        lines[1].starts_with("error: types.rs:3:27: unknown verb; known verbs: get, list"),
        "{err}"
    );
    assert!(
        lines[2].starts_with("error: types.rs:8:54: `status` must be an `Option<...>`"),
        "{err}"
    );
    assert!(
        lines[2].ends_with("write `pub status: Option<YourStatus>`"),
        "{err}"
    );
}

#[test]
fn markers_without_the_derive_are_not_silently_ignored() {
    let err = error(
        "no-derive",
        "/// Docs.\n#[derive(Clone)]\n#[genclient]\npub struct Thing {\n    pub metadata: ObjectMeta,\n}\n",
    );
    assert_eq!(
        err,
        "error: types.rs:3:1: `Thing` has #[genclient] but does not derive Kind, so the marker would be ignored; \
         add `Kind` to its #[derive(...)] (`use kinject_macros::Kind;`) or remove the marker"
    );
}

#[test]
fn genreconciler_needs_genclient() {
    let err = error(
        "no-client",
        "#[derive(Kind)]\n#[kind(group = \"x.dev\", version = \"v1\", namespaced)]\n#[genreconciler]\npub struct Thing { pub metadata: ObjectMeta, pub status: Option<S> }\n",
    );
    assert!(
        err.starts_with("error: types.rs:3:1: #[genreconciler] on `Thing` needs the client"),
        "{err}"
    );
    assert!(
        err.ends_with("add #[genclient] (or put list and watch back into its verbs)"),
        "{err}"
    );
}

#[test]
fn genreconciler_without_status_names_both_fixes() {
    let err = error(
        "no-status",
        "#[derive(Kind)]\n#[kind(group = \"x.dev\", version = \"v1\", namespaced)]\n#[genclient]\n#[genreconciler]\npub struct Thing { pub metadata: ObjectMeta }\n",
    );
    assert!(
        err.starts_with("error: types.rs:4:1: #[genreconciler] on `Thing`, which has no `status` field"),
        "{err}"
    );
    assert!(err.contains("Add `pub status: Option<ThingStatus>`"), "{err}");
    assert!(err.contains("#[genreconciler(krshapedlogic = false)]"), "{err}");
}

#[test]
fn malformed_values_point_at_the_value() {
    let err = error(
        "bad-class",
        "#[derive(Kind)]\n#[kind(group = \"x.dev\", version = \"v1\", namespaced)]\n#[genclient]\n#[genreconciler(class = \"not a key\")]\npub struct Thing { pub metadata: ObjectMeta, pub status: Option<S> }\n",
    );
    assert_eq!(
        err,
        "error: types.rs:4:25: class annotation key \"not a key\" is not a qualified name; use e.g. \"networking.knative.dev/ingress.class\""
    );
}

#[test]
fn syntax_errors_are_located() {
    let err = error("syntax", "pub struct Thing {\n    pub metadata ObjectMeta,\n}\n");
    assert!(
        err.starts_with("error: types.rs:2:18: not valid Rust: expected `:`"),
        "{err}"
    );
    assert!(
        err.ends_with("fix the syntax (cargo check shows it too)"),
        "{err}"
    );
}

#[test]
fn a_missing_source_directory_names_the_config_entry() {
    let mut config = Config::new("out");
    config
        .apis
        .push(ApiModule::new("apis", "apis::v1", "no/such/dir"));
    let err = kinject_codegen::generate(&config, &Layout::Crate)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("error: no/such/dir: cannot read the API source directory:"),
        "{err}"
    );
    assert!(
        err.ends_with("fix `source` of the [[api]] for `apis::v1` in the codegen config"),
        "{err}"
    );
}

#[test]
fn a_bad_config_file_points_at_the_key() {
    let dir = std::env::temp_dir().join(format!("codegen-errors-{}-config", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("codegen.toml");
    std::fs::write(
        &path,
        "output = \"out\"\n\n[[external]]\npath = \"k8s_openapi::api::core::v1::Pod\"\ngroup = \"\"\nversion = \"v1\"\nkind = \"Pod\"\nplural = \"Pods\"\nscope = \"namespaced\"\n",
    )
    .unwrap();
    let err = Config::load(&path).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "error: {}:8:10: external[0].plural = \"Pods\" is not a resource name; write the lower-case plural, e.g. \"pods\"",
            path.display()
        )
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_same_kind_twice_is_an_error() {
    let (dir, err) = generate(
        "duplicate",
        &[
            ("a.rs", "#[derive(Kind)]\n#[kind(group = \"x.dev\", version = \"v1\", namespaced)]\n#[genclient]\npub struct Thing { pub metadata: ObjectMeta }\n"),
            ("b.rs", "mod m {\n#[derive(Kind)]\n#[kind(group = \"x.dev\", version = \"v1\", namespaced)]\n#[genclient]\npub struct Thing { pub metadata: ObjectMeta }\n}\n"),
        ],
    )
    .unwrap_err();
    assert!(
        err.contains(
            "`apis::v1::Thing` and `apis::v1::m::Thing` are both x.dev/v1 Thing; declare each kind once"
        ),
        "{err}"
    );
    std::fs::remove_dir_all(Path::new(&dir)).unwrap();
}

#[test]
fn a_custom_group_named_like_a_kubernetes_group_gets_a_module_of_its_own() {
    let job =
        kinject_codegen::ExternalKind::from_k8s_openapi_path("k8s_openapi::api::batch::v1::Job").unwrap();
    let (dir, generated) = generate_with(
        "batch-group",
        &[(
            "types.rs",
            "#[derive(Kind)]\n#[kind(group = \"batch.tutorial.example.io\", version = \"v1\", namespaced)]\n#[genclient]\npub struct CronTab { pub metadata: ObjectMeta, pub spec: CronTabSpec }\n",
        )],
        vec![job],
    )
    .unwrap();
    let files: Vec<String> = generated.files.keys().map(|p| p.display().to_string()).collect();
    assert!(files.contains(&"batch/v1/job.rs".to_owned()), "{files:?}");
    assert!(
        files.contains(&"batch_tutorial_example_io/v1/crontab.rs".to_owned()),
        "{files:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
