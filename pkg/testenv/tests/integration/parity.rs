//! Answers that a differential run against kube-apiserver 1.36 found different: each
//! test walks one of them through a real `kube::Client`.

use crate::common;

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

#[tokio::test]
async fn adding_a_finalizer_to_a_terminating_object_is_two_causes() {
    let env = env_with_widgets().await;
    let client = env.client();
    let w = format!("{WIDGETS}/w");
    send(
        &client,
        "POST",
        WIDGETS,
        "application/json",
        &widget("w", &["example.com/f"]),
    )
    .await;
    send(&client, "DELETE", &w, "application/json", "").await;
    let (code, st) = send(
        &client,
        "PATCH",
        &w,
        "application/merge-patch+json",
        r#"{"metadata":{"finalizers":["example.com/f","example.com/g"]}}"#,
    )
    .await;
    assert_eq!(code, 422);
    let why = "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"example.com/g\"}";
    // The message names the broken rule once; the causes list it twice, once for each
    // time kube-apiserver's update validation checks the metadata.
    assert_eq!(
        st["message"],
        format!("Widget.example.com \"w\" is invalid: metadata.finalizers: {why}")
    );
    let cause = json!({"reason": "FieldValueForbidden", "message": why, "field": "metadata.finalizers"});
    assert_eq!(st["details"]["causes"], json!([cause, cause]));
}

#[tokio::test]
async fn delete_preconditions_name_the_kind() {
    let env = env_with_widgets().await;
    let client = env.client();
    let (_, created) = send(
        &client,
        "POST",
        WIDGETS,
        "application/json",
        &widget("w-pre", &[]),
    )
    .await;
    let rv = created["metadata"]["resourceVersion"].as_str().unwrap();
    let uid = created["metadata"]["uid"].as_str().unwrap();
    let w = format!("{WIDGETS}/w-pre");
    let (code, st) = send(
        &client,
        "DELETE",
        &w,
        "application/json",
        r#"{"preconditions":{"resourceVersion":"1"}}"#,
    )
    .await;
    assert_eq!((code, st["reason"].as_str()), (409, Some("Conflict")));
    assert_eq!(
        st["message"],
        format!(
            "Operation cannot be fulfilled on Widget.example.com \"w-pre\": the ResourceVersion in the precondition (1) does not match the ResourceVersion in record ({rv}). The object might have been modified"
        )
    );
    assert_eq!(
        st["details"],
        json!({"name": "w-pre", "group": "example.com", "kind": "Widget"})
    );
    let (code, st) = send(
        &client,
        "DELETE",
        &w,
        "application/json",
        r#"{"preconditions":{"uid":"0000"}}"#,
    )
    .await;
    assert_eq!(code, 409);
    assert_eq!(
        st["message"],
        format!(
            "Operation cannot be fulfilled on Widget.example.com \"w-pre\": the UID in the precondition (0000) does not match the UID in record ({uid}). The object might have been deleted and then recreated"
        )
    );
    assert_eq!(st["details"]["kind"], "Widget");

    // The CRD registry checks a CRD's preconditions itself, in storage's words.
    let (code, st) = send(
        &client,
        "DELETE",
        &format!("{CRDS}/widgets.example.com"),
        "application/json",
        r#"{"preconditions":{"uid":"0000"}}"#,
    )
    .await;
    assert_eq!(code, 409);
    assert!(
        st["message"].as_str().unwrap().starts_with(
            "Operation cannot be fulfilled on customresourcedefinitions.apiextensions.k8s.io \"widgets.example.com\": Precondition failed: UID in precondition: 0000, UID in object meta: "
        ),
        "{st}"
    );
}

#[tokio::test]
async fn an_update_without_resource_version_names_the_resource() {
    let env = env_with_widgets().await;
    let client = env.client();
    send(&client, "POST", WIDGETS, "application/json", &widget("w", &[])).await;
    let (code, st) = send(
        &client,
        "PUT",
        &format!("{WIDGETS}/w"),
        "application/json",
        &widget("w", &[]),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        st["message"],
        "widgets.example.com \"w\" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update"
    );
    assert_eq!(
        st["details"],
        json!({"name": "w", "group": "example.com", "kind": "widgets", "causes": [{
            "reason": "FieldValueInvalid",
            "message": "Invalid value: 0: must be specified for an update",
            "field": "metadata.resourceVersion"}]})
    );
}

#[tokio::test]
async fn services_can_be_deleted_as_a_collection() {
    let env = TestEnv::new();
    let client = env.client();
    let (_, v1) = send(&client, "GET", "/api/v1", "application/json", "").await;
    let services = v1["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "services")
        .unwrap();
    assert_eq!(
        services["verbs"],
        json!([
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch"
        ])
    );
    let svc = |name: &str, app: &str| {
        json!({"metadata": {"name": name, "labels": {"app": app}},
            "spec": {"ports": [{"port": 80}]}})
        .to_string()
    };
    let base = "/api/v1/namespaces/default/services";
    for (name, app) in [("a", "x"), ("b", "x"), ("c", "y")] {
        let (code, _) = send(&client, "POST", base, "application/json", &svc(name, app)).await;
        assert_eq!(code, 201);
    }
    let (code, list) = send(
        &client,
        "DELETE",
        &format!("{base}?labelSelector=app%3Dx"),
        "application/json",
        "",
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(list["kind"], "ServiceList");
    let names: Vec<String> = env
        .list_objects("", "v1", "services", Some("default"))
        .iter()
        .map(|s| s["metadata"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["c"]);
}
