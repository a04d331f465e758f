#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(
    clippy::too_many_lines,
    reason = "a scenario test reads best top to bottom, in one function"
)]

//! `hack/update-codegen.sh` and `hack/verify-codegen.sh` on a copy of the
//! repository: verify passes on a fresh copy, fails after a hand edit in
//! `generated/` and after an API field change (naming the stale files and the
//! fix), and update repairs both. `hack/new-kind.sh` on another copy: kinds
//! in a new group and in the sample's group build, test, format and dump with
//! no hand edit. And `examples/out-of-tree`, a workspace of its own on the
//! framework, builds and passes its tests.
//!
//! The copy builds in its own target directory under the workspace's
//! `target/`, so its modified binaries never replace the ones other tests run;
//! the first run compiles the dependencies once.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Copies the repository without `target/` and `.git`.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if name == "target" || name == ".git" {
            continue;
        }
        let (src, dst) = (entry.path(), to.join(&name));
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

/// Where the copy and its builds live; a fixed place, so later runs reuse the
/// compiled dependencies.
fn scratch() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target"))
        .join("hack-scripts-test")
}

/// The tests share one target directory; one at a time keeps cargo from
/// rebuilding the same crates for two copies in turn.
static ONE_COPY_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

struct Run {
    ok: bool,
    stdout: String,
    stderr: String,
}

