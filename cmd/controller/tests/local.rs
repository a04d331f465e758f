//! The local job as a newcomer first runs it (`cargo run -p controller
//! --example local`): the controller and the webhook in one process over the
//! in-memory API server with `config/` applied. A healthy start converges the
//! example objects and logs not one WARN or ERROR line.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use apis::v1alpha1::{AddressableService, SimpleDeployment};
use kinject_runtime::apis::HasStatus;
use kube::Api;
use kube::config::{KubeConfigOptions, Kubeconfig};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The local job's executable, built now if this run of the tests did not
/// build examples (`cargo test --test local`).
fn local_job() -> PathBuf {
    let mut cargo = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cargo
        .current_dir(repo())
        .args(["build", "--quiet", "-p", "controller", "--example", "local"]);
    // The test's own package variables would make cargo see another package.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if [
            "CARGO_MANIFEST_",
            "CARGO_PKG_",
            "CARGO_CRATE_",
            "CARGO_BIN_",
            "CARGO_PRIMARY_PACKAGE",
        ]
        .iter()
        .any(|prefix| name.starts_with(prefix))
        {
            cargo.env_remove(&*name);
        }
    }
    let built = cargo.status().unwrap();
    assert!(built.success(), "building the local job failed");
    // target/debug/deps/local-<hash> → target/debug/examples/local
    let deps = std::env::current_exe().unwrap();
    deps.parent()
        .and_then(Path::parent)
        .unwrap()
        .join("examples")
        .join(format!("local{}", std::env::consts::EXE_SUFFIX))
}

struct Job {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Drop for Job {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(kubeconfig: &Path) -> Job {
    let mut child = Command::new(local_job())
        .args(["--port", "0", "--kubeconfig"])
        .arg(kubeconfig)
        // Other tests may hold the default ports.
        .env("PROBES_PORT", "0")
        .env("METRICS_PROMETHEUS_PORT", "0")
        .env_remove("SYSTEM_NAMESPACE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = Arc::new(Mutex::new(Vec::new()));
    for stream in [
        Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
        Box::new(child.stderr.take().unwrap()),
    ] {
        let lines = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(line);
            }
        });
    }
    Job { child, lines }
}

async fn client(kubeconfig: &Path) -> kube::Client {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !kubeconfig.exists() {
        assert!(Instant::now() < deadline, "the local job wrote no kubeconfig");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let config = kube::Config::from_custom_kubeconfig(
        Kubeconfig::read_from(kubeconfig).unwrap(),
        &KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    kube::Client::try_from(config).unwrap()
}

async fn both_ready(client: &kube::Client) -> bool {
    let asvc = Api::<AddressableService>::namespaced(client.clone(), "knative-samples")
        .get_opt("make-it-addressable")
        .await;
    let sdeploy = Api::<SimpleDeployment>::namespaced(client.clone(), "default")
        .get_opt("example-simple-deployment")
        .await;
    let ready = |status: Option<&kinject_runtime::apis::duck::v1::Status>| {
        status.is_some_and(|s| {
            s.conditions.iter().any(|c| {
                c.type_ == kinject_runtime::apis::ConditionType::READY
                    && c.status == kinject_runtime::apis::ConditionStatus::True
            })
        })
    };
    matches!((asvc, sdeploy), (Ok(Some(a)), Ok(Some(d)))
        if ready(a.status().map(|s| &s.status)) && ready(d.status().map(|s| &s.status)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_start_converges_the_examples_and_logs_no_warning() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("local-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    let job = start(&kubeconfig);
    let client = client(&kubeconfig).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !both_ready(&client).await {
        assert!(
            Instant::now() < deadline,
            "the examples did not become Ready:\n{}",
            job.lines.lock().unwrap().join("\n")
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Debug, live, as the README promises: every reconcile comes back.
    let config_maps =
        Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(client.clone(), "knative-samples");
    let patch = serde_json::json!({"data": {"loglevel.controller": "debug"}});
    config_maps
        .patch(
            "config-logging",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .unwrap();
    let touch = serde_json::json!({"metadata": {"labels": {"touched": "yes"}}});
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        Api::<AddressableService>::namespaced(client.clone(), "knative-samples")
            .patch(
                "make-it-addressable",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&touch),
            )
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let lines = job.lines.lock().unwrap().clone();
        if lines
            .iter()
            .any(|l| l.contains(r#""level":"debug""#) && l.contains("make-it-addressable"))
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "loglevel.controller: debug brought no debug line:\n{}",
            lines.join("\n")
        );
    }
    // A moment more, for what follows readiness (leases, the webhook's
    // configurations), then stop as Ctrl-C does.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let _ = Command::new("kill")
        .args(["-INT", &job.child.id().to_string()])
        .status();
    let mut job = job;
    let exited = job.child.wait().unwrap();
    assert!(exited.success(), "{exited}");
    let lines = job.lines.lock().unwrap().clone();
    let loud: Vec<&String> = lines
        .iter()
        .filter(|line| {
            let level = serde_json::from_str::<serde_json::Value>(line)
                .ok()
                .and_then(|v| v["level"].as_str().map(str::to_owned));
            matches!(
                level.as_deref(),
                Some("warn" | "error" | "fatal" | "panic" | "dpanic")
            )
        })
        .collect();
    assert!(loud.is_empty(), "a healthy start logged:\n{loud:#?}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("Reconciled every key queued at start once")),
        "the log was not captured, so its silence proves nothing:\n{}",
        lines.join("\n")
    );
}
