//! The `knative.dev/pkg` analogue for kube-rs controllers.

pub mod apis;
pub mod controller;
pub mod tracker;

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