/// Runs `command` with the copy's builds in the shared target directory.
fn run(mut command: Command) -> Run {
    let out = command
        .env("CARGO_TARGET_DIR", scratch().join("target"))
        .env("CARGO_NET_OFFLINE", "true")
        .output()
        .unwrap();
    Run {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs a script of the copy by absolute path from another directory, as a
/// user might.
fn script(copy: &Path, name: &str) -> Run {
    script_with(copy, name, &[])
}

fn script_with(copy: &Path, name: &str, args: &[&str]) -> Run {
    let mut command = Command::new("bash");
    command
        .arg(copy.join("hack").join(name))
        .args(args)
        .current_dir(std::env::temp_dir());
    run(command)
}

/// `cargo <args>` in the copy.
fn cargo(copy: &Path, args: &[&str]) -> Run {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command.args(args).current_dir(copy);
    run(command)
}

/// A shell command line in the copy, as a user types it.
fn shell(copy: &Path, line: &str) -> Run {
    let mut command = Command::new("bash");
    command.args(["-c", line]).current_dir(copy);
    run(command)
}

#[test]
fn verify_fails_on_drift_and_update_repairs_it() {
    let _one = ONE_COPY_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let copy = scratch().join("repo");
    let _ = std::fs::remove_dir_all(&copy);
    copy_tree(&repo_root(), &copy);

    let run = script(&copy, "verify-codegen.sh");
    assert!(
        run.ok,
        "a fresh copy is up to date:\n{}{}",
        run.stdout, run.stderr
    );
    assert!(
        run.stdout.contains("Generated files are up to date."),
        "{}",
        run.stdout
    );

    // A hand edit in generated/.
    let pod = copy.join("generated/src/core/v1/pod.rs");
    let original = std::fs::read_to_string(&pod).unwrap();
    std::fs::write(
        &pod,
        original.replace("The shared informer", "The common informer"),
    )
    .unwrap();
    let run = script(&copy, "verify-codegen.sh");
    assert!(!run.ok);
    assert!(
        run.stderr.contains("generated/src/core/v1/pod.rs (differs)"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("run hack/update-codegen.sh"),
        "{}",
        run.stderr
    );
    assert!(
        std::fs::read_to_string(&pod)
            .unwrap()
            .contains("The common informer"),
        "verify changes nothing"
    );

    let run = script(&copy, "update-codegen.sh");
    assert!(run.ok, "{}", run.stderr);
    assert_eq!(std::fs::read_to_string(&pod).unwrap(), original);
    assert!(script(&copy, "verify-codegen.sh").ok);

    // A hand-widened RBAC rule: the RBAC is generated from the code.
    let role = copy.join("config/200-clusterrole.yaml");
    let generated = std::fs::read_to_string(&role).unwrap();
    let widened = generated.replacen(
        "verbs: [\"list\", \"watch\"",
        "verbs: [\"get\", \"list\", \"watch\"",
        1,
    );
    assert_ne!(
        widened, generated,
        "the ClusterRole changed shape; update this test"
    );
    std::fs::write(&role, widened).unwrap();
    let run = script(&copy, "verify-codegen.sh");
    assert!(!run.ok);
    assert!(
        run.stderr.contains("config/200-clusterrole.yaml is stale"),
        "{}",
        run.stderr
    );
    assert!(script(&copy, "update-codegen.sh").ok);
    assert_eq!(std::fs::read_to_string(&role).unwrap(), generated);

    // An API field change reaches the CRD schema.
    let types = copy.join("apis/src/v1alpha1/simple_deployment_types.rs");
    let text = std::fs::read_to_string(&types).unwrap();
    let changed = text.replace(
        "    pub replicas: i32,\n}",
        "    pub replicas: i32,\n\n    /// Stop rolling out new pods.\n    #[serde(default)]\n    pub paused: bool,\n}",
    );
    assert_ne!(changed, text, "the API source changed shape; update this test");
    std::fs::write(&types, changed).unwrap();
    let run = script(&copy, "verify-codegen.sh");
    assert!(!run.ok);
    assert!(
        run.stderr
            .contains("config/300-simpledeployment.yaml (differs from the kind and its markers)"),
        "{}",
        run.stderr
    );
    assert!(
        !run.stderr.contains("300-addressableservice.yaml"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("run hack/update-codegen.sh"),
        "{}",
        run.stderr
    );

    let run = script(&copy, "update-codegen.sh");
    assert!(run.ok, "{}", run.stderr);
    let crd = std::fs::read_to_string(copy.join("config/300-simpledeployment.yaml")).unwrap();
    assert!(
        crd.contains("                paused:\n                  description: Stop rolling out new pods.\n"),
        "{crd}"
    );
    assert!(script(&copy, "verify-codegen.sh").ok);

    // A field the API server cannot describe structurally is an error at
    // update time naming the type and the field, and the CRD stays as it was.
    let text = std::fs::read_to_string(&types).unwrap();
    let untyped = text.replace(
        "    pub paused: bool,\n}",
        "    pub paused: bool,\n\n    /// A number or a text.\n    #[serde(default, skip_serializing_if = \"Option::is_none\")]\n    \
         pub extra: Option<Extra>,\n}\n\n/// A number or a text.\n\
         #[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]\n#[serde(untagged)]\n\
         pub enum Extra {\n    /// A number.\n    Number(i64),\n    /// A text.\n    Text(String),\n}",
    );
    assert_ne!(untyped, text, "the API source changed shape; update this test");
    std::fs::write(&types, untyped).unwrap();
    let run = script(&copy, "update-codegen.sh");
    assert!(!run.ok);
    for part in [
        "error: apis/src/v1alpha1/simple_deployment_types.rs:",
        "the CRD of SimpleDeployment would be refused by the API server",
        "properties[extra].type: Required value: must not be empty for specified object fields",
    ] {
        assert!(run.stderr.contains(part), "{part}:\n{}", run.stderr);
    }
    assert_eq!(
        std::fs::read_to_string(copy.join("config/300-simpledeployment.yaml")).unwrap(),
        crd
    );

    std::fs::remove_dir_all(&copy).unwrap();
}

/// The files of a tree with their contents, to show a refused scaffold
/// changed nothing.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(snapshot(&path));
        } else {
            out.push((path.clone(), std::fs::read(&path).unwrap()));
        }
    }
    out.sort();
    out
}

/// The commands of `docs/tutorial.md`'s blocks marked `<!-- tested -->`, in order.
fn tutorial_commands() -> Vec<String> {
    let text = std::fs::read_to_string(repo_root().join("docs/tutorial.md")).unwrap();
    let mut commands = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim() != "<!-- tested -->" {
            continue;
        }
        assert_eq!(lines.next().map(str::trim), Some("```sh"), "a tested block is sh");
        for command in lines.by_ref().take_while(|l| l.trim() != "```") {
            if !command.trim().is_empty() && !command.trim_start().starts_with('#') {
                commands.push(command.trim().to_owned());
            }
        }
    }
    commands
}

