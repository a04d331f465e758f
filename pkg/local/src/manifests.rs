//! `config/` and `config/samples/` applied to the local API server, in
//! name order, as `kubectl apply -f config/` would apply them.

use std::path::Path;

use kinject_testenv::TestEnv;
use serde_json::{Value, json};

use crate::error::Error;

/// A Deployment of `config/`, which the local cluster runs in its own
/// process rather than as pods.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct InProcess {
    pub(crate) namespace: String,
    pub(crate) name: String,
    /// The service account its pods run as (`default` when it names none).
    pub(crate) service_account: String,
}

/// Creates the objects of every manifest directly in `dir`, in name order.
fn apply_manifests(env: &TestEnv, dir: &Path) -> Result<Vec<Value>, Error> {
    let mut created = Vec::new();
    let files = kinject_testenv::manifest_files(dir).map_err(|e| Error::Read {
        path: dir.to_owned(),
        message: e.to_string(),
    })?;
    for path in files {
        let text = std::fs::read_to_string(&path).map_err(|e| Error::Read {
            path: path.clone(),
            message: e.to_string(),
        })?;
        let objects = env
            .create_from_yaml(&path.display().to_string(), &text)
            .map_err(|e| Error::Apply {
                path: path.clone(),
                message: e.to_string(),
            })?;
        created.extend(objects);
    }
    Ok(created)
}

/// Applies every manifest of `config` (not of its folders), in name order:
/// namespace, RBAC, CRDs, ConfigMaps, the webhook's Service and
/// configurations, and the Deployments, which this process runs in their
/// stead, so they are marked available. A new manifest needs no list.
pub(crate) fn apply_config(env: &TestEnv, config: &Path) -> Result<Vec<InProcess>, Error> {
    let mut in_process = Vec::new();
    for object in apply_manifests(env, config)? {
        if object["kind"] != "Deployment" {
            continue;
        }
        let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str).map(str::to_owned);
        in_process.push(InProcess {
            namespace: text("/metadata/namespace").unwrap_or_default(),
            name: text("/metadata/name").unwrap_or_default(),
            service_account: text("/spec/template/spec/serviceAccountName")
                .unwrap_or_else(|| "default".to_owned()),
        });
        run_in_process(env, object).map_err(|e| Error::Apply {
            path: config.to_owned(),
            message: e.to_string(),
        })?;
    }
    Ok(in_process)
}

/// Marks a Deployment of `config/` available, as its one replica is this
/// process: `kubectl get deploy` shows 1/1, not 0/1 forever.
fn run_in_process(env: &TestEnv, mut deployment: Value) -> Result<(), kinject_testenv::Error> {
    let replicas = deployment.pointer("/spec/replicas").cloned().unwrap_or(1.into());
    let generation = deployment
        .pointer("/metadata/generation")
        .cloned()
        .unwrap_or(1.into());
    deployment["status"] = json!({
        "observedGeneration": generation,
        "replicas": replicas, "updatedReplicas": replicas,
        "readyReplicas": replicas, "availableReplicas": replicas,
        "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                        "message": "Runs in the local cluster's process."}],
    });
    env.update_status(deployment)?;
    Ok(())
}

/// Applies the example objects of `config/samples` (one per kind; a new
/// kind's scaffold adds one), if the folder exists.
pub(crate) fn apply_samples(env: &TestEnv, config: &Path) -> Result<(), Error> {
    let samples = config.join("samples");
    if samples.is_dir() {
        apply_manifests(env, &samples)?;
    }
    Ok(())
}
