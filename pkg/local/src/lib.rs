//! The local cluster of a kinject project: what `cargo run -p controller
//! --example local` (and `hack/run-local.sh`) runs, the same for the sample
//! app and for every project `kinject init` writes.
//!
//! One process serves testenv's in-memory API server over loopback HTTP
//! (its kubeconfig in `.testenv/kubeconfig`), applies every manifest of
//! `config/`, plays a small cluster's kubelet and its Job, ReplicaSet and
//! Deployment controllers ([`kinject_testenv::Workloads`]), collects
//! owned objects and empties deleted namespaces, starts the project's
//! admission webhook and routes its Service to it, applies
//! `config/samples/` once the webhook serves, and runs the controllers under
//! the same `sharedmain` as the `controller` binary until Ctrl-C. The
//! controller and the webhook run as the service accounts their Deployments
//! in `config/` name, so a rule missing from the generated RBAC is refused
//! here, with kube-apiserver's message, as in a cluster.
//!
//! A project's example is one line:
//!
//! ```no_run
//! # mod reconcilers { pub fn controllers() -> Vec<kinject_runtime::injection::Constructor> { Vec::new() } }
//! # mod generated { pub mod registry { pub fn custom_kinds() -> Vec<kinject_runtime::apis::registry::CustomKind> { Vec::new() } } }
//! fn main() -> std::process::ExitCode {
//!     let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
//!     let app = kinject_local::App::new("knative-samples", root, reconcilers::controllers());
//!     kinject_local::main(app.webhook(generated::registry::custom_kinds()))
//! }
//! ```
//!
//! # Where it stands
//!
//! A development tool, above `kinject-sharedmain`, `kinject-webhook` and
//! `kinject-testenv`: a project's example links it, never the controller it
//! ships. Its ports come from [`LocalArgs`] alone (the webhook and its
//! probes take free ones), so nothing it starts collides.
#![warn(missing_docs)]

mod args;
mod cluster;
mod error;
mod manifests;
mod webhook;

pub use args::LocalArgs;
pub use cluster::{App, main, run};
pub use error::Error;
