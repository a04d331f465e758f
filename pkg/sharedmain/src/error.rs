//! Why a process could not start, in words that say what to fix.

use thiserror::Error;

/// Why the process could not start.
#[derive(Debug, Error)]
pub enum MainError {
    /// `SYSTEM_NAMESPACE` is not set.
    #[error(
        "SYSTEM_NAMESPACE is not set. It names the namespace that holds this component's ConfigMaps \
         (config-logging, config-leader-election, config-observability) and its leader-election leases. Set it:\n\
         - in a pod, from the downward API:\n      env:\n      - name: SYSTEM_NAMESPACE\n        valueFrom:\n          \
         fieldRef:\n            fieldPath: metadata.namespace\n\
         - in a shell: export SYSTEM_NAMESPACE=knative-samples\n\
         - in an IDE: add SYSTEM_NAMESPACE=knative-samples to the run configuration's environment \
         (.vscode/launch.json does this)"
    )]
    MissingSystemNamespace,
    /// An environment variable has a value that cannot be used.
    #[error("{name}={value:?} is not valid: {why}")]
    BadEnv {
        /// The variable.
        name: &'static str,
        /// Its value.
        value: String,
        /// What is wrong and what would be right.
        why: String,
    },
    /// The `STATEFUL_*` variables of the StatefulSet-ordinal mode cannot be
    /// used (the message names the variable, its value and the fix).
    #[error(transparent)]
    StatefulSet(#[from] kinject_runtime::leaderelection::StatefulSetError),
    /// A flag has a value that cannot be used.
    #[error("{0}")]
    BadFlag(String),
    /// The kubeconfig could not be read or used.
    #[error("Error building kubeconfig: {0}")]
    Kubeconfig(String),
    /// A configuration ConfigMap is malformed.
    #[error("ConfigMap {namespace}/{name} is invalid: {why}")]
    Config {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// What is wrong.
        why: String,
    },
    /// Reading a ConfigMap kept failing.
    #[error(
        "could not read ConfigMap {namespace}/{name}: {why}; check that the API server is reachable and that the service account may get configmaps in {namespace}"
    )]
    ConfigRead {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The last error.
        why: String,
    },
    /// Informer caches did not sync.
    #[error(transparent)]
    CacheSync(#[from] kinject_runtime::injection::CacheSyncError),
    /// A server could not start.
    #[error("{0}")]
    Serve(String),
    /// The async runtime could not start.
    #[error("could not start the async runtime: {0}")]
    Runtime(String),
}
