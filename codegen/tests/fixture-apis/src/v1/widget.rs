use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kinject_macros::Kind;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Widget is namespaced, has a status, and is reconciled without the
/// Knative status logic.
#[derive(Kind, Clone, Debug, Default, PartialEq)]
#[kind(
    group = "fixtures.example.dev",
    version = "v1",
    namespaced,
    shortnames = ["wd"],
    printcolumn(name = "Pod", type = "string", json_path = ".spec.podName")
)]
#[genclient]
#[genreconciler(krshapedlogic = false)]
pub struct Widget {
    /// Standard object metadata.
    pub metadata: ObjectMeta,
    /// What the widget is for.
    pub spec: WidgetSpec,
    /// What became of it.
    pub status: Option<WidgetStatus>,
}

/// What a widget is for.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WidgetSpec {
    /// The Pod, in the same namespace, the widget stands for.
    #[serde(default)]
    pub pod_name: String,
}

/// What became of a widget.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WidgetStatus {
    /// Whether its Pod runs.
    #[serde(default)]
    pub ready: bool,
}
