//! What kube-apiserver prints for a CRD's `additionalPrinterColumns`, how it validates
//! them, and the limit on the size of an object's annotations.

use crate::common;

use serde_json::{Value, json};

async fn send(
    client: &kube::Client,
    method: &str,
    uri: &str,
    content_type: &str,
    accept: &str,
    body: &Value,
) -> (u16, Value) {
    let body = if body.is_null() {
        Vec::new()
    } else {
        body.to_string().into_bytes()
    };
    common::send_bytes(
        client,
        method,
        uri,
        &[("content-type", content_type), ("accept", accept)],
        body,
    )
    .await
}

async fn post(client: &kube::Client, uri: &str, body: &Value) -> (u16, Value) {
    send(client, "POST", uri, "application/json", "application/json", body).await
}

async fn table(client: &kube::Client, uri: &str) -> Value {
    let (code, t) = send(
        client,
        "GET",
        uri,
        "application/json",
        "application/json;as=Table;v=v1;g=meta.k8s.io",
        &Value::Null,
    )
    .await;
    assert_eq!(code, 200, "{t}");
    t
}

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

fn column(name: &str, ty: &str, path: &str) -> Value {
    json!({"name": name, "type": ty, "jsonPath": path})
}

/// A namespaced `widgets.example.com` whose objects keep any field, with these printer
/// columns on each of its versions.
fn widget_crd(versions: &[(&str, Vec<Value>)]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .enumerate()
        .map(|(i, (name, columns))| {
            let mut v = json!({
                "name": name, "served": true, "storage": i == 0,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
            });
            if !columns.is_empty() {
                v["additionalPrinterColumns"] = json!(columns);
            }
            v
        })
        .collect();
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
            "versions": versions
        }
    })
}

fn widget() -> Value {
    json!({
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": "default"},
        "spec": {"replicas": 3, "ratio": 0.5, "paused": false, "selector": {"app": "w", "tier": "<web>"}},
        "status": {
            "active": [{"name": "first"}, {"name": "second"}],
            "conditions": [
                {"type": "Synced", "status": "False"},
                {"type": "Ready", "status": "True", "lastTransitionTime": "not a time"}
            ]
        }
    })
}

#[tokio::test]
async fn printer_columns_show_the_first_value_their_jsonpath_finds() {
    let env = kinject_testenv::TestEnv::new();
    let client = env.client();
    let mut wide = column("Second", "string", ".status.active[1].name");
    wide["priority"] = json!(1);
    wide["description"] = json!("the second one");
    wide["format"] = json!("password");
    let columns = vec![
        column("Active", "string", ".status.active[*].name"),
        column(
            "Ready",
            "string",
            ".status.conditions[?(@.type==\"Ready\")].status",
        ),
        column("Replicas", "integer", ".spec.replicas"),
        column("Ratio", "number", ".spec.ratio"),
        column("Paused", "boolean", ".spec.paused"),
        column("Selector", "string", ".spec.selector"),
        column("Missing", "string", ".status.missing"),
        column("Out", "integer", ".status.active[5].name"),
        column(
            "Since",
            "date",
            ".status.conditions[?(@.type==\"Ready\")].lastTransitionTime",
        ),
        wide,
    ];
    let (code, body) = post(&client, CRDS, &widget_crd(&[("v1", columns)])).await;
    assert_eq!(code, 201, "{body}");
    let (code, body) = post(
        &client,
        "/apis/example.com/v1/namespaces/default/widgets",
        &widget(),
    )
    .await;
    assert_eq!(code, 201, "{body}");

    let t = table(&client, "/apis/example.com/v1/namespaces/default/widgets").await;
    let defs = t["columnDefinitions"].as_array().unwrap();
    let names: Vec<&str> = defs.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "Name", "Active", "Ready", "Replicas", "Ratio", "Paused", "Selector", "Missing", "Out", "Since",
            "Second"
        ]
    );
    assert_eq!(defs[0]["format"], json!("name"));
    assert_eq!(
        defs[1],
        json!({"name": "Active", "type": "string", "format": "", "priority": 0,
               "description": "Custom resource definition column (in JSONPath format): .status.active[*].name"})
    );
    assert_eq!(
        defs[10],
        json!({"name": "Second", "type": "string", "format": "password", "priority": 1,
               "description": "the second one"})
    );
    assert_eq!(
        t["rows"][0]["cells"],
        json!([
            "w",
            "first",
            "True",
            3,
            0.5,
            false,
            "{\"app\":\"w\",\"tier\":\"\\u003cweb\\u003e\"}",
            null,
            null,
            "<invalid>",
            "second"
        ])
    );
}

