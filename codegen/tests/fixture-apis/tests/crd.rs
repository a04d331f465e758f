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

/// A kind whose spec uses every validation marker docs/markers-and-crds.md lists.
#[derive(Kind, Clone, Debug, Default, PartialEq)]
#[kind(group = "example.dev", version = "v1", cluster_scoped)]
pub struct Knob {
    /// Standard object metadata.
    pub metadata: ObjectMeta,
    /// The setting.
    pub spec: KnobSpec,
}

/// How a knob turns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub enum Mode {
    /// Quickly.
    #[default]
    Fast,
    /// Carefully.
    Safe,
}

/// The setting.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KnobSpec {
    /// From 1 to 10.
    #[schemars(range(min = 1, max = 10))]
    pub level: u8,
    /// A DNS label.
    #[schemars(length(min = 1, max = 63), regex(pattern = r"^[a-z0-9-]+$"))]
    pub label: String,
    /// One to three tags.
    #[schemars(length(min = 1, max = 3))]
    pub tags: Vec<String>,
    /// Where to report.
    #[schemars(extend("format" = "uri"))]
    pub report_to: String,
    /// How it turns.
    pub mode: Mode,
    /// Turned off, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub off: Option<bool>,
    /// More than 0, at most 1.
    #[schemars(range(min = 0.0, max = 1.0), extend("exclusiveMinimum" = true))]
    pub ratio: f64,
}

#[test]
fn validation_markers_reach_the_crd_as_the_readme_says() {
    let crd = serde_json::to_value(custom_resource_definition::<Knob>().unwrap()).unwrap();
    let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    let p = &spec["properties"];
    assert_eq!(
        (&p["level"]["minimum"], &p["level"]["maximum"]),
        (&json!(1.0), &json!(10.0))
    );
    assert_eq!(
        (
            &p["label"]["minLength"],
            &p["label"]["maxLength"],
            &p["label"]["pattern"]
        ),
        (&json!(1), &json!(63), &json!("^[a-z0-9-]+$"))
    );
    assert_eq!(
        (&p["tags"]["minItems"], &p["tags"]["maxItems"]),
        (&json!(1), &json!(3))
    );
    assert_eq!(p["reportTo"]["format"], "uri");
    assert_eq!(p["mode"]["enum"], json!(["Fast", "Safe"]));
    assert_eq!(p["mode"]["type"], "string");
    assert_eq!(
        (
            &p["ratio"]["minimum"],
            &p["ratio"]["exclusiveMinimum"],
            &p["ratio"]["maximum"]
        ),
        (&json!(0.0), &json!(true), &json!(1.0))
    );
    assert_eq!(
        spec["required"],
        json!(["level", "label", "tags", "reportTo", "mode", "ratio"])
    );
    assert!(p["off"].get("nullable").is_none());
}

/// Two versions of one kind, as an API that graduates keeps them.
pub mod gauge {
    use super::*;

    pub mod v1alpha1 {
        use super::*;

        /// A gauge, as first written.
        #[derive(Kind, Clone, Debug, Default, PartialEq)]
        #[kind(group = "example.dev", version = "v1alpha1", namespaced, shortnames = ["gg"])]
        pub struct Gauge {
            /// Standard object metadata.
            pub metadata: ObjectMeta,
            /// The reading.
            pub spec: GaugeSpec,
        }
    }

    pub mod v1beta1 {
        use super::*;

        /// A gauge, stored in this version.
        #[derive(Kind, Clone, Debug, Default, PartialEq)]
        #[kind(group = "example.dev", version = "v1beta1", namespaced, shortnames = ["gg"], storage,
               printcolumn(name = "Value", type = "integer", json_path = ".spec.value"))]
        pub struct Gauge {
            /// Standard object metadata.
            pub metadata: ObjectMeta,
            /// The reading.
            pub spec: GaugeSpec,
        }

        /// The same gauge with other names, which a CRD cannot hold.
        #[derive(Kind, Clone, Debug, Default, PartialEq)]
        #[kind(group = "example.dev", version = "v1", namespaced, plural = "gauges", shortnames = ["gauge"])]
        pub struct Gauge2 {
            /// Standard object metadata.
            pub metadata: ObjectMeta,
            /// The reading.
            pub spec: GaugeSpec,
        }
    }

    /// The reading.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    pub struct GaugeSpec {
        /// The value.
        pub value: i64,
    }
}

#[test]
fn versions_of_a_kind_make_one_crd_stored_in_the_marked_version() {
    use kinject_types::registry::{CustomKind, custom_resource_definitions};

    let kinds = [
        CustomKind::of::<gauge::v1alpha1::Gauge>().defined_at("a.rs:1"),
        CustomKind::of::<Knob>(),
        CustomKind::of::<gauge::v1beta1::Gauge>().defined_at("b.rs:2"),
    ];
    let definitions = custom_resource_definitions(&kinds).unwrap();
    let names: Vec<&str> = definitions.iter().map(|d| d.kind.as_str()).collect();
    assert_eq!(names, ["Gauge", "Knob"]);
    let crd = serde_json::to_value(&definitions[0].crd).unwrap();
    let versions: Vec<(&str, bool)> = crd["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["name"].as_str().unwrap(), v["storage"].as_bool().unwrap()))
        .collect();
    assert_eq!(versions, [("v1beta1", true), ("v1alpha1", false)]);
    // Each version keeps its own schema and columns.
    assert_eq!(
        crd["spec"]["versions"][0]["additionalPrinterColumns"][0]["name"],
        "Value"
    );
    assert!(
        crd["spec"]["versions"][1]
            .get("additionalPrinterColumns")
            .is_none()
    );
    assert_eq!(definitions[0].defined_at, ["a.rs:1", "b.rs:2"]);

    let unmarked = [CustomKind::of::<gauge::v1alpha1::Gauge>().defined_at("a.rs:1"), {
        let mut beta = CustomKind::of::<gauge::v1beta1::Gauge>().defined_at("b.rs:2");
        beta.storage = false;
        beta
    }];
    assert_eq!(
        custom_resource_definitions(&unmarked).unwrap_err().to_string(),
        "Gauge.example.dev has versions v1alpha1 (a.rs:1), v1beta1 (b.rs:2) and none of them marked `storage`; \
         add `storage` to the #[kind(...)] of the one version the API server stores, and only to it"
    );

    let mut renamed = CustomKind::of::<gauge::v1beta1::Gauge2>();
    renamed.kind = "Gauge".to_owned();
    let disagreeing = [CustomKind::of::<gauge::v1beta1::Gauge>(), renamed];
    let err = custom_resource_definitions(&disagreeing).unwrap_err().to_string();
    assert!(
        err.starts_with("the versions of Gauge.example.dev disagree on their names or scope"),
        "{err}"
    );
}