#[test]
fn a_new_kind_builds_and_passes_its_tests_with_no_hand_edit() {
    let _one = ONE_COPY_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let copy = scratch().join("new-kind");
    let _ = std::fs::remove_dir_all(&copy);
    copy_tree(&repo_root(), &copy);

    // Names that break a rule are refused, all at once, and nothing changes.
    let before = snapshot(&copy);
    let run = script_with(
        &copy,
        "new-kind.sh",
        &["--group", "batch", "--version", "V_1", "--kind", "widget"],
    );
    assert!(!run.ok);
    for rule in [
        "--kind \"widget\" must start with an upper-case letter",
        "--group \"batch\" must contain a dot",
        "--version \"V_1\" must match",
        "no file was changed",
    ] {
        assert!(run.stderr.contains(rule), "{rule}: {}", run.stderr);
    }
    assert!(snapshot(&copy) == before, "a refused scaffold changed files");

    // The tutorial, as written: a namespaced Widget in a new group,
    // generated, tested and dumped.
    let commands = tutorial_commands();
    assert!(commands.len() >= 4, "{commands:?}");
    for command in &commands {
        let Run { ok, stdout, stderr } = shell(&copy, command);
        assert!(ok, "{command}:\n{stdout}{stderr}");
        if command.starts_with("cargo test -p reconcilers") {
            assert!(
                stdout.contains("widget::a_valid_object_becomes_ready ... ok"),
                "{stdout}"
            );
        }
        if command.contains("dump Widget") {
            assert!(stdout.contains("maxLength: 256"), "{stdout}");
        }
    }

    // The same kind again is refused, and changes nothing.
    let before = snapshot(&copy);
    let widget = [
        "--group",
        "tutorial.example.com",
        "--version",
        "v1alpha1",
        "--kind",
        "Widget",
    ];
    let run = script_with(&copy, "new-kind.sh", &widget);
    assert!(!run.ok);
    assert!(
        run.stderr
            .contains("kind Widget of group tutorial.example.com already exists"),
        "{}",
        run.stderr
    );
    assert!(snapshot(&copy) == before, "a refused scaffold changed files");

    // A cluster-scoped kind in a group named like Kubernetes' batch, and a
    // namespaced one in the sample's existing group and version.
    let run = script_with(
        &copy,
        "new-kind.sh",
        &[
            "--group",
            "batch.tutorial.example.io",
            "--version",
            "v1",
            "--kind",
            "Gizmo",
            "--scope",
            "cluster",
        ],
    );
    assert!(run.ok, "{}", run.stderr);
    assert!(
        run.stderr.contains("created reconcilers/src/gizmo.rs"),
        "{}",
        run.stderr
    );
    let run = script_with(
        &copy,
        "new-kind.sh",
        &[
            "--group",
            "samples.knative.dev",
            "--version",
            "v1alpha1",
            "--kind",
            "Gadget",
        ],
    );
    assert!(run.ok, "{}", run.stderr);
    // A second version of the tutorial's Widget: only its type, sharing the
    // fields of v1alpha1, stored, with no second reconciler.
    let widget_v1beta1 = [
        "--group",
        "tutorial.example.com",
        "--version",
        "v1beta1",
        "--kind",
        "Widget",
    ];
    let run = script_with(&copy, "new-kind.sh", &widget_v1beta1);
    assert!(run.ok, "{}", run.stderr);
    assert!(
        run.stdout.contains(
            "started version v1beta1 of Widget (tutorial.example.com), sharing the fields of v1alpha1"
        ),
        "{}",
        run.stdout
    );
    assert!(
        run.stderr
            .contains("created apis/src/tutorial/v1beta1/widget_types.rs"),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("reconcilers/"), "{}", run.stderr);

    let run = script(&copy, "update-codegen.sh");
    assert!(run.ok, "{}", run.stderr);
    assert!(
        run.stderr.contains("wrote config/300-gizmo.yaml"),
        "{}",
        run.stderr
    );
    let run = script(&copy, "verify-codegen.sh");
    assert!(run.ok, "{}{}", run.stdout, run.stderr);

    let run = cargo(&copy, &["test", "-p", "apis", "-p", "reconcilers"]);
    assert!(run.ok, "{}{}", run.stdout, run.stderr);
    for test in [
        "widget::a_valid_object_becomes_ready ... ok",
        "gizmo::an_invalid_spec_is_reported_not_retried ... ok",
        "gadget::a_valid_object_becomes_ready ... ok",
        "batch_tutorial_example_io::v1::gizmo_validation::tests::a_long_description_names_the_field ... ok",
    ] {
        assert!(run.stdout.contains(test), "{test}:\n{}", run.stdout);
    }
    let run = cargo(&copy, &["fmt", "--all", "--check"]);
    assert!(run.ok, "{}{}", run.stdout, run.stderr);
    let crd = std::fs::read_to_string(copy.join("config/300-gizmo.yaml")).unwrap();
    assert!(crd.contains("scope: Cluster"), "{crd}");
    let crd = std::fs::read_to_string(copy.join("config/300-widget.yaml")).unwrap();
    assert!(
        crd.contains("    - name: v1beta1\n      served: true\n      storage: true\n")
            && crd.contains("    - name: v1alpha1\n      served: true\n      storage: false\n"),
        "one CRD serves both versions of Widget:\n{crd}"
    );
    let run = cargo(
        &copy,
        &[
            "run",
            "-q",
            "-p",
            "schema",
            "--",
            "dump",
            "Widget",
            "--version",
            "v1alpha1",
        ],
    );
    assert!(
        run.ok && run.stdout.contains("maxLength: 256"),
        "{}{}",
        run.stdout,
        run.stderr
    );
    assert!(
        std::fs::read_to_string(copy.join("generated/src/batch_tutorial_example_io/v1/gizmo.rs")).is_ok(),
        "a custom group named like batch gets a module of its own"
    );
    // update-codegen generated the RBAC of the new reconcilers.
    let role = std::fs::read_to_string(copy.join("config/200-clusterrole.yaml")).unwrap();
    for plural in ["widgets", "gizmos", "gadgets"] {
        assert!(role.contains(&format!("\"{plural}/status\"")), "{role}");
    }
    // Each scaffolded kind has defaults and validate hooks, so the admission
    // webhook defaults and validates it with no hand edit.
    let registry = std::fs::read_to_string(copy.join("generated/src/registry.rs")).unwrap();
    for kind in ["Gizmo", "Gadget", "Widget"] {
        let entry = registry
            .split("CustomKind::of::<")
            .find(|entry| {
                entry
                    .split(">()")
                    .next()
                    .is_some_and(|path| path.ends_with(&format!("::{kind}")))
            })
            .unwrap_or_else(|| panic!("{kind} is not registered:\n{registry}"));
        assert!(
            entry.contains(".defaulted::<") && entry.contains(".validated::<"),
            "{kind} is not registered for admission:\n{registry}"
        );
    }
    let lib = std::fs::read_to_string(copy.join("reconcilers/src/lib.rs")).unwrap();
    assert!(
        lib.contains("    pub mod addressableservice;\n    pub mod gadget;\n    pub mod gizmo;\n    pub mod simpledeployment;\n    pub mod widget;\n"),
        "{lib}"
    );

    std::fs::remove_dir_all(&copy).unwrap();
}

