//! The `knative.dev/pkg` analogue for kube-rs controllers.
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
//! | [`duration`], [`token_bucket`] | Go's `time.Duration` text and `x/time/rate`'s token bucket, shared by the modules above |
//! | [`batch`] | client-go's `slowStartBatch`: many writes in batches of 1, 2, 4, … that stop on failure and on shutdown |
//! | [`owner`] | `kmeta.NewControllerRef` and client-go's `SetControllerReference`: controller references, and a child's way back to its owner's key |
//! | [`expectations`] | client-go's `ControllerExpectations`: a reconcile waits until the cache shows the creates and deletes it made |
//!
//! The modules form a tree (`pkg/types/tests/layering.rs` checks it): the leaves
//! (`key`, `leader`, `duration`, `token_bucket`, the informer cache) depend on
//! nothing above them.

pub mod batch;
pub mod client;
pub mod controller;
pub mod duration;
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
#[cfg(feature = "testing")]
pub mod testing;
pub mod token_bucket;
pub mod tracker;

/// Generated reconciler traits are async; implement them with this attribute.
pub use async_trait::async_trait;

/// The API types every kind builds on, re-exported so a controller needs only this
/// crate: conditions, duck types, field errors and the kind traits.
pub use kinject_types as apis;
