use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kinject_macros::Kind;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Gadget is cluster-scoped, has no status, and gets a client, informer and
/// lister but no reconciler. It is the hub its `v1alpha1` converts through.
#[derive(Kind, Clone, Debug, Default, PartialEq)]
#[kind(group = "fixtures.example.dev", version = "v1", cluster_scoped, hub)]
#[genclient(non_namespaced)]
pub struct Gadget {
    /// Standard object metadata.
    pub metadata: ObjectMeta,
    /// Its setting.
    pub spec: GadgetSpec,
}

/// A gadget's setting.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GadgetSpec {
    /// How loud it is.
    #[serde(default)]
    pub volume: u8,
    /// Muted, whatever its volume; `v1alpha1` has no room for it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub muted: bool,
}