#[tokio::test]
async fn a_crd_without_printer_columns_prints_its_age() {
    let env = kinject_testenv::TestEnv::new();
    let client = env.client();
    let (code, body) = post(&client, CRDS, &widget_crd(&[("v1", vec![])])).await;
    assert_eq!(code, 201, "{body}");
    let (code, body) = post(
        &client,
        "/apis/example.com/v1/namespaces/default/widgets",
        &widget(),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let t = table(&client, "/apis/example.com/v1/namespaces/default/widgets").await;
    let defs = t["columnDefinitions"].as_array().unwrap();
    assert_eq!(defs.len(), 2);
    assert_eq!(defs[1]["name"], json!("Age"));
    assert_eq!(defs[1]["type"], json!("date"));
    assert!(
        defs[1]["description"]
            .as_str()
            .unwrap()
            .starts_with("CreationTimestamp is a timestamp")
    );
    let age = t["rows"][0]["cells"][1].as_str().unwrap();
    assert!(age.starts_with(|c: char| c.is_ascii_digit()), "{age}");
}

#[tokio::test]
async fn a_column_whose_jsonpath_does_not_parse_ends_the_columns() {
    let env = kinject_testenv::TestEnv::new();
    let client = env.client();
    let columns = vec![
        column("Replicas", "integer", ".spec.replicas"),
        // Starts with a dot, so validation lets it through; client-go cannot parse it.
        column("Broken", "string", ".spec.selector[app"),
        column("Paused", "boolean", ".spec.paused"),
    ];
    let (code, body) = post(&client, CRDS, &widget_crd(&[("v1", columns)])).await;
    assert_eq!(code, 201, "{body}");
    let (code, body) = post(
        &client,
        "/apis/example.com/v1/namespaces/default/widgets",
        &widget(),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let t = table(&client, "/apis/example.com/v1/namespaces/default/widgets").await;
    let names: Vec<&str> = t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Name", "Replicas"]);
    assert_eq!(t["rows"][0]["cells"], json!(["w", 3]));
}

#[tokio::test]
async fn printer_columns_are_validated_with_kube_apiserver_messages() {
    let env = kinject_testenv::TestEnv::new();
    let client = env.client();
    let mut bad_format = column("F", "string", ".spec.f");
    bad_format["format"] = json!("uuid");
    let columns = vec![
        json!({"type": "string", "jsonPath": ".spec.a"}),
        json!({"name": "T", "jsonPath": ".spec.b"}),
        column("U", "str", ".spec.c"),
        bad_format,
        json!({"name": "P", "type": "string"}),
        column("Q", "string", "spec.d"),
    ];
    let (code, body) = post(&client, CRDS, &widget_crd(&[("v1", columns.clone())])).await;
    assert_eq!(code, 422, "{body}");
    // Columns every version shares are validated once, where apiextensions keeps them.
    let at = "spec.additionalPrinterColumns";
    assert_eq!(
        body["message"],
        json!(format!(
            "CustomResourceDefinition.apiextensions.k8s.io \"widgets.example.com\" is invalid: [\
             {at}[0].name: Required value, \
             {at}[1].type: Required value: must be one of boolean,date,integer,number,string, \
             {at}[2].type: Invalid value: \"str\": must be one of boolean,date,integer,number,string, \
             {at}[3].format: Invalid value: \"uuid\": must be one of byte,date,date-time,double,float,int32,int64,password, \
             {at}[4].JSONPath: Required value, \
             {at}[5].JSONPath: Invalid value: \"spec.d\": must be a simple json path starting with .]"
        ))
    );
    let causes = body["details"]["causes"].as_array().unwrap();
    assert_eq!(
        causes[0],
        json!({"reason": "FieldValueRequired", "message": "Required value", "field": format!("{at}[0].name")})
    );

    // Columns that differ between versions are validated where each version has them.
    let (code, body) = post(
        &client,
        CRDS,
        &widget_crd(&[
            ("v1", vec![column("A", "string", ".a")]),
            ("v2", vec![column("A", "text", ".a")]),
        ]),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(
        body["message"],
        json!(
            "CustomResourceDefinition.apiextensions.k8s.io \"widgets.example.com\" is invalid: \
             spec.versions[1].additionalPrinterColumns[0].type: Invalid value: \"text\": \
             must be one of boolean,date,integer,number,string"
        )
    );
}

const LIMIT: usize = 256 * 1024;

fn configmap(name: &str, annotation: usize) -> Value {
    // The key counts too: "k" plus the value make `annotation` bytes.
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "annotations": {"k": "v".repeat(annotation - 1)}}
    })
}

