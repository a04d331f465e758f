#![allow(
    dead_code,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

mod conversion_webhook;
mod review_server;

pub use conversion_webhook::{ReplicasAsText, conversion_answer, widgets};
pub use review_server::ReviewServer;

use kube::api::{Api, ApiResource, DynamicObject};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};

pub fn crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "addressableservices.samples.knative.dev"},
        "spec": {
            "group": "samples.knative.dev",
            "scope": "Namespaced",
            "names": {"kind": "AddressableService", "plural": "addressableservices",
                      "singular": "addressableservice", "shortNames": ["asvc"],
                      "categories": ["all", "knative"]},
            "versions": [{
                "name": "v1alpha1", "served": true, "storage": true,
                "subresources": {"status": {}, "scale": {
                    "specReplicasPath": ".spec.replicas",
                    "statusReplicasPath": ".status.replicas"}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {"type": "object", "required": ["serviceName"], "properties": {
                            "serviceName": {"type": "string"},
                            "replicas": {"type": "integer", "minimum": 0, "default": 1},
                            "mode": {"type": "string", "enum": ["a", "b"]},
                            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                        }},
                        "status": {"type": "object", "properties": {
                            "observedGeneration": {"type": "integer"},
                            "replicas": {"type": "integer"},
                            "address": {"type": "object", "properties": {"url": {"type": "string"}}},
                            "conditions": {"type": "array", "items": {"type": "object",
                                "properties": {"type": {"type": "string"}, "status": {"type": "string"},
                                               "reason": {"type": "string"}, "message": {"type": "string"},
                                               "lastTransitionTime": {"type": "string"}}}}
                        }}
                    }
                }}
            }]
        }
    })
}

pub fn ar() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("samples.knative.dev", "v1alpha1", "AddressableService"),
        "addressableservices",
    )
}

pub fn env_with_crd() -> kinject_testenv::TestEnv {
    let env = kinject_testenv::TestEnv::new();
    env.install_crd(crd()).expect("CRD installs");
    env
}

pub fn asvc_api(client: kube::Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client, ns, &ar())
}

pub fn asvc(name: &str, service: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "samples.knative.dev/v1alpha1",
        "kind": "AddressableService",
        "metadata": {"name": name},
        "spec": {"serviceName": service}
    }))
    .expect("valid object")
}

pub fn api_err(e: kube::Error) -> Box<kube::core::Status> {
    match e {
        kube::Error::Api(s) => s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Sends `body` as it is, with `headers`, and answers the status code and the
/// JSON body (null when the body is not JSON), for requests `kube::Api` cannot
/// make: other media types, malformed bodies, Table output.
pub async fn send_bytes(
    client: &kube::Client,
    method: &str,
    uri: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> (u16, Value) {
    let mut req = http::Request::builder().method(method).uri(uri);
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let res = client
        .send(req.body(kube::client::Body::from(body)).unwrap())
        .await
        .unwrap();
    let code = res.status().as_u16();
    let bytes = http_body_util::BodyExt::collect(res.into_body())
        .await
        .unwrap()
        .to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// A `kube::Client` from a kubeconfig, as a controller process would build one.
pub async fn client_with_kubeconfig(kubeconfig: &str) -> kube::Client {
    let kc = kube::config::Kubeconfig::from_yaml(kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}