#[test]
fn the_out_of_tree_example_builds_and_passes_its_tests() {
    let _one = ONE_COPY_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let example = repo_root().join("examples/out-of-tree");
    // --locked: its Cargo.lock is checked in and must not need a change.
    let run = cargo(&example, &["test", "--locked"]);
    assert!(
        run.ok,
        "{}{}\nIf the framework's dependencies changed, refresh the example's lock file: \
         (cd examples/out-of-tree && cargo metadata --offline > /dev/null)",
        run.stdout, run.stderr
    );
    for test in [
        "a_new_greeting_gets_its_config_map_and_becomes_ready ... ok",
        "a_changed_message_updates_the_config_map ... ok",
        "a_too_long_message_is_reported_not_published ... ok",
        "an_empty_message_defaults_to_hello_world ... ok",
    ] {
        assert!(run.stdout.contains(test), "{test}:\n{}", run.stdout);
    }
    let run = cargo(&example, &["fmt", "--all", "--check"]);
    assert!(run.ok, "{}{}", run.stdout, run.stderr);
    let run = cargo(
        &example,
        &["run", "--locked", "-q", "-p", "greeter", "--bin", "crds"],
    );
    assert!(run.ok, "{}", run.stderr);
    assert!(
        run.stdout.contains("\"name\":\"greetings.hello.example.com\""),
        "{}",
        run.stdout
    );
}
