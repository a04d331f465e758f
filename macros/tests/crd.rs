#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

//! The CRD a derived kind's markers and types make: printer columns, the scale
//! subresource, and embedded Kubernetes types.

use k8s_openapi::api::batch::v1::JobTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kinject_macros::Kind;
use kinject_types::crd::custom_resource_definition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Runs a Job now and then.
#[derive(Kind, Clone, Debug, Default, PartialEq)]
#[kind(
    group = "batch.example.dev",
    version = "v1",
    namespaced,
    printcolumn(name = "Parallelism", type = "integer", json_path = ".spec.parallelism"),
    printcolumn(
        name = "Active",
        type = "string",
        json_path = ".status.active[*].name",
        priority = 1,
        description = "The Jobs running now."
    ),
    scale(
        spec_replicas = ".spec.parallelism",
        status_replicas = ".status.running",
        label_selector = ".status.selector"
    ),
    max_description_len = 120
)]
pub struct Batch {
    /// Standard object metadata.
    pub metadata: ObjectMeta,
    /// What to run.
    pub spec: BatchSpec,
    /// What runs.
    pub status: Option<BatchStatus>,
}

/// What to run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BatchSpec {
    /// How many Jobs run at once.
    pub parallelism: i32,
    /// The Job each run creates.
    pub job_template: JobTemplateSpec,
}

/// What runs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BatchStatus {
    /// How many Jobs run.
    pub running: i32,
    /// The label selector of the Jobs, for autoscalers.
    pub selector: String,
    /// The running Jobs.
    pub active: Vec<k8s_openapi::api::core::v1::ObjectReference>,
}

fn crd() -> Value {
    serde_json::to_value(custom_resource_definition::<Batch>().unwrap()).unwrap()
}

#[test]
fn printer_columns_come_from_the_markers_in_order_then_age() {
    let crd = crd();
    let columns = &crd["spec"]["versions"][0]["additionalPrinterColumns"];
    assert_eq!(
        columns,
        &json!([
            {"name": "Parallelism", "type": "integer", "jsonPath": ".spec.parallelism"},
            {"name": "Active", "type": "string", "jsonPath": ".status.active[*].name", "priority": 1,
             "description": "The Jobs running now."},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        ])
    );
}

#[test]
fn the_scale_marker_makes_the_scale_subresource() {
    let crd = crd();
    assert_eq!(
        crd["spec"]["versions"][0]["subresources"],
        json!({
            "status": {},
            "scale": {
                "specReplicasPath": ".spec.parallelism",
                "statusReplicasPath": ".status.running",
                "labelSelectorPath": ".status.selector",
            },
        })
    );
}

#[test]
fn an_embedded_object_meta_is_just_an_object_and_the_crd_fits_kubectl_apply() {
    let crd = crd();
    let template = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        ["jobTemplate"];
    assert_eq!(template["properties"]["metadata"]["type"], "object");
    assert!(template["properties"]["metadata"].get("properties").is_none());
    let pod_template = &template["properties"]["spec"]["properties"]["template"];
    assert_eq!(pod_template["properties"]["metadata"]["type"], "object");
    assert!(pod_template["properties"]["metadata"].get("properties").is_none());
    // The Pod spec itself stays whole, so the API server checks containers.
    let containers = &pod_template["properties"]["spec"]["properties"]["containers"];
    assert_eq!(containers["type"], "array");
    assert!(containers["items"]["properties"].get("image").is_some());
    // Plain `kubectl apply` stores the object in an annotation of at most
    // 262144 bytes.
    let size = serde_json::to_string(&crd).unwrap().len();
    assert!(size < 262_144, "{size} bytes");
    assert!(!serde_json::to_string(&crd).unwrap().contains("managedFields"));
}

#[test]
fn max_description_len_caps_every_description() {
    fn longest(v: &Value) -> usize {
        match v {
            Value::Object(map) => map
                .iter()
                .map(|(k, v)| match (k.as_str(), v) {
                    ("description", Value::String(text)) => text.len(),
                    _ => longest(v),
                })
                .max()
                .unwrap_or(0),
            Value::Array(items) => items.iter().map(longest).max().unwrap_or(0),
            _ => 0,
        }
    }
    let crd = crd();
    let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    assert!(longest(schema) <= 120 + "...".len(), "{}", longest(schema));
    let containers = &schema["properties"]["spec"]["properties"]["jobTemplate"]["properties"]["spec"]["properties"]
        ["template"]["properties"]["spec"]["properties"]["containers"];
    assert!(containers["description"].as_str().unwrap().ends_with("..."));
}
