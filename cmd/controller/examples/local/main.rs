//! The controller against a local, in-memory API server: the main job on a
//! machine without a cluster.
//!
//! ```sh
//! cargo run -p controller --example local [-- --port 6443 --no-kubelet ...]
//! kubectl --kubeconfig .testenv/kubeconfig get asvc,sdeploy -A   # in another shell
//! ```
//!
//! Serves testenv's API server over HTTP on the loopback interface (writing
//! `.testenv/kubeconfig`), applies every manifest in `config/` and
//! `config/samples/` (among them the `webhook` Service the example
//! AddressableService names), and runs the same `sharedmain` as the
//! `controller` binary. It
//! behaves like a small cluster where a bare API server would not: owned
//! objects are garbage-collected when their owner goes (background and
//! foreground, `blockOwnerDeletion`), `kubectl delete namespace` empties and
//! removes a namespace, a stand-in kubelet starts every pod (an IP of
//! 10.244.0.0/16, Running and Ready; a Job's pods run to completion), and
//! Job, ReplicaSet and Deployment controllers create and scale pods
//! ([`workloads`]). It runs the admission webhook too, which testenv calls
//! as kube-apiserver would, so an invalid object is refused at `kubectl
//! apply`. Each of these can be switched off (`--help`). Ctrl-C stops it.

use std::path::{Path, PathBuf};
use std::time::Duration;

mod workloads;

use clap::Parser;
use kinject_sharedmain::{Env, Flags};
use kinject_testenv::{Server, TestEnv};
use tokio_util::sync::CancellationToken;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The YAML files directly in `dir`, in name order.
fn manifests_in(dir: &Path) -> Result<Vec<std::path::PathBuf>, BoxError> {
    let mut manifests = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| format!("reading {}: {e}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|ext| ext == "yaml" || ext == "yml") {
            manifests.push(path);
        }
    }
    manifests.sort();
    Ok(manifests)
}

/// Applies every manifest of `dir` (not of its folders), in name order:
/// namespace, RBAC, CRDs, ConfigMaps, the webhook's Service and
/// configurations, and the Deployments, which this process runs in their
/// stead, so they are marked available. A new manifest needs no list.
fn apply_config(env: &TestEnv, dir: &Path) -> Result<Vec<String>, BoxError> {
    let mut in_process = Vec::new();
    for object in apply_manifests(env, dir)? {
        if object["kind"] == "Deployment" {
            in_process.push(object["metadata"]["name"].as_str().unwrap_or_default().to_owned());
            run_in_process(env, object)?;
        }
    }
    Ok(in_process)
}

