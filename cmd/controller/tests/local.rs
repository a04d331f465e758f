//! The local job as a newcomer first runs it (`cargo run -p controller
//! --example local`): the controller and the webhook in one process over the
//! in-memory API server with `config/` applied. A healthy start converges the
//! example objects and logs not one WARN or ERROR line.
//!
//! **Why it takes about 5 s warm:** each test starts the local job and waits,
//! in real time, for the examples (or the workloads) to converge.
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
    start_with(kubeconfig, &[])
}

fn start_with(kubeconfig: &Path, args: &[&str]) -> Job {
    let mut child = Command::new(local_job())
        .args(args)
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
    // Debug, live, as docs/operations.md (Logs) promises: every reconcile comes back.
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
    each_line_names_its_component(&lines);
    assert!(
        lines
            .iter()
            .any(|l| l.contains("Reconciled every key queued at start once")),
        "the log was not captured, so its silence proves nothing:\n{}",
        lines.join("\n")
    );
}

/// The controller runs as its service account, so a rule taken out of its
/// generated ClusterRole is refused as in a cluster, and the refusal is in
/// its log with kube-apiserver's words: who, which verb, which resource.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_missing_from_the_rbac_is_refused_and_logged() {
    use k8s_openapi::api::rbac::v1::ClusterRole;

    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("local-rbac-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    let job = start(&kubeconfig);
    let client = client(&kubeconfig).await;
    until("the examples to become Ready", &job, || async {
        both_ready(&client).await.then_some(())
    })
    .await;
    let roles = Api::<ClusterRole>::all(client.clone());
    let mut role = roles.get("knative-samples-controller").await.unwrap();
    role.rules.as_mut().unwrap().retain(|rule| {
        !rule
            .resources
            .iter()
            .flatten()
            .any(|r| r == "addressableservices/status")
    });
    roles
        .replace("knative-samples-controller", &Default::default(), &role)
        .await
        .unwrap();
    let moved = serde_json::json!({"spec": {"serviceName": "no-such-service"}});
    Api::<AddressableService>::namespaced(client.clone(), "knative-samples")
        .patch(
            "make-it-addressable",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&moved),
        )
        .await
        .unwrap();
    let refusal = "User \\\"system:serviceaccount:knative-samples:controller\\\" cannot update resource \\\"addressableservices/status\\\"";
    until("the refusal to be logged", &job, || async {
        let lines = job.lines.lock().unwrap().clone();
        lines.into_iter().find(|line| line.contains(refusal))
    })
    .await;
}

/// `--replicas 2` runs two controllers, as a Deployment of two pods: each
/// keeps a member lease beside the bucket leases, the buckets are led once
/// each, and the examples converge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_share_the_buckets_on_the_local_cluster() {
    use k8s_openapi::api::coordination::v1::Lease;

    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("local-replicas-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    let job = start_with(&kubeconfig, &["--replicas", "2"]);
    let client = client(&kubeconfig).await;
    until("the examples to become Ready", &job, || async {
        both_ready(&client).await.then_some(())
    })
    .await;
    let leases = Api::<Lease>::namespaced(client.clone(), "knative-samples");
    let (members, buckets) = until("both replicas' member leases", &job, || async {
        let names: Vec<(String, String)> = leases
            .list(&Default::default())
            .await
            .ok()?
            .items
            .into_iter()
            .filter_map(|l| {
                let name = l.metadata.name?;
                let holder = l.spec?.holder_identity.unwrap_or_default();
                name.starts_with("controller.").then_some((name, holder))
            })
            .collect();
        let (members, buckets): (Vec<_>, Vec<_>) =
            names.into_iter().partition(|(n, _)| n.contains(".member-"));
        (members.len() == 2 * buckets.len()).then_some((members, buckets))
    })
    .await;
    let identities: std::collections::BTreeSet<&str> = members.iter().map(|(_, h)| h.as_str()).collect();
    assert_eq!(identities.len(), 2, "two replicas: {members:?}");
    assert!(
        buckets
            .iter()
            .all(|(_, holder)| identities.contains(holder.as_str())),
        "every bucket led by one of them: {buckets:?}"
    );
}

