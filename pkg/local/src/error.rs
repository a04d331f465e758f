//! What can stop the local cluster, each saying what to fix.

use std::path::PathBuf;

/// Why the local cluster could not start or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file or folder of the project could not be read.
    #[error("cannot read {}: {message}", path.display())]
    Read {
        /// The file or folder.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The API server refused a manifest of `config/`.
    #[error("applying {}: {message}; fix the manifest (hack/update-codegen.sh rewrites the generated ones)", path.display())]
    Apply {
        /// The manifest.
        path: PathBuf,
        /// The API server's answer.
        message: String,
    },
    /// The API server could not serve or write its kubeconfig.
    #[error("the API server: {0}")]
    Serve(#[from] kinject_testenv::Error),
    /// A kubeconfig could not be written.
    #[error("cannot write {}: {message}; check that its folder is writable", path.display())]
    Write {
        /// The kubeconfig.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The webhook did not configure its admission webhooks in time.
    #[error(
        "the webhook did not configure its admission webhooks within {0} s; \
         its log above says why, or run with --no-webhook to go on without it"
    )]
    WebhookNotReady(u64),
    /// The controller or the webhook stopped with an error.
    #[error(transparent)]
    Component(#[from] kinject_sharedmain::MainError),
    /// The async runtime could not start.
    #[error("cannot start the async runtime: {0}")]
    Runtime(String),
}
