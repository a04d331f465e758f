pub use k8s_openapi;
pub use kube_core as kube;
pub use schemars;
pub use serde;
pub use serde_json;
