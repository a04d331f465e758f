//! The kinds read and write Knative's JSON/YAML shape, and address the API
//! server where Knative's clients do.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};

use apis::v1alpha1::{
    AddressableService, AddressableServiceSpec, SimpleDeployment, SimpleDeploymentSpec,
    SimpleDeploymentStatus,
};
use kinject_types::{ConditionStatus, ConditionType, HasStatus, KRShaped, KindInfo};
use kube::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"))
}

/// Reads a YAML fixture as `K`, writes it back, and checks nothing was lost,
/// added or reshaped.
fn yaml_round_trip<K: Serialize + DeserializeOwned>(name: &str) -> K {
    let text = fixture(name);
    let typed: K = serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
    let expected: Value = serde_saphyr::from_str(&text).unwrap();
    assert_eq!(
        serde_json::to_value(&typed).unwrap(),
        expected,
        "{name} changed in a JSON round trip"
    );
    let yaml = serde_saphyr::to_string(&typed).unwrap();
    let again: Value = serde_saphyr::from_str(&yaml).unwrap();
    assert_eq!(again, expected, "{name} changed in a YAML round trip:\n{yaml}");
    typed
}

/// Reads a JSON fixture and checks the typed value writes back the same bytes,
/// key order included.
fn json_round_trip<K: Serialize + DeserializeOwned>(name: &str) -> K {
    let text = fixture(name);
    let typed: K = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(serde_json::to_string(&typed).unwrap(), text.trim());
    typed
}

#[test]
fn addressable_service_spec_only() {
    let asvc: AddressableService = yaml_round_trip("addressableservice-spec-only.yaml");
    assert_eq!(asvc.spec.service_name, "webhook");
    assert!(asvc.status.is_none());
}

#[test]
fn addressable_service_full_status_with_conditions_and_address() {
    let asvc: AddressableService = yaml_round_trip("addressableservice-full-status.yaml");
    let status = asvc.status().unwrap();
    assert_eq!(status.status.observed_generation, 2);
    assert_eq!(status.status.conditions.len(), 2);
    let address = status.address.as_ref().unwrap();
    assert_eq!(
        address.url.as_ref().unwrap().as_str(),
        "http://webhook.ns.svc.cluster.local"
    );
    assert_eq!(address.ca_certs.as_deref(), Some("-----BEGIN CERTIFICATE-----"));
    assert!(
        asvc.duck_status()
            .unwrap()
            .get_condition(&ConditionType::READY)
            .unwrap()
            .is_true()
    );
}

#[test]
fn addressable_service_json_is_byte_identical() {
    let asvc: AddressableService = json_round_trip("addressableservice-status.json");
    let ready = asvc.status.unwrap().status.conditions.remove(0);
    assert_eq!(ready.status, ConditionStatus::False);
    assert_eq!(ready.message, "Service \"webhook\" wasn't found.");
}

#[test]
fn simple_deployment_keeps_ready_replicas_zero() {
    let sd: SimpleDeployment = yaml_round_trip("simpledeployment-ready-replicas-zero.yaml");
    assert_eq!(sd.status.as_ref().unwrap().ready_replicas, 0);
    let sd: SimpleDeployment = json_round_trip("simpledeployment-empty-status.json");
    assert_eq!(sd.status, Some(SimpleDeploymentStatus::default()));
}

#[test]
fn simple_deployment_spec_only() {
    let sd: SimpleDeployment = yaml_round_trip("simpledeployment-spec-only.yaml");
    assert_eq!(
        sd.spec,
        SimpleDeploymentSpec {
            image: "gcr.io/knative-samples/helloworld-go".into(),
            replicas: 2
        }
    );
}

#[test]
fn new_objects_carry_type_meta() {
    let asvc = AddressableService::new(
        "rut",
        AddressableServiceSpec {
            service_name: "webhook".into(),
        },
    );
    assert_eq!(
        serde_json::to_value(&asvc).unwrap(),
        json!({"apiVersion": "samples.knative.dev/v1alpha1", "kind": "AddressableService",
               "metadata": {"name": "rut"}, "spec": {"serviceName": "webhook"}})
    );
}

#[test]
fn missing_type_meta_is_accepted_and_a_wrong_kind_is_not() {
    let asvc: AddressableService = serde_json::from_value(json!({"metadata": {"name": "x"}})).unwrap();
    assert_eq!(asvc.spec.service_name, "");
    let err = serde_json::from_value::<AddressableService>(json!({
        "apiVersion": "samples.knative.dev/v1alpha1", "kind": "SimpleDeployment", "metadata": {}
    }))
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("kind \"SimpleDeployment\" is not \"AddressableService\""),
        "{err}"
    );
    let err =
        serde_json::from_value::<SimpleDeployment>(json!({"apiVersion": "v1", "kind": "SimpleDeployment"}))
            .unwrap_err();
    assert!(
        err.to_string()
            .contains("apiVersion \"v1\" is not \"samples.knative.dev/v1alpha1\""),
        "{err}"
    );
}