/// Creates the objects of every manifest directly in `dir`, in name order,
/// and answers them as created.
fn apply_manifests(env: &TestEnv, dir: &Path) -> Result<Vec<serde_json::Value>, BoxError> {
    let mut created = Vec::new();
    for path in manifests_in(dir)? {
        let text = std::fs::read_to_string(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        created.extend(env.create_from_yaml(&path.display().to_string(), &text)?);
    }
    Ok(created)
}

/// Marks a Deployment of `config/` available, as its one replica is this
/// process: `kubectl get deploy` shows 1/1, not 0/1 forever.
fn run_in_process(env: &TestEnv, mut deployment: serde_json::Value) -> Result<(), BoxError> {
    let replicas = deployment.pointer("/spec/replicas").cloned().unwrap_or(1.into());
    let generation = deployment
        .pointer("/metadata/generation")
        .cloned()
        .unwrap_or(1.into());
    deployment["status"] = serde_json::json!({
        "observedGeneration": generation,
        "replicas": replicas, "updatedReplicas": replicas,
        "readyReplicas": replicas, "availableReplicas": replicas,
        "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                        "message": "Runs in the local job's process."}],
    });
    env.update_status(deployment)?;
    Ok(())
}

/// Applies the example objects of `dir/samples` (one per kind; `hack/new-kind.sh`
/// adds one), once the admission webhook serves, so they are defaulted and
/// validated as in a cluster. config/ holds the `webhook` Service the example
/// AddressableService names.
fn apply_samples(env: &TestEnv, dir: &Path) -> Result<(), BoxError> {
    let samples = dir.join("samples");
    if samples.is_dir() {
        apply_manifests(env, &samples)?;
    }
    Ok(())
}

/// Waits until every webhook of every admission configuration has its
/// caBundle: the webhook then serves, and writes reach it.
async fn webhook_ready(env: &TestEnv) -> Result<(), BoxError> {
    let ready = || {
        ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"]
            .iter()
            .flat_map(|plural| env.list_objects("admissionregistration.k8s.io", "v1", plural, None))
            .flat_map(|configuration| configuration["webhooks"].as_array().cloned().unwrap_or_default())
            .all(|webhook| {
                webhook
                    .pointer("/clientConfig/caBundle")
                    .is_some_and(|ca| ca != "")
            })
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !ready() {
        if tokio::time::Instant::now() > deadline {
            return Err(
                "the webhook did not configure its admission webhooks within 30 s; \
                        run with --no-webhook to go on without it"
                    .into(),
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// The local cluster's switches.
#[derive(Debug, Parser)]
#[command(
    about = "The controller against a local, in-memory API server",
    after_help = "Environment: what the controller reads (`cargo run -p controller -- --help` lists it), \
                  with SYSTEM_NAMESPACE knative-samples unless set."
)]
struct Args {
    /// The API server's port (0 picks a free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Where the API server, the controller's /metrics and its probes listen:
    /// this machine only by default; 0.0.0.0 (or ::) to reach them from others.
    #[arg(long, default_value = "127.0.0.1")]
    address: std::net::IpAddr,
    /// Where to write the kubeconfig for the API server.
    #[arg(long, default_value = ".testenv/kubeconfig")]
    kubeconfig: std::path::PathBuf,
    /// Leave pods Pending, as a cluster without nodes would.
    #[arg(long)]
    no_kubelet: bool,
    /// Leave Jobs, ReplicaSets and Deployments without pods, as a bare API
    /// server does.
    #[arg(long)]
    no_workload_controllers: bool,
    /// Keep owned objects when their owner is deleted, as a bare API server does.
    #[arg(long)]
    no_garbage_collection: bool,
    /// Leave deleted namespaces Terminating, as a bare API server does.
    #[arg(long)]
    no_namespace_deletion: bool,
    /// Run without the admission webhook, so nothing is defaulted or
    /// validated when it is written.
    #[arg(long)]
    no_webhook: bool,
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let args = Args::parse();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let (env, server, kubeconfig, in_process) = serve(&args, &root).await?;

    let shutdown = CancellationToken::new();
    tokio::spawn(workloads::run(
        env.clone(),
        !args.no_kubelet,
        !args.no_workload_controllers,
        in_process,
        shutdown.clone(),
    ));
    tokio::spawn({
        let shutdown = shutdown.clone();
        async move {
            let _ = tokio::signal::ctrl_c().await;
            shutdown.cancel();
        }
    });

    let flags = Flags {
        kubeconfig: Some(kubeconfig.to_string_lossy().into_owned()),
        server: None,
        context: None,
        kube_api_qps: 0.0,
        kube_api_burst: 0,
        disable_ha: false,
        disable_controllers: Vec::new(),
        // A workstation's metrics and probes stay where the API server is.
        bind_address: args.address,
        resync_period: kinject_runtime::informer::DEFAULT_RESYNC_PERIOD,
    };
    let system_namespace = std::env::var("SYSTEM_NAMESPACE").unwrap_or_else(|_| "knative-samples".into());
    let process_env = Env::from_lookup(|name| match name {
        "SYSTEM_NAMESPACE" => Some(system_namespace.clone()),
        _ => std::env::var(name).ok(),
    })?;
    let webhook = if args.no_webhook {
        None
    } else {
        Some(spawn_webhook(&env, &args, &flags, &system_namespace, &shutdown).await?)
    };
    let samples = {
        let (env, config) = (env.clone(), root.join("config"));
        let with_webhook = webhook.is_some();
        tokio::spawn(async move {
            let ready = if with_webhook {
                webhook_ready(&env).await
            } else {
                Ok(())
            };
            let applied = ready.and_then(|()| apply_samples(&env, &config));
            // A sample the API server refused is the user's to see at once.
            if let Err(e) = applied {
                eprintln!("error: applying config/samples: {e}");
            }
        })
    };
    let run = kinject_sharedmain::run(
        "controller",
        &reconcilers::controllers(),
        flags,
        process_env,
        shutdown.clone(),
    )
    .await;
    samples.abort();
    run?;
    if let Some(webhook) = webhook {
        webhook.await??;
    }
    server.shutdown().await;
    Ok(())
}

/// The API server with `config/` applied, serving over loopback, and the
/// kubeconfig written for it.
async fn serve(args: &Args, root: &Path) -> Result<(TestEnv, Server, PathBuf, Vec<String>), BoxError> {
    let env = TestEnv::builder()
        .port(args.port)
        .address(args.address)
        .garbage_collection(!args.no_garbage_collection)
        .namespace_deletion(!args.no_namespace_deletion)
        .build();
    let in_process = apply_config(&env, &root.join("config"))?;
    let server = env.serve().await?;
    let kubeconfig = if args.kubeconfig.is_absolute() {
        args.kubeconfig.clone()
    } else {
        root.join(&args.kubeconfig)
    };
    if let Some(dir) = kubeconfig.parent() {
        std::fs::create_dir_all(dir)?;
    }
    server.write_kubeconfig(&kubeconfig)?;
    eprintln!(
        "API server at {}; kubeconfig written to {}",
        server.url(),
        kubeconfig.display()
    );
    Ok((env, server, kubeconfig, in_process))
}

/// The webhook, as a cluster runs it beside the controller: testenv calls
/// it, as kube-apiserver would, for every write its configurations match, so
/// `kubectl apply` of an invalid object is refused with the field.
async fn spawn_webhook(
    env: &TestEnv,
    args: &Args,
    flags: &Flags,
    system_namespace: &str,
    shutdown: &CancellationToken,
) -> Result<tokio::task::JoinHandle<Result<(), kinject_sharedmain::MainError>>, BoxError> {
    let listener = tokio::net::TcpListener::bind((args.address, 0)).await?;
    env.route_service(system_namespace, "webhook", 443, listener.local_addr()?);
    let webhook_env = Env::from_lookup(|name| match name {
        "SYSTEM_NAMESPACE" => Some(system_namespace.to_owned()),
        // The controller holds the default ports.
        "PROBES_PORT" | "METRICS_PROMETHEUS_PORT" => Some("0".into()),
        _ => std::env::var(name).ok(),
    })?;
    let webhook_flags = kinject_webhook::WebhookFlags {
        common: flags.clone(),
        port: 0,
        drain_period: Duration::ZERO,
        disable_namespace_ownership: false,
    };
    Ok(tokio::spawn(kinject_webhook::run(
        "webhook",
        generated::registry::custom_kinds(),
        webhook_flags,
        webhook_env,
        listener,
        shutdown.clone(),
    )))
}
