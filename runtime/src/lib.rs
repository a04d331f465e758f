//! The `knative.dev/pkg` analogue for kube-rs controllers.
//!
//! | module | Knative counterpart |
//! |---|---|
//! | [`apis`] | `knative.dev/pkg/apis`: conditions, duck types, field errors, kind traits |
//! | [`injection`] | `knative.dev/pkg/injection`: the context constructors receive |
//! | [`informer`], [`lister`] | client-go shared informers and listers, over kube-runtime's watcher |
//! | [`client`] | building `kube::Api` handles for either scope |

pub mod apis;
pub mod client;
pub mod informer;
pub mod injection;
mod labels;
pub mod lister;

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
