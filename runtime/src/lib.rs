//! The `knative.dev/pkg` analogue for kube-rs controllers.
//!
//! | module | Knative counterpart |
//! |---|---|
//! | [`apis`] | `knative.dev/pkg/apis`: conditions, duck types, field errors, kind traits |
//! | [`injection`] | `knative.dev/pkg/injection`: the context constructors receive |
//! | [`informer`], [`lister`] | client-go shared informers and listers, over kube-runtime's watcher |
//! | [`client`] | typed clients over `kube::Api` for either scope |
//! | [`controller`] | `knative.dev/pkg/controller`: the workqueue, `Impl`, enqueue helpers, filters |
//! | [`leaderelection`] | `knative.dev/pkg/leaderelection` and `hash`: bucketed leader election over Leases |
//! | [`tracker`] | `knative.dev/pkg/tracker`: enqueue observers when what they reference changes |

pub mod apis;
pub mod client;
pub mod controller;
pub mod events;
pub mod informer;
pub mod injection;
mod labels;
pub mod leaderelection;
pub mod lister;
pub mod network;
pub mod reconciler;
pub mod sharedmain;
#[cfg(feature = "testing")]
pub mod testing;
pub mod tracker;

/// Generated reconciler traits are async; implement them with this attribute.
pub use async_trait::async_trait;

/// Crates the derive's expansion names, so a crate using `#[derive(Kind)]` needs
/// only `runtime` (and `serde` for its own derives).
#[doc(hidden)]
pub mod __private {
    pub use k8s_openapi;
    pub use kube;
    pub use schemars;
    pub use serde;
    pub use serde_json;
}
