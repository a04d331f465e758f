//! `kinject` against real parts: testenv as the API server (with the real
//! kubectl) and Debian's `docker-registry` on loopback. Each test skips with
//! a notice when kubectl or docker-registry is missing, unless `CI` is set
//! (`.ci/run` installs them).
//!
//! **Why it takes about 40 s warm (76 s in a fresh clone):** the init test
//! builds and tests the project it writes (its own crates only), twice: as
//! scaffolded, and with a Widget that runs a Job; it lints the project as
//! its CI does, runs its `hack/run-local.sh` until the Job is complete and
//! the Widget Ready, and ships it as the tutorial's step 7 does: two debug
//! images built, compressed and pushed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kinject_testenv::TestEnv;

// Scratch projects that build in this workspace's build directory.
#[path = "../../../codegen/tests/integration/copies/mod.rs"]
mod copies;

const CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
";

const APP: &str = "apiVersion: v1
kind: Namespace
metadata:
  name: hello-system
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: hello
  namespace: hello-system
spec:
  selector:
    matchLabels: {app: hello}
  template:
    metadata:
      labels: {app: hello}
    spec:
      containers:
        - name: hello
          # Built, pushed and replaced by its digest at apply time.
          image: kinject://hello
";

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A project of one binary, `hello`, with the manifests that deploy it.
fn project(dir: &Path) {
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::create_dir_all(dir.join("config")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        "[package]\nname = \"hello\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n[workspace]\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("src/main.rs"),
        "fn main() {\n    println!(\"hello\");\n}\n",
    )
    .unwrap();
    std::fs::write(dir.join("config/100-app.yaml"), APP).unwrap();
    std::fs::write(dir.join("config/300-widget.yaml"), CRD).unwrap();
}

