//! An in-memory Kubernetes API server, for testing controllers without a cluster.
//!
//! [`TestEnv`] keeps objects with kube-apiserver's semantics (one global
//! `resourceVersion`, `uid`, `generation`, optimistic concurrency, the `status`
//! subresource, finalizers, label/field selectors, pagination, watches with bookmarks and
//! `410 Gone`) and serves them two ways: as an in-process `tower::Service` behind a real
//! [`kube::Client`] ([`TestEnv::client`]), and as a loopback HTTP server for `kubectl` and
//! out-of-process controllers ([`TestEnv::serve`]).
//!
//! # Where it stands in the framework
//!
//! testenv is a test- and development-time crate. The framework's other crates use it
//! only as a dev-dependency or behind a `testing` feature (`kinject-runtime`'s
//! table-test harness), never in what a controller ships.
//!
//! It stands in for kube-apiserver, so it depends on what a client of one would: kube,
//! k8s-openapi (and k8s-pb for protobuf bodies, schemars for its OpenAPI schemas),
//! HTTP, TLS and serde crates, and of the
//! framework's own crates only `kinject-types` without default features, for the name
//! and label rules of `kinject_types::validation`. Nothing else of ours.
//!
//! # How it is built
//!
//! Its modules form layers, each using only those below it:
//!
//! - `http`: serving (the `tower::Service` and the loopback server), routing requests
//!   to verbs, request options and bodies (protobuf included), lists and continue
//!   tokens, watches, discovery and the OpenAPI documents, server-side printing for
//!   `kubectl get`, admission webhooks, authentication and impersonation;
//! - `test_env`: the public API ([`TestEnv`], [`Builder`]) and the state the layers
//!   share, behind one lock that is never held across an await;
//! - `registry`: the stored objects and what kube-apiserver's registry does to them,
//!   kind by kind: decoding and validation, create/update/patch/apply/delete,
//!   server-side apply's field ownership, `scale`, the CRD lifecycle, the optional
//!   garbage collector and namespace controller, RBAC authorization, the review
//!   kinds' answers and service account tokens;
//! - leaves that know none of these: `store` (objects and revisions, the watch history),
//!   `selector`, `jsonpath`, `patches`, `names`, `timestamps`, `errors` (the `Status`
//!   bodies), `object_meta` (metadata access and validation), `quantity` (resource
//!   quantities), `go_format` and `hooks` (the testing hooks: [`Action`], [`Reactor`]).
//!
//! `crd_check` checks a CRD as kube-apiserver would, for generators. Above
//! them all, `workloads` plays a small cluster's kubelet and workload
//! controllers through [`TestEnv`]'s object API ([`TestEnv::run_workloads`]),
//! and `serve` is the `testenv serve` command.
//!
//! # Example
//!
//! ```
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::api::{Api, PostParams};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let env = kinject_testenv::TestEnv::new();
//! let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
//! let mut cm = ConfigMap::default();
//! cm.metadata.name = Some("settings".into());
//! let created = cms.create(&PostParams::default(), &cm).await?;
//! assert!(created.metadata.uid.is_some());
//! assert_eq!(env.request_count("create", "configmaps"), 1);
//!
//! // Stale writes conflict, as on a real API server.
//! let mut first = created.clone();
//! first.data = Some([("mode".to_owned(), "fast".to_owned())].into());
//! cms.replace("settings", &PostParams::default(), &first).await?;
//! let mut stale = created.clone();
//! stale.data = Some([("mode".to_owned(), "slow".to_owned())].into());
//! let err = cms.replace("settings", &PostParams::default(), &stale).await.unwrap_err();
//! assert!(matches!(err, kube::Error::Api(s) if s.code == 409));
//! # Ok(())
//! # }
//! ```
//!
//! See the crate README for what is implemented and where it differs from kube-apiserver.
#![warn(missing_docs)]

mod conversion;
mod crd_check;
mod errors;
mod formats;
mod go_format;
mod hooks;
mod http;
mod jsonpath;
mod manifests;
mod names;
mod object_meta;
mod patches;
mod quantity;
mod registry;
mod selector;
pub mod serve;
mod store;
mod test_env;
mod timestamps;
mod workloads;

pub use conversion::Converter;
pub use crd_check::check_custom_resource_definition;
pub use errors::{ErrorStatus, StatusCause, StatusFields};
pub use hooks::{Action, Reactor};
pub use http::server::Server;
pub use http::service::{ResponseBody, TestEnvService};
pub use manifests::{manifest_files, yaml_documents};
pub use names::{NameGenerator, UidGenerator, uid_for};
pub use registry::resource::{BuiltinKind, builtin_kinds};
pub use test_env::{
    Builder, DEFAULT_ACTION_LOG_BYTES, DEFAULT_WATCH_BUFFER_BYTES, DEFAULT_WATCH_HISTORY_BYTES, Error,
    HeldBytes, NAMESPACE_TICK, TestEnv,
};
pub use workloads::{EXIT_CODE_ANNOTATION, Workloads};
