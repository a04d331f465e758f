//! The OpenAPI documents: v3's root and group-version documents, v2 as JSON and as
//! gnostic's protobuf, with the built-in kinds' and the CRDs' schemas, and their
//! hashes following the CRDs.

use crate::common;

use kinject_testenv::TestEnv;
use prost::Message as _;
use serde_json::{Value, json};

const CR_DEF: &str = "dev.knative.samples.v1alpha1.AddressableService";
const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";

/// Status, headers and body of a GET.
async fn get(env: &TestEnv, path: &str, accept: &str) -> (u16, http::HeaderMap, bytes::Bytes) {
    let req = http::Request::get(path)
        .header("accept", accept)
        .body(kube::client::Body::empty())
        .unwrap();
    let res = env.client().send(req).await.unwrap();
    let status = res.status().as_u16();
    let headers = res.headers().clone();
    let body = http_body_util::BodyExt::collect(res.into_body())
        .await
        .unwrap()
        .to_bytes();
    (status, headers, body)
}

async fn get_json(env: &TestEnv, path: &str) -> Value {
    let (status, _, body) = get(env, path, "application/json").await;
    assert_eq!(status, 200, "{path}: {}", String::from_utf8_lossy(&body));
    serde_json::from_slice(&body).unwrap()
}

/// The root's URL of a group version's document, hash included.
async fn gv_url(env: &TestEnv, key: &str) -> Option<String> {
    let root = get_json(env, "/openapi/v3").await;
    root["paths"][key]["serverRelativeURL"]
        .as_str()
        .map(str::to_owned)
}

/// Every `$ref` in `v` that does not start with `prefix` or names no definition.
fn dangling(v: &Value, prefix: &str, defs: &serde_json::Map<String, Value>, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x.as_str()) {
                    ("$ref", Some(r)) if r.strip_prefix(prefix).is_some_and(|n| defs.contains_key(n)) => {}
                    ("$ref", Some(r)) => out.push(r.to_owned()),
                    _ => dangling(x, prefix, defs, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| dangling(x, prefix, defs, out)),
        _ => {}
    }
}

