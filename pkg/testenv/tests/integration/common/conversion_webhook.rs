//! Widgets in two versions: their client, their conversion, and the answer
//! a conversion webhook gives with it; shared by the conversion tests and
//! the `converted-list` benchmark.

use kinject_testenv::{Converter, TestEnv};
use kube::api::{Api, ApiResource, DynamicObject};
use serde_json::{Value, json};

/// Widgets of `version` in namespace `default`.
pub fn widgets(env: &TestEnv, version: &str) -> Api<DynamicObject> {
    let resource = ApiResource {
        group: "tutorial.example.com".into(),
        version: version.into(),
        api_version: format!("tutorial.example.com/{version}"),
        kind: "Widget".into(),
        plural: "widgets".into(),
    };
    Api::namespaced_with(env.client(), "default", &resource)
}

/// Widgets' conversion: `v1` (stored) counts replicas as a number,
/// `v1alpha1` as text, as a webhook of two versions with a field of another
/// shape would convert them.
#[derive(Debug)]
pub struct ReplicasAsText;

impl Converter for ReplicasAsText {
    fn convert(&self, object: &Value, api_version: &str) -> Result<Value, String> {
        let mut out = object.clone();
        let replicas = &object["spec"]["replicas"];
        out["spec"]["replicas"] = match (api_version, replicas) {
            ("tutorial.example.com/v1", Value::String(text)) => {
                json!(
                    text.parse::<i64>()
                        .map_err(|e| format!("spec.replicas: {text:?}: {e}"))?
                )
            }
            ("tutorial.example.com/v1alpha1", Value::Number(n)) => json!(n.to_string()),
            _ => replicas.clone(),
        };
        out["apiVersion"] = json!(api_version);
        Ok(out)
    }
}

/// What a conversion webhook answers to `review`, converting with
/// `converter`: every object, or the first refusal.
pub fn conversion_answer(review: &Value, converter: &dyn Converter) -> Value {
    let request = &review["request"];
    let to = request["desiredAPIVersion"].as_str().unwrap_or_default();
    let converted: Result<Vec<Value>, String> = request["objects"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|o| converter.convert(o, to))
        .collect();
    let response = match converted {
        Ok(objects) => {
            json!({"uid": request["uid"], "convertedObjects": objects, "result": {"status": "Success"}})
        }
        Err(e) => json!({"uid": request["uid"], "result": {"status": "Failure", "message": e}}),
    };
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": response})
}
