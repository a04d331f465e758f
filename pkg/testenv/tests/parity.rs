#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Answers that a differential run against kube-apiserver 1.36 found different: each
//! test walks one of them through a real `kube::Client`.

mod common;

use kinject_testenv::TestEnv;
use serde_json::{Value, json};

const WIDGETS: &str = "/apis/example.com/v1/namespaces/default/widgets";
const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

fn widget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    })
}

fn widget(name: &str, finalizers: &[&str]) -> String {
    json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": name, "finalizers": finalizers}, "spec": {"size": 1}})
    .to_string()
}

async fn send(
    client: &kube::Client,
    method: &str,
    uri: &str,
    content_type: &str,
    body: &str,
) -> (u16, Value) {
    common::send_bytes(
        client,
        method,
        uri,
        &[("content-type", content_type)],
        body.as_bytes().to_vec(),
    )
    .await
}

async fn env_with_widgets() -> TestEnv {
    let env = TestEnv::new();
    env.install_crd(widget_crd()).unwrap();
    env
}

#[tokio::test]
async fn removing_the_last_finalizer_answers_the_patched_object_and_deletes_it() {
    let env = env_with_widgets().await;
    let client = env.client();
    let w = format!("{WIDGETS}/w");
    let (code, _) = send(
        &client,
        "POST",
        WIDGETS,
        "application/json",
        &widget("w", &["example.com/f"]),
    )
    .await;
    assert_eq!(code, 201);
    let (code, pending) = send(&client, "DELETE", &w, "application/json", "").await;
    assert_eq!(code, 200);
    assert!(pending["metadata"]["deletionTimestamp"].is_string());

    let (code, answer) = send(
        &client,
        "PATCH",
        &w,
        "application/merge-patch+json",
        r#"{"metadata":{"finalizers":null}}"#,
    )
    .await;
    // kube-apiserver answers with the object the write made, finalizers gone and at
    // the revision it was made on, while the stored object is deleted.
    assert_eq!(code, 200);
    assert_eq!(answer["metadata"].get("finalizers"), None, "{answer}");
    assert_eq!(
        answer["metadata"]["resourceVersion"],
        pending["metadata"]["resourceVersion"]
    );
    assert!(answer["metadata"]["deletionTimestamp"].is_string());
    let (code, _) = send(&client, "GET", &w, "application/json", "").await;
    assert_eq!(code, 404);

    // A PUT that empties them answers the same way.
    let (code, _) = send(
        &client,
        "POST",
        WIDGETS,
        "application/json",
        &widget("v", &["example.com/f"]),
    )
    .await;
    assert_eq!(code, 201);
    let (_, mut pending) = send(&client, "DELETE", &format!("{WIDGETS}/v"), "application/json", "").await;
    pending["metadata"]["finalizers"] = json!([]);
    let (code, answer) = send(
        &client,
        "PUT",
        &format!("{WIDGETS}/v"),
        "application/json",
        &pending.to_string(),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(answer["metadata"]["finalizers"], json!([]));
    let (code, _) = send(&client, "GET", &format!("{WIDGETS}/v"), "application/json", "").await;
    assert_eq!(code, 404);
}

#[tokio::test]
async fn a_deleted_crd_is_gone_at_once_with_its_instances() {
    let env = env_with_widgets().await;
    let server = env.serve().await.unwrap();
    let client = server.client().unwrap();
    for (name, fins) in [("a", &[][..]), ("b", &["example.com/f"][..])] {
        let (code, _) = send(&client, "POST", WIDGETS, "application/json", &widget(name, fins)).await;
        assert_eq!(code, 201);
    }
    // "b" goes the way of the finalizer removal above before the CRD is deleted.
    send(&client, "DELETE", &format!("{WIDGETS}/b"), "application/json", "").await;
    let (code, _) = send(
        &client,
        "PATCH",
        &format!("{WIDGETS}/b"),
        "application/merge-patch+json",
        r#"{"metadata":{"finalizers":[]}}"#,
    )
    .await;
    assert_eq!(code, 200);

    let crd = format!("{CRDS}/widgets.example.com");
    let (code, body) = send(
        &client,
        "DELETE",
        &crd,
        "application/json",
        r#"{"propagationPolicy":"Background"}"#,
    )
    .await;
    assert_eq!(code, 200);
    assert!(body["metadata"]["deletionTimestamp"].is_string());
    // The CRD finalizer runs before the answer: by the next request the instances and
    // the CRD are gone and the resource is no longer served.
    let (code, _) = send(&client, "GET", &crd, "application/json", "").await;
    assert_eq!(code, 404);
    assert!(
        env.list_objects("example.com", "v1", "widgets", Some("default"))
            .is_empty()
    );
    let (code, _) = send(&client, "GET", WIDGETS, "application/json", "").await;
    assert_eq!(code, 404);
}