#[test]
fn resource_metadata_matches_knative() {
    assert_eq!(
        AddressableService::api_version(&()),
        "samples.knative.dev/v1alpha1"
    );
    assert_eq!(AddressableService::kind(&()), "AddressableService");
    assert_eq!(AddressableService::plural(&()), "addressableservices");
    assert_eq!(AddressableService::SINGULAR, "addressableservice");
    assert_eq!(AddressableService::SHORT_NAMES, ["asvc"]);
    assert_eq!(AddressableService::CATEGORIES, ["all", "knative"]);
    const { assert!(AddressableService::NAMESPACED) };
    assert_eq!(SimpleDeployment::plural(&()), "simpledeployments");
    assert_eq!(SimpleDeployment::SHORT_NAMES, ["sdeploy"]);
    assert_eq!(
        AddressableService::url_path(&(), Some("ns")),
        "/apis/samples.knative.dev/v1alpha1/namespaces/ns/addressableservices"
    );
    assert_eq!(AddressableService::condition_set().happy(), &ConditionType::READY);
}

/// A kube::Client whose transport records request paths and answers 404.
fn recording_client() -> (kube::Client, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        record.lock().unwrap().push(req.uri().to_string());
        async move {
            let body = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404});
            http::Response::builder()
                .status(404)
                .header("content-type", "application/json")
                .body(http_body_util::Full::new(bytes::Bytes::from(body.to_string())))
        }
    });
    (kube::Client::new(service, "default"), seen)
}

#[tokio::test]
async fn namespaced_api_requests_knatives_path() {
    let (client, seen) = recording_client();
    let api = kube::Api::<AddressableService>::namespaced(client.clone(), "ns");
    assert!(api.get("rut").await.is_err());
    let _ = kube::Api::<SimpleDeployment>::all(client)
        .list(&Default::default())
        .await;
    let seen = seen.lock().unwrap();
    assert_eq!(
        seen[0],
        "/apis/samples.knative.dev/v1alpha1/namespaces/ns/addressableservices/rut"
    );
    assert_eq!(seen[1], "/apis/samples.knative.dev/v1alpha1/simpledeployments?");
}

#[test]
fn schema_has_knatives_shape() {
    let schema = kinject_types::schema::openapi_v3_schema::<AddressableService>();
    assert_eq!(schema["type"], "object");
    let props = schema["properties"].as_object().unwrap();
    assert_eq!(props.keys().collect::<Vec<_>>(), ["spec", "status"]);
    assert_eq!(
        schema["properties"]["spec"]["description"],
        "The desired state of the AddressableService, written by its user."
    );
    assert_eq!(schema["properties"]["spec"]["required"], json!(["serviceName"]));
    let status = &schema["properties"]["status"]["properties"];
    for field in ["observedGeneration", "conditions", "annotations", "address"] {
        assert!(
            status.get(field).is_some(),
            "status.{field} missing from {status:#}"
        );
    }
    assert_eq!(
        status["observedGeneration"],
        json!({
        "description": "The metadata.generation the controller last acted on.",
        "type": "integer", "format": "int64"})
    );
    let condition = &status["conditions"]["items"];
    assert_eq!(condition["required"], json!(["type", "status"]));
    assert_eq!(condition["properties"]["status"]["type"], "string");
    assert_eq!(condition["properties"]["lastTransitionTime"]["type"], "string");
    assert_eq!(
        status["address"]["properties"]["url"],
        json!({"description": "The URL to send to.", "type": "string"})
    );
    assert!(!schema.to_string().contains("nullable") && !schema.to_string().contains("\"default\""));

    let schema = kinject_types::schema::openapi_v3_schema::<SimpleDeployment>();
    assert_eq!(
        schema["properties"]["spec"]["properties"]["replicas"]["format"],
        "int32"
    );
    assert_eq!(
        schema["properties"]["spec"]["required"],
        json!(["image", "replicas"])
    );
    assert_eq!(
        schema["properties"]["status"]["required"],
        json!(["readyReplicas"])
    );
}

#[test]
fn crd_serves_the_kind_with_a_status_subresource() {
    let crd = kinject_types::crd::custom_resource_definition::<AddressableService>().unwrap();
    let crd = serde_json::to_value(&crd).unwrap();
    assert_eq!(crd["metadata"]["name"], "addressableservices.samples.knative.dev");
    assert_eq!(
        crd["spec"]["names"],
        json!({"kind": "AddressableService", "listKind": "AddressableServiceList", "plural": "addressableservices",
               "singular": "addressableservice", "shortNames": ["asvc"], "categories": ["all", "knative"]})
    );
    assert_eq!(crd["spec"]["scope"], "Namespaced");
    let version = &crd["spec"]["versions"][0];
    assert_eq!(
        (
            version["name"].as_str(),
            version["served"].as_bool(),
            version["storage"].as_bool()
        ),
        (Some("v1alpha1"), Some(true), Some(true))
    );
    assert_eq!(version["subresources"], json!({"status": {}}));
    assert_eq!(
        version["schema"]["openAPIV3Schema"],
        kinject_types::schema::openapi_v3_schema::<AddressableService>()
    );
}
