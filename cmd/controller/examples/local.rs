//! The controller against a local, in-memory API server: the main job on a
//! machine without a cluster.
//!
//! ```sh
//! cargo run -p controller --example local
//! kubectl --kubeconfig .testenv/kubeconfig get asvc,sdeploy -A   # in another shell
//! ```
//!
//! Serves testenv's API server over HTTP (writing `.testenv/kubeconfig`),
//! applies `config/` (namespace, CRDs, ConfigMaps and both examples) plus the
//! `webhook` Service the example AddressableService names, and runs the same
//! `sharedmain` as the `controller` binary. Since there is no kubelet, this
//! process marks the pods the SimpleDeployment creates Running and Ready, so
//! both examples become Ready. Ctrl-C stops it.

use std::path::Path;
use std::time::Duration;

use kinject_sharedmain::{Env, Flags, controller};
use kinject_testenv::TestEnv;
use reconcilers::{addressableservice, simpledeployment};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const CONFIG: [&str; 8] = [
    "100-namespace.yaml",
    "300-addressableservice.yaml",
    "300-simpledeployment.yaml",
    "config-logging.yaml",
    "config-leader-election.yaml",
    "config-observability.yaml",
    "example-addressable-service.yaml",
    "example-simple-deployment.yaml",
];

fn apply(env: &TestEnv, dir: &Path) -> Result<(), BoxError> {
    for file in CONFIG {
        let path = dir.join(file);
        let text = std::fs::read_to_string(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        env.create_from_yaml(&path.display().to_string(), &text)?;
    }
    env.create_object(json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "webhook", "namespace": "knative-samples"},
        "spec": {"ports": [{"port": 443, "targetPort": 8443}]}}))?;
    Ok(())
}

/// Stands in for the kubelet: pods become Running and Ready.
async fn kubelet(env: TestEnv, stop: CancellationToken) {
    while !stop.is_cancelled() {
        for namespace in ["default", "knative-samples"] {
            for mut pod in env.list_objects("", "v1", "pods", Some(namespace)) {
                if pod.pointer("/status/phase") != Some(&Value::String("Running".into())) {
                    pod["status"] =
                        json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]});
                    let _ = env.update_status(pod);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let env = TestEnv::new();
    apply(&env, &root.join("config"))?;
    let server = env.serve().await?;
    let kubeconfig = root.join(".testenv/kubeconfig");
    if let Some(dir) = kubeconfig.parent() {
        std::fs::create_dir_all(dir)?;
    }
    server.write_kubeconfig(&kubeconfig)?;
    eprintln!(
        "API server at {}; kubeconfig written to {}",
        server.url(),
        kubeconfig.display()
    );

    let shutdown = CancellationToken::new();
    tokio::spawn(kubelet(env.clone(), shutdown.clone()));
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
        // A workstation's metrics and probes stay on the loopback interface.
        bind_address: std::net::Ipv4Addr::LOCALHOST.into(),
    };
    let process_env = Env::from_lookup(|name| match name {
        "SYSTEM_NAMESPACE" => Some(std::env::var(name).unwrap_or_else(|_| "knative-samples".into())),
        _ => std::env::var(name).ok(),
    })?;
    kinject_sharedmain::run(
        "controller",
        &[
            controller!(addressableservice::new_controller),
            controller!(simpledeployment::new_controller),
        ],
        flags,
        process_env,
        shutdown.clone(),
    )
    .await?;
    server.shutdown().await;
    Ok(())
}