#[tokio::test]
async fn v3_documents_carry_builtin_and_crd_schemas() {
    let env = common::env_with_crd();
    let core = get_json(&env, &gv_url(&env, "api/v1").await.unwrap()).await;
    let schemas = core["components"]["schemas"].as_object().unwrap();
    let pod = &schemas["io.k8s.api.core.v1.Pod"];
    assert_eq!(
        pod["x-kubernetes-group-version-kind"],
        json!([{"group": "", "version": "v1", "kind": "Pod"}])
    );
    assert!(pod.get("required").is_none(), "metadata is not required: {pod}");
    assert!(schemas.contains_key("io.k8s.api.core.v1.Container"));
    let mut bad = Vec::new();
    dangling(&core, "#/components/schemas/", schemas, &mut bad);
    assert!(bad.is_empty(), "references to nothing: {bad:?}");
    // The operations kubectl reads to leave field validation to the server.
    let patch = &core["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"];
    assert_eq!(patch["x-kubernetes-group-version-kind"]["kind"], "Pod");
    assert!(
        patch["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "fieldValidation")
    );

    let doc = get_json(
        &env,
        &gv_url(&env, "apis/samples.knative.dev/v1alpha1").await.unwrap(),
    )
    .await;
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    let cr = &schemas[CR_DEF];
    assert_eq!(
        cr["x-kubernetes-group-version-kind"],
        json!([{"group": "samples.knative.dev", "version": "v1alpha1", "kind": "AddressableService"}])
    );
    assert_eq!(
        cr["properties"]["spec"]["properties"]["serviceName"],
        json!({"type": "string"})
    );
    assert_eq!(
        cr["properties"]["metadata"]["allOf"],
        json!([{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}])
    );
    assert_eq!(cr["properties"]["apiVersion"]["type"], "string");
    let list = &schemas["dev.knative.samples.v1alpha1.AddressableServiceList"];
    assert_eq!(
        list["x-kubernetes-group-version-kind"][0]["kind"],
        "AddressableServiceList"
    );
    let mut bad = Vec::new();
    dangling(&doc, "#/components/schemas/", schemas, &mut bad);
    assert!(bad.is_empty(), "references to nothing: {bad:?}");
}

/// kubectl caches a group version's document by its URL, so the hash in it must
/// change whenever the CRD does, and the document go when the CRD goes.
#[tokio::test]
async fn v3_hash_follows_the_crd() {
    let env = TestEnv::new();
    let key = "apis/samples.knative.dev/v1alpha1";
    assert_eq!(gv_url(&env, key).await, None);
    let core = gv_url(&env, "api/v1").await.unwrap();
    env.install_crd(common::crd()).unwrap();
    let first = gv_url(&env, key).await.unwrap();
    let mut crd = common::crd();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["colour"] =
        json!({"type": "string", "description": "A new field."});
    let stored = env
        .get_object(
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            None,
            "addressableservices.samples.knative.dev",
        )
        .unwrap();
    crd["metadata"]["resourceVersion"] = stored["metadata"]["resourceVersion"].clone();
    env.update_object(crd).unwrap();
    let second = gv_url(&env, key).await.unwrap();
    assert_ne!(first, second);
    let doc = get_json(&env, &second).await;
    assert_eq!(
        doc["components"]["schemas"][CR_DEF]["properties"]["spec"]["properties"]["colour"]["description"],
        "A new field."
    );
    assert_eq!(
        gv_url(&env, "api/v1").await.unwrap(),
        core,
        "built-in documents do not change"
    );
    env.delete_object(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        None,
        "addressableservices.samples.knative.dev",
    )
    .unwrap();
    assert_eq!(gv_url(&env, key).await, None);
    let (status, _, _) = get(&env, &second, "application/json").await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn v2_json_has_every_definition_in_v2_form() {
    let env = TestEnv::new();
    let (status, headers, body) = get(&env, "/openapi/v2", "application/json").await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], "application/json");
    let before = headers["etag"].clone();
    env.install_crd(common::crd()).unwrap();
    let (_, headers, body_after) = get(&env, "/openapi/v2", "application/json").await;
    assert_ne!(headers["etag"], before, "the ETag follows the CRDs");
    assert!(body_after.len() > body.len());
    let doc: Value = serde_json::from_slice(&body_after).unwrap();
    assert_eq!(doc["swagger"], "2.0");
    let defs = doc["definitions"].as_object().unwrap();
    assert_eq!(
        defs[CR_DEF]["properties"]["spec"]["required"],
        json!(["serviceName"])
    );
    // v2 has no allOf: a reference with a description is a `$ref` beside it.
    assert_eq!(
        defs[CR_DEF]["properties"]["metadata"]["$ref"],
        "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    );
    // A field that keeps unknown fields has no type or structure in v2.
    assert_eq!(
        defs[CR_DEF]["properties"]["spec"]["properties"]["free"],
        json!({"x-kubernetes-preserve-unknown-fields": true})
    );
    assert!(defs.contains_key("io.k8s.api.apps.v1.Deployment"));
    // (JSONSchemaProps has a property named allOf, whose schema is an object.)
    assert!(!body_after.windows(9).any(|w| w == b"\"allOf\":["));
    let mut bad = Vec::new();
    dangling(&doc, "#/definitions/", defs, &mut bad);
    assert!(bad.is_empty(), "references to nothing: {bad:?}");
}

/// The parts of gnostic's `openapi_v2.Document` a reader needs to list definitions.
#[derive(Clone, PartialEq, prost::Message)]
struct Document {
    #[prost(string, tag = "1")]
    swagger: String,
    #[prost(message, optional, tag = "9")]
    definitions: Option<Definitions>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Definitions {
    #[prost(message, repeated, tag = "1")]
    additional_properties: Vec<NamedSchema>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct NamedSchema {
    #[prost(string, tag = "1")]
    name: String,
}

#[tokio::test]
async fn v2_protobuf_merges_builtin_and_crd_definitions() {
    let env = common::env_with_crd();
    let (status, headers, body) = get(&env, "/openapi/v2", V2_PROTOBUF).await;
    assert_eq!(status, 200);
    assert_eq!(
        headers["content-type"],
        "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    );
    let doc = Document::decode(body).unwrap();
    assert_eq!(doc.swagger, "2.0");
    let names: Vec<String> = doc
        .definitions
        .unwrap()
        .additional_properties
        .into_iter()
        .map(|d| d.name)
        .collect();
    for want in [
        "io.k8s.api.core.v1.Pod",
        CR_DEF,
        "dev.knative.samples.v1alpha1.AddressableServiceList",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} missing");
    }
}
