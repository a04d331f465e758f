#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

//! `hack/update-codegen.sh` and `hack/verify-codegen.sh` on a copy of the
//! repository: verify passes on a fresh copy, fails after a hand edit in
//! `generated/` and after an API field change (naming the stale files and the
//! fix), and update repairs both.
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

struct Run {
    ok: bool,
    stdout: String,
    stderr: String,
}

/// Runs a script of the copy by absolute path from another directory, as a
/// user might.
fn script(copy: &Path, name: &str) -> Run {
    let out = Command::new("bash")
        .arg(copy.join("hack").join(name))
        .current_dir(std::env::temp_dir())
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

#[test]
fn verify_fails_on_drift_and_update_repairs_it() {
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
            .contains("config/300-simpledeployment.yaml (openAPIV3Schema differs)"),
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

    std::fs::remove_dir_all(&copy).unwrap();
}