/// One process, two components: each line names the one that wrote it.
fn each_line_names_its_component(lines: &[String]) {
    let logger_of = |needle: &str| -> Vec<String> {
        lines
            .iter()
            .filter(|l| l.contains(needle))
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .map(|v| v["logger"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    for (needle, component) in [
        ("make-it-addressable", "controller"),
        ("Serving admission webhooks over TLS", "webhook"),
        ("Caches synced; starting workers", "controller"),
    ] {
        let loggers = logger_of(needle);
        assert!(
            !loggers.is_empty() && loggers.iter().any(|l| l == component),
            "no line of {needle:?} names the {component}: {loggers:?}"
        );
    }
    let reconciles = logger_of(r#""knative.dev/key":"knative-samples/make-it-addressable""#);
    assert!(
        !reconciles.is_empty() && reconciles.iter().all(|l| l == "controller"),
        "the controller's reconciles are logged as {reconciles:?}"
    );
}

/// Waits for `check` to answer something, polling the API server.
async fn until<T, F>(what: &str, job: &Job, mut check: impl FnMut() -> F) -> T
where
    F: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "{what} did not happen:\n{}",
            job.lines.lock().unwrap().join("\n")
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The pods of `selector` in `default` that are not being deleted.
async fn pods(client: &kube::Client, selector: &str) -> Vec<k8s_openapi::api::core::v1::Pod> {
    Api::<k8s_openapi::api::core::v1::Pod>::namespaced(client.clone(), "default")
        .list(&kube::api::ListParams::default().labels(selector))
        .await
        .map(|list| list.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect()
}

fn pod_ip(pod: &k8s_openapi::api::core::v1::Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.pod_ip.as_deref())
        .unwrap_or_default()
}

/// The local cluster runs workloads as a small cluster does: pods get IPs,
/// a Job's pods run to completion (or fail on request) and the Job says so,
/// a Deployment gets a ReplicaSet and its pods, and scales.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workloads_run_as_in_a_small_cluster() {
    use k8s_openapi::api::batch::v1::Job as BatchJob;

    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("local-workloads-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    let job = start(&kubeconfig);
    let client = client(&kubeconfig).await;
    let post = kube::api::PostParams::default();
    let jobs = Api::<BatchJob>::namespaced(client.clone(), "default");
    let batch = |name: &str, completions: i32, exit_code: &str| {
        serde_json::from_value::<BatchJob>(serde_json::json!({
            "metadata": {"name": name},
            "spec": {"completions": completions, "backoffLimit": 0, "template": {
                "metadata": {"annotations": {"local.kinject.dev/exit-code": exit_code}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "work", "image": "busybox"}]}}},
        }))
        .unwrap()
    };
    until("the API server to answer", &job, || async {
        jobs.create(&post, &batch("count", 2, "0")).await.ok()
    })
    .await;
    jobs.create(&post, &batch("fails", 1, "1")).await.unwrap();
    let condition = |j: &BatchJob, kind: &str| {
        j.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == kind && c.status == "True"))
    };
    let done = until("the Job to complete", &job, || async {
        jobs.get("count").await.ok().filter(|j| condition(j, "Complete"))
    })
    .await;
    assert_eq!(done.status.and_then(|s| s.succeeded), Some(2));
    let ran = pods(&client, "job-name=count").await;
    assert_eq!(ran.len(), 2);
    for pod in &ran {
        assert!(pod_ip(pod).starts_with("10.244."), "{:?}", pod.status);
        assert_eq!(
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded")
        );
    }
    until("the failing Job to fail", &job, || async {
        jobs.get("fails").await.ok().filter(|j| condition(j, "Failed"))
    })
    .await;

    a_deployment_gets_pods_and_scales(&client, &job).await;
}

/// A Deployment of two gets a ReplicaSet and two Running pods, each with an
/// IP of its own, and is available; scaled to one, one pod is left.
async fn a_deployment_gets_pods_and_scales(client: &kube::Client, job: &Job) {
    use k8s_openapi::api::apps::v1::Deployment;

    let post = kube::api::PostParams::default();
    let deployments = Api::<Deployment>::namespaced(client.clone(), "default");
    let web = serde_json::from_value::<Deployment>(serde_json::json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "nginx"}]}}},
    }))
    .unwrap();
    deployments.create(&post, &web).await.unwrap();
    until("the Deployment to be available", job, || async {
        deployments
            .get("web")
            .await
            .ok()
            .filter(|d| d.status.as_ref().and_then(|s| s.available_replicas) == Some(2))
    })
    .await;
    let running = pods(client, "app=web").await;
    assert_eq!(running.len(), 2);
    assert!(running.iter().all(|p| pod_ip(p).starts_with("10.244.")));
    let ips: std::collections::BTreeSet<&str> = running.iter().map(pod_ip).collect();
    assert_eq!(ips.len(), 2, "each pod has an IP of its own");

    let scale = serde_json::json!({"spec": {"replicas": 1}});
    deployments
        .patch(
            "web",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&scale),
        )
        .await
        .unwrap();
    let client_ = client.clone();
    until("the Deployment to scale down", job, || {
        let client = client_.clone();
        async move { (pods(&client, "app=web").await.len() == 1).then_some(()) }
    })
    .await;
}
