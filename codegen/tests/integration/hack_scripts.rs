#![allow(
    clippy::too_many_lines,
    reason = "a scenario test reads best top to bottom, in one function"
)]

//! `hack/update-codegen.sh` and `hack/verify-codegen.sh` on a copy of the
//! sample app: verify passes on a fresh copy, fails after a hand edit in
//! `generated/`, after a hand-widened RBAC rule and after an API field change
//! (naming the stale files and the fix), and update repairs each; a field the
//! API server cannot describe is refused at update time. And
//! `examples/out-of-tree`, a workspace of its own on the framework, builds
//! `--locked` and passes its tests.
//!
//! **Why it is slow (about 50 s warm on two cores):** each verify and update
//! builds the copy's `generated`, `schema` and `rbac` again after the edit
//! before it; nothing else is compiled (see `copies`).

use std::collections::BTreeSet;
use std::ffi::OsString;

use crate::copies::*;

/// The modification time of every file of `dir` that is its own (not behind
/// a link to the framework, not a build output), by path.
fn modification_times(dir: &std::path::Path) -> std::collections::BTreeMap<String, std::time::SystemTime> {
    let mut times = std::collections::BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        for entry in std::fs::read_dir(&folder).unwrap().flatten() {
            let kind = entry.file_type().unwrap();
            let path = entry.path();
            if kind.is_symlink() || entry.file_name() == "target" {
                continue;
            }
            if kind.is_dir() {
                pending.push(path);
            } else {
                let time = entry.metadata().unwrap().modified().unwrap();
                times.insert(path.strip_prefix(dir).unwrap().display().to_string(), time);
            }
        }
    }
    times
}

