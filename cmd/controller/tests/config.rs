//! `config/` is what a cluster gets, whole: `kubectl apply -f config/` on a
//! fresh API server succeeds in one go, client-side and then server-side
//! (the framework's writers never leave a field manager it conflicts with),
//! and the examples in `config/samples/` apply after it. Skips with a notice
//! when kubectl is not installed, unless `CI` or `TESTENV_REQUIRE_KUBECTL` is
//! set: there it fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Whether kubectl is missing, saying so where it is seen: libtest shows a
/// passing test's `eprintln!` to no one, so the notice goes to the process's
/// stderr directly.
fn kubectl_missing() -> bool {
    use std::io::Write as _;
    let missing = Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_err();
    if missing {
        for required in ["TESTENV_REQUIRE_KUBECTL", "CI"] {
            assert!(
                std::env::var_os(required).is_none(),
                "{required} is set but kubectl is not on PATH"
            );
        }
        let _ = writeln!(
            std::io::stderr(),
            "skipped: config/ applied by kubectl (kubectl is not installed)"
        );
    }
    missing
}

fn kubectl(kubeconfig: &Path, cache: &Path, args: &[&str]) -> Output {
    Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(cache)
        .args(args)
        .current_dir(repo())
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_applies_config_whole_client_side_and_server_side() {
    if kubectl_missing() {
        return;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("config-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let env = kinject_testenv::TestEnv::new();
    let server = env.serve().await.unwrap();
    let kubeconfig = dir.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    let cache = dir.join("cache");
    let run = |args: &[&str]| {
        let out = kubectl(&kubeconfig, &cache, args);
        assert!(
            out.status.success(),
            "kubectl {}:\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let applied = run(&["apply", "-f", "config/"]);
    assert!(applied.contains("customresourcedefinition"), "{applied}");
    let again = run(&["apply", "--server-side", "-f", "config/"]);
    assert!(again.contains("serverside-applied"), "{again}");
    run(&["apply", "-f", "config/samples/"]);
    // The examples are not part of what a cluster gets.
    assert!(!applied.contains("make-it-addressable"), "{applied}");
    server.shutdown().await;
}
