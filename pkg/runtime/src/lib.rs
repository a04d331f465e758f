//! The `knative.dev/pkg` analogue for kube-rs controllers.
//!
//! **Where it stands.** The framework's middle layer: everything a controller
//! does between the API server and its own `reconcile_kind`, written once for
//! every kind (the generated code above it is thin typed glue). It depends on
//! `kinject-types` (re-exported as [`apis`]), kube-rs and k8s-openapi without
//! a version feature, tokio and prometheus-client; never on an application's
//! crates, on `kinject-sharedmain` (the process around it) or on
//! `kinject-testenv` (`kinject-testing` holds the table-test harness over
//! it), and it has no features, so every build of it is the same build.
//!
//! A controller is a constructor that asks the injection context for the
//! informers it needs and returns its [`controller::Impl`]:
//!
//! ```
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kinject_runtime::controller::{Action, Error, Impl, ObjectKey, Reconciler};
//! use kinject_runtime::injection::Context;
//!
//! struct Echo;
//!
//! impl Reconciler for Echo {
//!     async fn reconcile(&self, key: &ObjectKey) -> Result<Action, Error> {
//!         println!("reconciling {key}");
//!         Ok(Action::await_change())
//!     }
//! }
//!
//! fn new_controller(ctx: &Context) -> Impl {
//!     let configmaps = ctx.informer::<ConfigMap>();
//!     let controller = Impl::new("echo", Echo, Default::default());
//!     configmaps.add_event_handler(controller.enqueue_handler());
//!     controller
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // The in-memory API server stands in for a cluster here.
//! let ctx = Context::new(kinject_testenv::TestEnv::new().client());
//! let controller = new_controller(&ctx);
//! assert_eq!(controller.name(), "echo");
//! assert_eq!(ctx.informer_descriptions(), ["ConfigMap v1"]);
//! # Ok(()) }
//! ```
//!
//! | module | Knative counterpart |
//! |---|---|
//! | [`apis`] | `knative.dev/pkg/apis`, re-exported from `kinject-types`: conditions, duck types, field errors, kind traits |
//! | [`injection`] | `knative.dev/pkg/injection`: the context constructors receive |
//! | [`informer`], [`lister`] | client-go shared informers and listers, over kube-runtime's watcher |
//! | [`client`] | typed clients over `kube::Api` for either scope |
//! | [`controller`] | `knative.dev/pkg/controller`: the workqueue, `Impl`, enqueue helpers, filters |
//! | [`leaderelection`] | `knative.dev/pkg/leaderelection` and `hash`: bucketed leader election over Leases |
//! | [`tracker`] | `knative.dev/pkg/tracker`: enqueue observers when what they reference changes |
//! | [`key`], [`leader`] | `types.NamespacedName` and `reconciler.LeaderAware`: what the work queue holds and which keys this replica may write |
//! | [`go_duration`], [`parse_go_duration`], [`controller::TokenBucket`] | Go's `time.Duration` text and `x/time/rate`'s token bucket, shared by the modules above |
//! | [`reconciler::slow_start`] | client-go's `slowStartBatch`: many writes in batches of 1, 2, 4, … that stop on failure and on shutdown |
//! | [`owner`] | `kmeta.NewControllerRef` and client-go's `SetControllerReference`: controller references, and a child's way back to its owner's key |
//! | [`expectations`] | client-go's `ControllerExpectations`: a reconcile waits until the cache shows the creates and deletes it made |
//!
//! The modules form a tree (`pkg/types/tests/layering.rs` checks it): the leaves
//! (`key`, `leader`, `duration`, `token_bucket`, the informer cache) depend on
//! nothing above them.
#![warn(missing_docs)]

mod batch;
pub mod client;
mod clock;
pub mod controller;
mod duration;
pub mod events;
pub mod expectations;
pub mod informer;
pub mod injection;
pub mod key;
mod labels;
pub mod leader;
pub mod leaderelection;
pub mod lister;
pub mod network;
pub mod owner;
pub mod rbac;
pub mod reconciler;
mod store;
mod token_bucket;
pub mod tracker;
mod world;

// The helpers' items users need stand where they use them (the clock in
// `injection`, batches in `reconciler`, the token bucket in `controller`, Go
// durations here); the helper modules themselves stay private so they can
// change.
pub use duration::{go_duration, parse_go_duration};

/// Generated reconciler traits are async; implement them with this attribute.
pub use async_trait::async_trait;

/// The API types every kind builds on, re-exported so a controller needs only this
/// crate: conditions, duck types, field errors and the kind traits.
pub use kinject_types as apis;
