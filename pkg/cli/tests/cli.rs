//! `kinject` against real parts: testenv as the API server (with the real
//! kubectl) and Debian's `docker-registry` on loopback. Each test skips with
//! a notice when kubectl or docker-registry is missing, unless `CI` is set
//! (`.ci/run` installs them).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kinject_testenv::TestEnv;

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

fn missing(program: &str) -> bool {
    let absent = Command::new(program).arg("--help").output().is_err();
    assert!(
        !absent || std::env::var_os("CI").is_none(),
        "{program} is not installed but CI is set; .ci/run installs it"
    );
    if absent {
        eprintln!("skipped: {program} is not installed");
    }
    absent
}

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
    if missing("kubectl") {
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
    kinject(&dir, &["uninstall", "--", "--kubeconfig", kubeconfig]);
    assert!(
        env.list_objects("apiextensions.k8s.io", "v1", "customresourcedefinitions", None)
            .is_empty()
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_builds_pushes_and_deploys_by_digest_and_delete_undeploys() {
    if missing("kubectl") || missing("docker-registry") {
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
