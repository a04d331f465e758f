use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kinject_macros::Kind;

#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct WidgetSpec {
    pub size: i32,
}

#[derive(Kind, Clone, Debug, PartialEq)]
#[kind(
    group = "example.dev",
    version = "v1",
    namespaced,
    printcolumn(name = "Size", type = "int", json_path = ".spec.size")
)]
pub struct Widget {
    pub metadata: ObjectMeta,
    pub spec: WidgetSpec,
}

fn main() {}