fn assert_too_long(code: u16, body: &Value, what: &str) {
    assert_eq!(code, 422, "{body}");
    assert_eq!(
        body["message"],
        json!(format!(
            "{what} is invalid: metadata.annotations: Too long: may not be more than 262144 bytes"
        ))
    );
    assert_eq!(body["reason"], json!("Invalid"));
    assert_eq!(
        body["details"]["causes"],
        json!([{"reason": "FieldValueTooLong", "message": "Too long: may not be more than 262144 bytes",
                "field": "metadata.annotations"}])
    );
}

#[tokio::test]
async fn annotations_may_add_up_to_256_kib() {
    let env = kinject_testenv::TestEnv::new();
    let client = env.client();
    let cms = "/api/v1/namespaces/default/configmaps";
    let (code, body) = post(&client, cms, &configmap("at-limit", LIMIT)).await;
    assert_eq!(code, 201, "{body}");
    let (code, body) = post(&client, cms, &configmap("over", LIMIT + 1)).await;
    assert_too_long(code, &body, "ConfigMap \"over\"");

    // An update or a patch may not grow them past the limit either.
    let mut grown = body_of(&client, &format!("{cms}/at-limit")).await;
    grown["metadata"]["annotations"]["x"] = json!("");
    let (code, body) = send(
        &client,
        "PUT",
        &format!("{cms}/at-limit"),
        "application/json",
        "application/json",
        &grown,
    )
    .await;
    assert_too_long(code, &body, "ConfigMap \"at-limit\"");
    let patch = json!({"metadata": {"annotations": {"y": "z"}}});
    let (code, body) = send(
        &client,
        "PATCH",
        &format!("{cms}/at-limit"),
        "application/merge-patch+json",
        "application/json",
        &patch,
    )
    .await;
    assert_too_long(code, &body, "ConfigMap \"at-limit\"");

    // Custom resources and CRDs themselves are held to it too.
    let (code, body) = post(&client, CRDS, &widget_crd(&[("v1", vec![])])).await;
    assert_eq!(code, 201, "{body}");
    let mut w = widget();
    w["metadata"]["annotations"] = json!({"a": "v".repeat(LIMIT)});
    let (code, body) = post(&client, "/apis/example.com/v1/namespaces/default/widgets", &w).await;
    assert_too_long(code, &body, "Widget.example.com \"w\"");
    let mut crd = widget_crd(&[("v1", vec![])]);
    crd["metadata"]["name"] = json!("gadgets.example.com");
    crd["spec"]["names"] = json!({"kind": "Gadget", "plural": "gadgets", "singular": "gadget"});
    crd["metadata"]["annotations"] = json!({"a": "v".repeat(LIMIT)});
    let (code, body) = post(&client, CRDS, &crd).await;
    assert_too_long(
        code,
        &body,
        "CustomResourceDefinition.apiextensions.k8s.io \"gadgets.example.com\"",
    );
}

async fn body_of(client: &kube::Client, uri: &str) -> Value {
    let (code, body) = send(
        client,
        "GET",
        uri,
        "application/json",
        "application/json",
        &Value::Null,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    body
}

#[tokio::test]
async fn annotation_keys_are_qualified_names() {
    let env = kinject_testenv::TestEnv::new();
    let client = env.client();
    let mut cm = configmap("keys", 10);
    cm["metadata"]["annotations"] = json!({"Example.com/Upper": "ok", "a/b/c": "x"});
    let (code, body) = post(&client, "/api/v1/namespaces/default/configmaps", &cm).await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(
        body["message"],
        json!(
            "ConfigMap \"keys\" is invalid: metadata.annotations: Invalid value: \"a/b/c\": a qualified name \
             must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an \
             alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation \
             is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' \
             (e.g. 'example.com/MyName')"
        )
    );
}
