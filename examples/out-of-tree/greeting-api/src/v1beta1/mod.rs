//! `hello.example.com/v1beta1`: the version Greetings are stored in.
//!
//! It has the same fields as `v1alpha1`, so the API server serves every
//! Greeting in both versions by rewriting only `apiVersion` (the CRD's `None`
//! conversion). The reconciler keeps working on `v1alpha1`; clients may use
//! either.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kinject_macros::Kind;

pub use crate::v1alpha1::{GreetingSpec, GreetingStatus};

/// A Greeting: a message the controller publishes in a ConfigMap of the same
/// namespace, named after the Greeting, for other workloads to mount.
#[derive(Kind, Clone, Debug, Default, PartialEq)]
#[kind(group = "hello.example.com", version = "v1beta1", namespaced, shortnames = ["greet"], storage)]
#[genclient]
pub struct Greeting {
    /// Standard object metadata.
    pub metadata: ObjectMeta,

    /// The desired state of the Greeting, written by its user.
    pub spec: GreetingSpec,

    /// The observed state of the Greeting, written by the controller.
    pub status: Option<GreetingStatus>,
}