#[test]
fn verify_fails_on_drift_and_update_repairs_it() {
    let _one = ONE_COPY_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    build_the_generator_here();
    let built = artifacts();
    let copy = sample_copy("drift", 1);

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

    // Three kinds of drift at once (each verify and update builds the
    // copy's crates again, so one round checks all three): a hand edit in
    // generated/, a hand-widened RBAC rule (the RBAC is generated from the
    // code), and an API field change, which must reach the CRD schema.
    let pod = copy.join("generated/src/core/v1/pod.rs");
    let original = std::fs::read_to_string(&pod).unwrap();
    std::fs::write(
        &pod,
        original.replace("The shared informer", "The common informer"),
    )
    .unwrap();
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
    for stale in [
        "generated/src/core/v1/pod.rs (differs)",
        "config/200-clusterrole.yaml is stale",
        "config/300-simpledeployment.yaml (differs from the kind and its markers)",
        "run hack/update-codegen.sh",
    ] {
        assert!(run.stderr.contains(stale), "{stale}:\n{}", run.stderr);
    }
    assert!(
        !run.stderr.contains("300-addressableservice.yaml"),
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
    assert_eq!(std::fs::read_to_string(&role).unwrap(), generated);
    let crd = std::fs::read_to_string(copy.join("config/300-simpledeployment.yaml")).unwrap();
    assert!(
        crd.contains("                paused:\n                  description: Stop rolling out new pods.\n"),
        "{crd}"
    );
    assert!(script(&copy, "verify-codegen.sh").ok);

    // Nothing changed, nothing written: a generator that rewrote an
    // unchanged file would make cargo rebuild everything that includes it.
    let before = modification_times(&copy);
    let run = script(&copy, "update-codegen.sh");
    assert!(run.ok, "{}", run.stderr);
    let after = modification_times(&copy);
    let touched: Vec<&String> = after
        .iter()
        .filter(|(file, time)| before.get(*file) != Some(time))
        .map(|(file, _)| file)
        .collect();
    assert!(
        touched.is_empty(),
        "an update with nothing to change rewrote {touched:?}"
    );

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

    assert_only_own_crates_compiled(&copy, &built);
    std::fs::remove_dir_all(&copy).unwrap();
}

#[test]
fn the_out_of_tree_example_builds_and_passes_its_tests() {
    let _one = ONE_COPY_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let built = artifacts();
    let example = repo_root().join("examples/out-of-tree");
    // --locked: its Cargo.lock is checked in and must not need a change.
    let run = cargo(&example, &["test", "--locked"]);
    assert!(
        run.ok,
        "{}{}\nIf the framework's dependencies changed, refresh the example's lock file: \
         (cd examples/out-of-tree && cargo update --workspace)",
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
    let crds = run.stdout;
    // Cargo names a path crate outside the workspace root by its absolute
    // path, so the example (unlike the copies, whose framework folders are
    // links) gets the framework's crates built for it, under other names
    // than this workspace's: once, and again when the framework changes.
    // Every other crate comes from this workspace's build.
    let framework: BTreeSet<String> = own_crates(&repo_root())
        .into_iter()
        .filter(|name| name.starts_with("kinject_"))
        .collect();
    assert_only_compiled(&example, &built, &own_crates(&example), &framework);
    the_readmes_commands_run(&crds);
}

/// `kubectl --kubeconfig <kubeconfig> <args>` with `stdin`, as the example's
/// README types it; its output, or a failure naming the command.
fn kubectl(kubeconfig: &std::path::Path, args: &[&str], stdin: &str) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("kubectl runs (the README's commands need it)");
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "kubectl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The example README's commands, as written, against the in-memory API
/// server it names: the CRDs applied with kubectl, the namespace created,
/// the greeter run with `SYSTEM_NAMESPACE`, and a Greeting published in its
/// ConfigMap.
fn the_readmes_commands_run(crds: &str) {
    if !installed("kubectl", "the out-of-tree README's commands") {
        return;
    }
    let dir = scratch().join("out-of-tree-readme");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    // `cargo test --workspace` built the server beside this test; a run of
    // this test alone builds it the same way (`-p kinject-testenv` would
    // resolve fewer features and build kube again).
    let mut testenv = build_dir().join("debug").join("kinject-testenv");
    if !testenv.exists() {
        let built = cargo(&repo_root(), &["test", "-q", "--workspace", "--no-run"]);
        assert!(built.ok, "{}", built.stderr);
        testenv = scratch().join("target").join("debug").join("kinject-testenv");
    }
    let bin = scratch().join("target").join("debug");
    let _server = Running(
        std::process::Command::new(&testenv)
            .arg("serve")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let waited = std::time::Instant::now();
    while !kubeconfig.exists() {
        assert!(
            waited.elapsed().as_secs() < 30,
            "testenv serve wrote no kubeconfig"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    kubectl(&kubeconfig, &["apply", "-f", "-"], crds);
    kubectl(&kubeconfig, &["create", "namespace", "greeter"], "");
    let log = dir.join("greeter.log");
    let _greeter = Running(
        std::process::Command::new(bin.join("greeter"))
            .env("SYSTEM_NAMESPACE", "greeter")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(dir.join("greeter.stderr")).unwrap())
            .spawn()
            .unwrap(),
    );
    kubectl(
        &kubeconfig,
        &["apply", "-f", "-"],
        "apiVersion: hello.example.com/v1alpha1\nkind: Greeting\nmetadata:\n  name: hi\n  namespace: default\nspec:\n  message: Hello from the README\n",
    );
    let waited = std::time::Instant::now();
    loop {
        let published = std::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args([
                "get",
                "configmap",
                "hi",
                "-n",
                "default",
                "-o",
                "jsonpath={.data.message}",
            ])
            .output()
            .unwrap();
        if String::from_utf8_lossy(&published.stdout) == "Hello from the README" {
            break;
        }
        assert!(
            waited.elapsed().as_secs() < 60,
            "the greeter published no ConfigMap; its log: {}",
            log.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// The copy's manifest is this workspace's minus the framework's members:
/// the settings that decide whether two workspaces share a build (dependency
/// versions and features, profiles, lints, the framework's paths relative to
/// the root) are the same by construction.
#[test]
fn a_copy_keeps_the_workspace_settings() {
    let root = repo_root();
    let copy: toml::Table = copy_manifest(&root, 1).parse().unwrap();
    let original: toml::Table = std::fs::read_to_string(root.join("Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    // The framework's crates and every dependency build as here; the copy's
    // own crates as nowhere else. Only the `kinject` command, which no copy
    // builds, loses its setting.
    let (copied, here) = (
        copy["profile"]["dev"]["package"].as_table().unwrap(),
        original["profile"]["dev"]["package"].as_table().unwrap(),
    );
    for (package, settings) in here {
        let want = (package != "kinject-cli").then_some(settings);
        assert_eq!(copied.get(package), want, "{package}");
    }
    assert_eq!(copied["apis"]["debug"].as_str(), Some("line-tables-only"));
    assert_eq!(copied["controller"]["codegen-units"].as_integer(), Some(255));
    let other: toml::Table = copy_manifest(&root, 2).parse().unwrap();
    assert_ne!(
        other["profile"]["dev"]["package"]["apis"], copied["apis"],
        "two kinds of copy build their crates apart"
    );
    assert_eq!(copy["workspace"]["lints"], original["workspace"]["lints"]);
    assert_eq!(
        copy["workspace"]["dependencies"],
        original["workspace"]["dependencies"]
    );
    let members: Vec<&str> = copy["workspace"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    assert!(
        members.contains(&"reconcilers") && members.contains(&"cmd/codegen"),
        "{members:?}"
    );
    assert!(!members.iter().any(|m| m.starts_with("pkg/")), "{members:?}");
    assert_eq!(
        compiled_crate(&OsString::from("libkube_client-1f2e3d.rlib")),
        "kube_client"
    );
    assert_eq!(compiled_crate(&OsString::from("e2e-0a1b2c.d")), "e2e");
    assert_eq!(compiled_crate(&OsString::from("schema-0a1b2c")), "schema");
}
