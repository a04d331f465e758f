//! The `knative.dev/pkg` analogue for kube-rs controllers.

pub mod apis;