fn kinject(dir: &Path, args: &[&str]) -> Output {
    let output = Command::new(env!("CARGO_BIN_EXE_kinject"))
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "kinject {args:?}:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn install_applies_the_crds_alone_and_uninstall_removes_them() {
    if !copies::installed("kubectl", "this test") {
        return;
    }
    let dir = scratch("install");
    project(&dir);
    let env = TestEnv::new();
    let server = env.serve().await.unwrap();
    let kubeconfig = dir.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    let kubeconfig = kubeconfig.to_str().unwrap();

    kinject(&dir, &["install", "--", "--kubeconfig", kubeconfig]);
    let crds = env.list_objects("apiextensions.k8s.io", "v1", "customresourcedefinitions", None);
    assert_eq!(crds.len(), 1, "{crds:?}");
    assert!(
        env.get_object("", "v1", "namespaces", None, "hello-system")
            .is_none(),
        "install applies the CRDs alone"
    );
    let removed = kinject(&dir, &["uninstall", "--", "--kubeconfig", kubeconfig]);
    let said = String::from_utf8_lossy(&removed.stdout).into_owned();
    assert!(said.contains("widgets.example.com\" deleted"), "{said}");
    assert!(
        env.list_objects("apiextensions.k8s.io", "v1", "customresourcedefinitions", None)
            .is_empty()
    );
    // Again, with nothing left: it says so rather than nothing at all.
    let again = kinject(&dir, &["uninstall", "--", "--kubeconfig", kubeconfig]);
    let said = String::from_utf8_lossy(&again.stdout).into_owned();
    assert!(
        said.contains("nothing to remove: none of the CustomResourceDefinitions of"),
        "{said}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_builds_pushes_and_deploys_by_digest_and_delete_undeploys() {
    if !copies::installed("kubectl", "this test") || !copies::installed("docker-registry", "this test") {
        return;
    }
    let dir = scratch("apply");
    project(&dir);
    let registry = kinject_image::LocalRegistry::start(&dir).unwrap();
    let address = registry.address().to_owned();
    // kubectl delete waits for the namespace to go, as a cluster's namespace
    // controller makes it go.
    let env = TestEnv::builder().namespace_deletion(true).build();
    let server = env.serve().await.unwrap();
    let kubeconfig = dir.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    let kubeconfig = kubeconfig.to_str().unwrap();

    let output = kinject(
        &dir,
        &[
            "apply",
            "--repo",
            &format!("{address}/team"),
            "--debug",
            "--",
            "--kubeconfig",
            kubeconfig,
        ],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("built the image of hello"), "{stderr}");
    let deployment = env
        .get_object("apps", "v1", "deployments", Some("hello-system"), "hello")
        .expect("the Deployment was applied");
    let image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap();
    assert!(
        image.starts_with(&format!("{address}/team/hello@sha256:")),
        "{image}"
    );
    assert!(stderr.contains(&format!("pushed {image}")), "{stderr}");

    kinject(&dir, &["delete", "--", "--kubeconfig", kubeconfig]);
    assert!(
        env.get_object("apps", "v1", "deployments", Some("hello-system"), "hello")
            .is_none()
    );
    server.shutdown().await;
}

/// The packages `kinject init` wrote: its workspace's members (the
/// framework's linked folders are members too, but not listed).
fn project_packages(project: &Path) -> Vec<String> {
    let manifest: toml::Table = std::fs::read_to_string(project.join("Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    copies::member_packages(project, manifest["workspace"]["members"].as_array().unwrap())
}

/// The new project's manifest, made to share this workspace's build: the
/// framework's folders are links inside the project (cargo names a path
/// crate's build by its path from the workspace root, so only there do they
/// match this workspace's build), which makes the framework's crates inherit
/// from the project's workspace; they get the rest of this workspace's
/// settings (dependencies the project does not name, package fields, lints,
/// profiles), and the project's packages a profile setting of their own so
/// their builds are not taken for the sample app's crates of the same names.
/// The dependencies the project does name are the workspace's already
/// (`init`'s unit tests check it).
fn sharing_manifest(root: &Path, project: &Path) -> String {
    let read = |dir: &Path| -> toml::Table {
        std::fs::read_to_string(dir.join("Cargo.toml"))
            .unwrap()
            .parse()
            .unwrap()
    };
    let (ours, mut theirs) = (read(root), read(project));
    let workspace = theirs["workspace"].as_table_mut().unwrap();
    let dependencies = workspace["dependencies"].as_table_mut().unwrap();
    for (name, spec) in ours["workspace"]["dependencies"].as_table().unwrap() {
        dependencies.entry(name.clone()).or_insert_with(|| spec.clone());
    }
    for key in ["package", "lints"] {
        workspace.insert(key.into(), ours["workspace"][key].clone());
    }
    // Each of the project's packages gets a profile setting of its own, so
    // its build is not taken for the sample app's crate of the same name
    // (see `copies::copy_manifest`).
    let mut profile = ours["profile"].clone();
    let packages = profile["dev"]["package"].as_table_mut().unwrap();
    for package in project_packages(project) {
        let mut own = toml::Table::new();
        own.insert("debug".into(), "line-tables-only".into());
        own.insert("codegen-units".into(), 253.into());
        packages.insert(package, own.into());
    }
    theirs.insert("profile".into(), profile);
    toml::to_string(&theirs).unwrap()
}

/// `kinject init` (with `init_args` after the directory) of a project in the
/// scratch directory, taking the framework through links to this checkout,
/// with this workspace's lock file and a manifest that shares its build.
fn init_project(root: &Path, init_args: &[&str]) -> PathBuf {
    let project = copies::scratch().join("init/shop");
    let _ = std::fs::remove_dir_all(&project);
    std::fs::create_dir_all(&project).unwrap();
    copies::link_framework(root, &project);
    let path = project.to_string_lossy().into_owned();
    let mut args = vec!["init", path.as_str()];
    args.extend(init_args);
    args.extend(["--framework-path", path.as_str()]);
    kinject(&project, &args);
    std::fs::copy(root.join("Cargo.lock"), project.join("Cargo.lock")).unwrap();
    std::fs::write(project.join("Cargo.toml"), sharing_manifest(root, &project)).unwrap();
    project
}

/// kubebuilder's quick start, here, as the tutorial's step 8 types it:
/// `init` a project, `create api` a kind (a field of its own, Jobs it owns),
/// `create controller --for Pod`, generate, and the project's tests and
/// generated-code check pass with no hand edit. The project takes the
/// framework by path (links to this checkout) and builds in this
/// workspace's build directory, so only its own crates compile, which the
/// test checks.
#[test]
fn init_starts_a_project_that_takes_a_kind_and_passes_its_tests() {
    let root = copies::repo_root();
    let commands = copies::tutorial_commands("<!-- tested in pkg/cli/tests/cli.rs -->");
    let init: Vec<&str> = commands[0].split_whitespace().collect();
    assert_eq!(
        init[..2],
        ["kinject", "init"],
        "the tutorial's block starts with init: {commands:?}"
    );
    let project = init_project(&root, &init[3..]);
    // The generator runs alone (`cargo run -p codegen`), resolving fewer
    // features of its dependencies than the whole workspace: its build here
    // is the one the project's generator shares.
    copies::build_the_generator_here();
    let before = copies::artifacts();

    // The project's packages, where the tutorial says `--workspace`: the
    // framework's folders linked into it are members here, and their own
    // tests are not the project's.
    let packages = project_packages(&project);
    let mut project_tests = vec!["test", "--offline"];
    for package in &packages {
        project_tests.extend(["-p", package.as_str()]);
    }
    let mut tested = String::new();
    for command in &commands[1..] {
        let words: Vec<&str> = command.split_whitespace().collect();
        let run = match words.as_slice() {
            ["cd", ..] => continue,
            ["kinject", args @ ..] => {
                let mut kinject = Command::new(env!("CARGO_BIN_EXE_kinject"));
                kinject.current_dir(&project).args(args);
                copies::run(kinject)
            }
            [script] if script.starts_with("hack/") => copies::script(&project, &script["hack/".len()..]),
            ["cargo", "test", "--workspace"] => copies::cargo(&project, &project_tests),
            _ => panic!("the tutorial's block has a command this test cannot run: {command}"),
        };
        assert!(
            run.ok,
            "{command} failed in the new project:\n{}\n{}",
            run.stdout, run.stderr
        );
        tested.push_str(&run.stdout);
    }
    let verified = copies::script(&project, "verify-codegen.sh");
    assert!(verified.ok, "verify-codegen:\n{}", verified.stderr);
    for test in [
        "widget::a_valid_object_becomes_ready ... ok",
        "pod::a_stored_object_is_reconciled_with_no_write ... ok",
    ] {
        assert!(tested.contains(test), "{test}:\n{tested}");
    }
    the_scaffold_wrote_what_the_tutorial_says(&project);
    the_user_writes_a_widget_that_runs_a_job(&project, &packages);
    if copies::installed("kubectl", "hack/run-local.sh and the tutorial's step 7") {
        run_local_runs_the_controller(&project);
        if copies::installed("docker-registry", "the tutorial's step 7") {
            step_6_ships_the_project(&project);
        }
    }
    copies::assert_only_own_crates_compiled(&project, &before);
    the_projects_lints_pass(&project, &packages);
}

/// The files `create api` and `update-codegen.sh` write, with the fields
/// in the example object, the owned kinds' writes in the generated RBAC and
/// the project's own namespace in place of the sample's.
fn the_scaffold_wrote_what_the_tutorial_says(project: &Path) {
    for file in [
        "apis/src/shop/v1alpha1/widget_types.rs",
        "reconcilers/src/widget.rs",
        "reconcilers/src/pod.rs",
        "config/samples/shop_v1alpha1_widget.yaml",
        "config/300-widget.yaml",
        "config/200-clusterrole.yaml",
    ] {
        assert!(project.join(file).is_file(), "{file} was not written");
    }
    let sample = std::fs::read_to_string(project.join("config/samples/shop_v1alpha1_widget.yaml")).unwrap();
    assert!(
        sample.ends_with("spec:\n  replicas: 1\n  jobTemplate: {}\n"),
        "{sample}"
    );
    let rules = std::fs::read_to_string(project.join("config/200-clusterrole.yaml")).unwrap();
    assert!(
        rules.contains(
            "resources: [\"jobs\"]\n    verbs: [\"list\", \"watch\", \"create\", \"update\", \"delete\"]"
        ),
        "{rules}"
    );
    let namespace = std::fs::read_to_string(project.join("config/100-namespace.yaml")).unwrap();
    assert!(
        namespace.contains("name: shop") && !namespace.contains("knative"),
        "{namespace}"
    );
}

/// What a user writes next, in the scaffold's place: the Widget runs its
/// `jobTemplate` as a Job it owns and is Ready once the Job completed
/// (`tests/fixtures/widget-runs-a-job`), with table rows of its own. The
/// project's CI then holds, step by step as its `.ci/run` takes them over
/// the project's packages: generation, tests, formatting, lints, the
/// generated-code check and its manifests against its CRDs.
fn the_user_writes_a_widget_that_runs_a_job(project: &Path, packages: &[String]) {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/widget-runs-a-job");
    for (fixture, to) in [
        ("widget.rs", "reconcilers/src/widget.rs"),
        ("table.rs", "reconcilers/tests/tables/widget.rs"),
        ("sample.yaml", "config/samples/shop_v1alpha1_widget.yaml"),
    ] {
        std::fs::copy(fixtures.join(fixture), project.join(to)).unwrap();
    }
    let generated = copies::script(project, "update-codegen.sh");
    assert!(generated.ok, "update-codegen:\n{}", generated.stderr);
    let each = |verb: &[&'static str]| -> Vec<&str> {
        let mut args = verb.to_vec();
        for package in packages {
            args.extend(["-p", package.as_str()]);
        }
        args
    };
    let tests = copies::cargo(project, &each(&["test", "--offline"]));
    assert!(
        tests.ok,
        "the project's tests:\n{}\n{}",
        tests.stdout, tests.stderr
    );
    for test in [
        "widget::a_new_widget_gets_its_job ... ok",
        "widget::a_complete_job_makes_it_ready ... ok",
    ] {
        assert!(tests.stdout.contains(test), "{test}:\n{}", tests.stdout);
    }
    let formatted = copies::cargo(project, &each(&["fmt", "--check"]));
    assert!(
        formatted.ok,
        "cargo fmt --check:\n{}{}",
        formatted.stdout, formatted.stderr
    );
    let verified = copies::script(project, "verify-codegen.sh");
    assert!(verified.ok, "verify-codegen:\n{}", verified.stderr);
    // Its manifests against its CRDs, as `kinject validate` checks them.
    let validated = copies::cargo(
        project,
        &[
            "run",
            "--offline",
            "--quiet",
            "-p",
            "schema",
            "--",
            "validate",
            "-f",
            "config",
            "-f",
            "config/samples",
        ],
    );
    assert!(
        validated.ok && validated.stderr.contains("objects valid against 1 CRDs"),
        "validate:\n{}{}",
        validated.stdout,
        validated.stderr
    );
}

/// The project's `.ci/run` lint step over its packages, with its own lints
/// (the scaffolded tests with rows added among them). Last: its check
/// builds are the ones this workspace's clippy makes afterwards, which the
/// shared-build check before it would take for builds made twice.
fn the_projects_lints_pass(project: &Path, packages: &[String]) {
    let mut lints = vec!["clippy", "--offline", "--all-targets"];
    for package in packages {
        lints.extend(["-p", package.as_str()]);
    }
    lints.extend(["--", "-D", "warnings"]);
    let linted = copies::cargo(project, &lints);
    assert!(linted.ok, "cargo clippy:\n{}", linted.stderr);
}

/// A command line in `project` with the `kinject` under test first on
/// `PATH`, as `cargo install` would put it there.
fn with_kinject_on_path(line: &str) -> String {
    let bin = Path::new(env!("CARGO_BIN_EXE_kinject")).parent().unwrap();
    format!("PATH={}:\"$PATH\" {line}", bin.display())
}

/// Polls `kubectl <args>` against the project's local cluster until its
/// output is `want`.
fn until_kubectl(project: &Path, args: &str, want: &str, log: &Path) {
    let line = format!("kubectl --kubeconfig .testenv/kubeconfig {args}");
    copies::until_output(project, &line, log, |out| out.trim() == want);
}

/// `hack/run-local.sh` in the new project, with no `kinject` on `PATH`: the
/// local cluster with `config/` applied and the controller on it as its
/// service account; the example Widget's Job completes and the Widget
/// becomes Ready, Ctrl-C stops everything cleanly, and nothing is logged at
/// WARN or ERROR (so no RBAC refusal either).
fn run_local_runs_the_controller(project: &Path) {
    let log = project.join("run-local.log");
    // The controller's default ports may be held by another test.
    let line = "PROBES_PORT=0 METRICS_PROMETHEUS_PORT=0 hack/run-local.sh";
    let mut running = copies::background(project, line, &log);
    copies::until_logged(&mut running, &log, |text| text.contains("config/ applied"));
    // It applies config/samples/ itself, once the webhook serves; the
    // Widget's Job runs to completion on the local cluster's kubelet.
    until_kubectl(
        project,
        r#"get job example-widget-run -o 'jsonpath={.status.conditions[?(@.type=="Complete")].status}'"#,
        "True",
        &log,
    );
    until_kubectl(
        project,
        r#"get widget example-widget -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}'"#,
        "True",
        &log,
    );
    assert!(
        copies::interrupt(&mut running),
        "Ctrl-C did not stop run-local.sh cleanly:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let text = std::fs::read_to_string(&log).unwrap();
    let loud = copies::loud_lines(&text);
    assert!(loud.is_empty(), "run-local.sh logged:\n{loud:#?}");
}

/// The tutorial's step 7, as written, in the new project: a registry and
/// the local API server in the background, the CRDs installed, both
/// binaries built, pushed and deployed by digest, and undeployed.
fn step_6_ships_the_project(project: &Path) {
    let commands =
        copies::tutorial_commands("<!-- tested in pkg/cli/tests/cli.rs, in the project of step 8 -->");
    let mut background = Vec::new();
    let mut printed = String::new();
    for (number, command) in commands.iter().enumerate() {
        let line = with_kinject_on_path(command);
        if let Some(line) = line.strip_suffix(" &") {
            // Ready once it says where it serves, or failed once it exits.
            let log = project.join(format!("step-6-{number}.log"));
            let mut running = copies::background(project, line, &log);
            copies::until_logged(&mut running, &log, |text| !text.is_empty());
            std::thread::sleep(std::time::Duration::from_millis(100));
            assert!(
                running.0.try_wait().unwrap().is_none(),
                "{command} exited:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            background.push((command, running, log));
            continue;
        }
        let run = copies::shell(project, &line);
        assert!(run.ok, "{command}:\n{}{}", run.stdout, run.stderr);
        printed.push_str(&run.stdout);
        printed.push_str(&run.stderr);
    }
    for binary in ["controller", "webhook"] {
        let pushed = format!("pushed 127.0.0.1:5000/{binary}@sha256:");
        assert!(printed.contains(&pushed), "{pushed}:\n{printed}");
        let deployed = format!("127.0.0.1:5000/{binary}@sha256:");
        assert!(
            printed.matches(&deployed).count() >= 2,
            "{binary} was not deployed by digest:\n{printed}"
        );
    }
    // Undeployed: the namespace went, and every Deployment in it.
    let left = copies::shell(
        project,
        "kubectl --kubeconfig .testenv/kubeconfig get deployments -A -o name",
    );
    assert!(
        left.ok && left.stdout.trim().is_empty(),
        "{}{}",
        left.stdout,
        left.stderr
    );
    for (command, mut running, log) in background {
        assert!(
            copies::interrupt(&mut running),
            "Ctrl-C did not stop {command} cleanly:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }
}

/// `init` refuses a directory that already holds one of its files, and
/// writes nothing there.
#[test]
fn init_changes_no_file_of_an_existing_project() {
    let dir = scratch("init-taken");
    std::fs::write(dir.join("README.md"), "mine\n").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_kinject"))
        .args([
            "init",
            "--group",
            "shop.example.com",
            "--framework-version",
            "0.1.0",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("already holds README.md"), "{stderr}");
    assert_eq!(std::fs::read_to_string(dir.join("README.md")).unwrap(), "mine\n");
    assert!(!dir.join("Cargo.toml").exists());
}

/// `kinject validate` is the project's `cargo run -p schema -- validate`,
/// every flag passed on; a refusal (exit 1) fails it with a word on why.
#[test]
fn validate_runs_the_projects_schema_command() {
    let run = |cargo: &str| {
        Command::new(env!("CARGO_BIN_EXE_kinject"))
            .args([
                "validate",
                "-f",
                "config/samples",
                "--old",
                "stored.yaml",
                "--skip-unknown",
            ])
            .env("CARGO", cargo)
            .output()
            .unwrap()
    };
    let passed = run("echo");
    assert!(passed.status.success());
    assert_eq!(
        String::from_utf8_lossy(&passed.stdout),
        "run --quiet --package schema -- validate -f config/samples --old stored.yaml --skip-unknown\n"
    );
    let refused = run("false");
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&refused.stderr)
            .contains("error: the API server would refuse the manifests above"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
}

/// A CRD of `gadgets.example.com` serving v1 and v2, `storage` the one stored.
fn gadget_crd(storage: &str, versions: &[&str]) -> serde_json::Value {
    let versions: Vec<serde_json::Value> = versions
        .iter()
        .map(|v| {
            serde_json::json!({
                "name": v, "served": true, "storage": *v == storage,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
            })
        })
        .collect();
    serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"kind": "Gadget", "listKind": "GadgetList", "plural": "gadgets", "singular": "gadget"},
            "scope": "Namespaced",
            "versions": versions,
        },
    })
}

/// `kinject migrate` after a CRD's storage moved from v1 to v2: stopped by
/// a failed write in the middle, it trims nothing and says to run it again;
/// run again, it rewrites the rest, trims `status.storedVersions` to v2,
/// and v1 can then leave the CRD, which it could not before. No object is
/// lost or changed, and each was rewritten once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(
    clippy::too_many_lines,
    reason = "a scenario test reads best top to bottom, in one function"
)]
async fn migrate_rewrites_every_object_and_can_be_stopped_and_run_again() {
    if !copies::installed("kubectl", "this test") {
        return;
    }
    let dir = scratch("migrate");
    let env = TestEnv::new();
    let server = env.serve().await.unwrap();
    let kubeconfig = dir.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    let kubeconfig = kubeconfig.to_str().unwrap();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_kinject"))
            .args(args)
            .args(["--", "--kubeconfig", kubeconfig])
            .output()
            .unwrap()
    };

    env.create_object(gadget_crd("v1", &["v1", "v2"])).unwrap();
    env.create_object(
        serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}),
    )
    .unwrap();
    let names: Vec<String> = (0..12).map(|i| format!("g-{i:02}")).collect();
    let mut before = std::collections::BTreeMap::new();
    for name in &names {
        let created = env
            .create_object(serde_json::json!({
                "apiVersion": "example.com/v1", "kind": "Gadget",
                "metadata": {"name": name, "namespace": "shop"},
                "spec": {"size": name.len(), "colour": "teal"},
            }))
            .unwrap();
        before.insert(name.clone(), created);
    }
    let crd = |env: &TestEnv| {
        env.get_object(
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            None,
            "gadgets.example.com",
        )
        .unwrap()
    };
    let stored_versions = |env: &TestEnv| crd(env)["status"]["storedVersions"].clone();
    let mut moved = gadget_crd("v2", &["v1", "v2"]);
    moved["metadata"]["resourceVersion"] = crd(&env)["metadata"]["resourceVersion"].clone();
    env.update_object(moved).unwrap();
    assert_eq!(stored_versions(&env), serde_json::json!(["v1", "v2"]));
    let mut dropped = gadget_crd("v2", &["v2"]);
    dropped["metadata"]["resourceVersion"] = crd(&env)["metadata"]["resourceVersion"].clone();
    let refused = env.update_object(dropped.clone()).unwrap_err().to_string();
    assert!(
        refused.contains("status.storedVersions[0]: Invalid value: \"v1\": must appear in spec.versions"),
        "{refused}"
    );

    // Stopped in the middle: one write fails.
    env.react(
        kinject_testenv::Reactor::on("patch", "gadgets")
            .name("g-07")
            .times(1),
    );
    let stopped = run(&["migrate", "gadgets"]);
    let said = String::from_utf8_lossy(&stopped.stderr).into_owned();
    assert!(!stopped.status.success(), "{said}");
    assert!(said.contains("inducing failure for patch gadgets"), "{said}");
    assert!(
        said.contains("run `kinject migrate gadgets` again to finish"),
        "{said}"
    );
    assert_eq!(stored_versions(&env), serde_json::json!(["v1", "v2"]));

    let finished = run(&["migrate", "Gadget"]);
    let said = String::from_utf8_lossy(&finished.stdout).into_owned();
    assert!(
        finished.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&finished.stderr)
    );
    assert!(
        said.contains("gadgets.example.com: 12/12 objects rewritten in v2"),
        "{said}"
    );
    assert!(
        said.contains("status.storedVersions is [v2] (was [v1, v2])"),
        "{said}"
    );
    assert_eq!(stored_versions(&env), serde_json::json!(["v2"]));
    for (name, old) in &before {
        let now = env
            .get_object("example.com", "v2", "gadgets", Some("shop"), name)
            .unwrap();
        assert_eq!(now["spec"], old["spec"], "{name}");
        assert_ne!(
            now["metadata"]["resourceVersion"], old["metadata"]["resourceVersion"],
            "{name} was not rewritten"
        );
    }

    // v1 may leave the CRD now, and the objects stay.
    dropped["metadata"]["resourceVersion"] = crd(&env)["metadata"]["resourceVersion"].clone();
    env.update_object(dropped).unwrap();
    assert_eq!(
        env.list_objects("example.com", "v2", "gadgets", Some("shop"))
            .len(),
        names.len()
    );
    let again = run(&["migrate", "gadgets.example.com"]);
    let said = String::from_utf8_lossy(&again.stdout).into_owned();
    assert!(
        again.status.success() && said.contains("nothing to migrate"),
        "{said}"
    );
    let unknown = run(&["migrate", "doohickeys"]);
    let said = String::from_utf8_lossy(&unknown.stderr).into_owned();
    assert!(
        !unknown.status.success() && said.contains("no CustomResourceDefinition is named \"doohickeys\""),
        "{said}"
    );
    server.shutdown().await;
}
