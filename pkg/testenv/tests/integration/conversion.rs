//! CRDs that convert between their versions through a webhook: with a
//! converter registered in process, and through the CRD's own webhook over
//! HTTPS, as kube-apiserver calls it.

use std::sync::Arc;

use futures::StreamExt;
use kinject_testenv::TestEnv;
use kube::api::{DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::{Value, json};

use crate::common::{ReplicasAsText, ReviewServer, conversion_answer, widgets};

/// The Widget CRD: `v1` stored, `v1alpha1` served, converted by the
/// webhook of Service `default/webhook` at `/resource-conversion`.
fn widgets_crd(ca_bundle: &str) -> Value {
    let schema = json!({"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}});
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.tutorial.example.com"},
        "spec": {
            "group": "tutorial.example.com", "scope": "Namespaced",
            "names": {"kind": "Widget", "listKind": "WidgetList", "plural": "widgets", "singular": "widget"},
            "conversion": {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"],
                "clientConfig": {"caBundle": ca_bundle,
                    "service": {"name": "webhook", "namespace": "default", "path": "/resource-conversion"}}}},
            "versions": [
                {"name": "v1", "served": true, "storage": true, "schema": schema},
                {"name": "v1alpha1", "served": true, "storage": false, "schema": schema},
            ],
        },
    })
}

/// A testenv whose Widget CRD converts through a webhook on this machine,
/// answering with `ReplicasAsText`.
async fn served_by_a_webhook() -> (ReviewServer, TestEnv) {
    let webhook = ReviewServer::start("webhook.default.svc", |review| {
        conversion_answer(review, &ReplicasAsText)
    })
    .await;
    let env = TestEnv::new();
    env.route_service("default", "webhook", 443, webhook.addr);
    env.create_object(widgets_crd(&webhook.ca_bundle())).unwrap();
    (webhook, env)
}

/// A CRD that converts through a webhook, with a converter registered:
/// objects are stored in the storage version, and reads, lists, watch
/// events, updates and patches in the other version are converted both
/// ways; a write in the storage version that changes nothing after
/// conversion is no write; an object that does not convert is refused with
/// the webhook's failure, and nothing is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registered_converter_converts_every_request() {
    let env = TestEnv::builder()
        .converter("widgets.tutorial.example.com", Arc::new(ReplicasAsText))
        .build();
    env.create_object(widgets_crd("")).unwrap();
    each_version_sees_the_others_writes(&env, "registered").await;
}

/// The same through the CRD's own webhook, called over HTTPS with the
/// CRD's `caBundle`: kube-apiserver's `ConversionReview`s, a list in one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_crds_webhook_converts_every_request_over_https() {
    let (webhook, env) = served_by_a_webhook().await;
    each_version_sees_the_others_writes(&env, "webhook").await;

    let reviews = webhook.reviews();
    let first = &reviews[0];
    assert_eq!(first["path"], json!("/resource-conversion?timeout=30s"));
    assert_eq!(first["apiVersion"], json!("apiextensions.k8s.io/v1"));
    assert_eq!(first["kind"], json!("ConversionReview"));
    assert!(
        reviews.iter().all(|r| r["request"]["objects"]
            .as_array()
            .unwrap()
            .iter()
            .all(|o| o["apiVersion"] != r["request"]["desiredAPIVersion"])),
        "the webhook is asked only for another version"
    );

    // A list in the other version is one review, whatever its length.
    let v1alpha1 = widgets(&env, "v1alpha1");
    for name in ["a", "b", "c"] {
        let widget: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "tutorial.example.com/v1", "kind": "Widget",
            "metadata": {"name": name}, "spec": {"replicas": 2}}))
        .unwrap();
        widgets(&env, "v1")
            .create(&PostParams::default(), &widget)
            .await
            .unwrap();
    }
    let before = webhook.reviews().len();
    let listed = v1alpha1.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), 4);
    let reviews = webhook.reviews();
    assert_eq!(reviews.len(), before + 1, "one review for the list");
    assert_eq!(reviews[before]["request"]["objects"].as_array().unwrap().len(), 4);
}

/// A watch in the other version sees each change converted, as it happens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_sees_changes_converted_by_the_webhook() {
    let (_webhook, env) = served_by_a_webhook().await;
    let (v1, v1alpha1) = (widgets(&env, "v1"), widgets(&env, "v1alpha1"));
    let widget: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "tutorial.example.com/v1", "kind": "Widget",
        "metadata": {"name": "w"}, "spec": {"replicas": 1}}))
    .unwrap();
    v1.create(&PostParams::default(), &widget).await.unwrap();
    let mut events = v1alpha1
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    for replicas in [2, 3] {
        v1.patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": replicas}})),
        )
        .await
        .unwrap();
    }
    let mut seen = Vec::new();
    while seen.len() < 3 {
        match events.next().await.unwrap().unwrap() {
            WatchEvent::Added(o) | WatchEvent::Modified(o) => seen.push(o.data["spec"]["replicas"].clone()),
            WatchEvent::Bookmark(_) => {}
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(seen, [json!("1"), json!("2"), json!("3")]);
}

/// A webhook that cannot be reached fails what needs it with
/// kube-apiserver's 500, and only that: the storage version reads on.
#[tokio::test]
async fn a_conversion_webhook_that_is_down_fails_reads_and_writes_in_other_versions() {
    let webhook = ReviewServer::start("webhook.default.svc", |review| {
        conversion_answer(review, &ReplicasAsText)
    })
    .await;
    let env = TestEnv::new();
    env.create_object(widgets_crd(&webhook.ca_bundle())).unwrap();
    let (v1, v1alpha1) = (widgets(&env, "v1"), widgets(&env, "v1alpha1"));
    let widget = |version: &str, name: &str, replicas: Value| -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": format!("tutorial.example.com/{version}"), "kind": "Widget",
            "metadata": {"name": name}, "spec": {"replicas": replicas}}))
        .unwrap()
    };
    v1.create(&PostParams::default(), &widget("v1", "w", json!(1)))
        .await
        .unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    env.route_service("default", "webhook", 443, closed);
    let refused = |from: &str| {
        format!(
            "conversion webhook for tutorial.example.com/{from}, Kind=Widget failed: Post \"https://webhook.default.svc:443/resource-conversion?timeout=30s\": dial tcp {closed}: connect: connection refused"
        )
    };
    let status = |e: kube::Error| match e {
        kube::Error::Api(s) => *s,
        other => panic!("{other:?}"),
    };

    let err = status(v1alpha1.get("w").await.unwrap_err());
    assert_eq!(
        (err.code, err.reason.as_str(), err.message),
        (500, "", refused("v1"))
    );
    let err = status(v1alpha1.list(&ListParams::default()).await.unwrap_err());
    assert_eq!((err.code, err.message), (500, refused("v1")));
    let err = status(
        v1alpha1
            .create(&PostParams::default(), &widget("v1alpha1", "x", json!("2")))
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.message), (500, refused("v1alpha1")));
    assert!(v1.get_opt("x").await.unwrap().is_none(), "nothing is stored");
    assert_eq!(v1.get("w").await.unwrap().data["spec"]["replicas"], json!(1));

    // Back up, the webhook's own refusal is the message.
    env.route_service("default", "webhook", 443, webhook.addr);
    let err = status(
        v1alpha1
            .create(&PostParams::default(), &widget("v1alpha1", "x", json!("many")))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 500);
    assert!(
        err.message.starts_with(
            "conversion webhook for tutorial.example.com/v1alpha1, Kind=Widget failed: spec.replicas: \"many\""
        ),
        "{}",
        err.message
    );
    assert_eq!(
        v1alpha1.get("w").await.unwrap().data["spec"]["replicas"],
        json!("1")
    );
}

/// Creates, reads, updates, patches, lists and watches a Widget in both
/// versions; `tag` keeps this run's kubectl files apart.
async fn each_version_sees_the_others_writes(env: &TestEnv, tag: &str) {
    let api = |version: &str| widgets(env, version);
    let (v1, v1alpha1) = (api("v1"), api("v1alpha1"));
    let replicas = |o: &DynamicObject| o.data["spec"]["replicas"].clone();
    let widget: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "tutorial.example.com/v1alpha1", "kind": "Widget",
        "metadata": {"name": "w"}, "spec": {"replicas": "3"}}))
    .unwrap();
    let created = v1alpha1.create(&PostParams::default(), &widget).await.unwrap();
    assert_eq!(replicas(&created), json!("3"));
    let mut stored = v1.get("w").await.unwrap();
    assert_eq!(replicas(&stored), json!(3));

    stored.data["spec"]["replicas"] = json!(5);
    v1.replace("w", &PostParams::default(), &stored).await.unwrap();
    assert_eq!(replicas(&v1alpha1.get("w").await.unwrap()), json!("5"));
    let patched = v1alpha1
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": "7"}})),
        )
        .await
        .unwrap();
    assert_eq!(replicas(&patched), json!("7"));
    let seen = v1.get("w").await.unwrap();
    assert_eq!((replicas(&seen), seen.metadata.generation), (json!(7), Some(3)));
    // The same object written back in the other version is no write.
    let again = v1alpha1.get("w").await.unwrap();
    let unchanged = v1alpha1
        .replace("w", &PostParams::default(), &again)
        .await
        .unwrap();
    assert_eq!(
        unchanged.metadata.resource_version,
        again.metadata.resource_version
    );

    // Server-side apply in the other version: its fields, converted.
    let applied = v1alpha1
        .patch(
            "w",
            &PatchParams::apply("tutorial").force(),
            &Patch::Apply(
                json!({"apiVersion": "tutorial.example.com/v1alpha1", "kind": "Widget",
                "metadata": {"name": "w"}, "spec": {"replicas": "8"}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(replicas(&applied), json!("8"));
    assert_eq!(replicas(&v1.get("w").await.unwrap()), json!(8));

    let listed = v1alpha1.list(&ListParams::default()).await.unwrap();
    assert_eq!(
        listed.items.iter().map(replicas).collect::<Vec<_>>(),
        [json!("8")]
    );
    let mut events = v1alpha1
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    match events.next().await.unwrap().unwrap() {
        WatchEvent::Added(o) => assert_eq!(replicas(&o), json!("8")),
        other => panic!("{other:?}"),
    }

    let mut bad = widget.clone();
    bad.metadata.name = Some("bad".into());
    bad.data["spec"]["replicas"] = json!("many");
    let refused = v1alpha1.create(&PostParams::default(), &bad).await.unwrap_err();
    let kube::Error::Api(status) = refused else {
        panic!("{refused:?}")
    };
    assert_eq!(status.code, 500, "{status:?}");
    assert!(
        status
            .message
            .contains("conversion webhook for tutorial.example.com/v1alpha1, Kind=Widget failed"),
        "{status:?}"
    );
    assert!(v1.get_opt("bad").await.unwrap().is_none());

    kubectl_reads_either_version(env, tag).await;
}

/// Over HTTP, kubectl reads the Widget in either version.
async fn kubectl_reads_either_version(env: &TestEnv, tag: &str) {
    if !crate::kubectl::kubectl_available() {
        crate::kubectl::skip("kubectl not found on PATH");
        return;
    }
    let server = env.serve().await.unwrap();
    let dir = std::env::temp_dir().join(format!("testenv-conversion-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    server.write_kubeconfig(dir.join("kubeconfig")).unwrap();
    let kubectl = crate::kubectl::Kubectl {
        kubeconfig: dir.join("kubeconfig"),
        cache: dir.join("cache"),
    };
    for (resource, shown) in [
        ("widgets.v1alpha1.tutorial.example.com", json!("8")),
        ("widgets.v1.tutorial.example.com", json!(8)),
    ] {
        let out = kubectl
            .cmd(&["get", resource, "w", "-n", "default", "-o", "json"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let got: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(got["spec"]["replicas"], shown, "{resource}");
    }
    server.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A write that needs the conversion webhook goes through each admission
/// webhook once, as kube-apiserver sends it: the conversions are asked
/// around the webhooks, not by running them again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_webhooks_see_a_converted_write_once() {
    use base64::Engine as _;
    let (conversion, env) = served_by_a_webhook().await;
    let admission = ReviewServer::start("webhook.system.svc", |review| {
        let mut response = json!({"uid": review["request"]["uid"], "allowed": true});
        if review["path"].as_str().is_some_and(|p| p.starts_with("/mutate")) {
            let patch = json!([{"op": "add", "path": "/metadata/labels", "value": {"checked": "yes"}}]);
            response["patchType"] = json!("JSONPatch");
            response["patch"] =
                json!(base64::engine::general_purpose::STANDARD.encode(serde_json::to_vec(&patch).unwrap()));
        }
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
    })
    .await;
    env.route_service("system", "webhook", 443, admission.addr);
    for (kind, path) in [
        ("MutatingWebhookConfiguration", "/mutate"),
        ("ValidatingWebhookConfiguration", "/validate"),
    ] {
        env.create_object(json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
            "metadata": {"name": "widgets.example.dev"},
            "webhooks": [{
                "name": "widgets.example.dev",
                "clientConfig": {"service": {"namespace": "system", "name": "webhook", "path": path},
                                 "caBundle": admission.ca_bundle()},
                "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": ["tutorial.example.com"],
                           "apiVersions": ["*"], "resources": ["widgets"]}],
                "sideEffects": "None", "admissionReviewVersions": ["v1"],
            }],
        }))
        .unwrap();
    }
    let (v1, v1alpha1) = (widgets(&env, "v1"), widgets(&env, "v1alpha1"));
    let widget: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "tutorial.example.com/v1alpha1", "kind": "Widget",
        "metadata": {"name": "w"}, "spec": {"replicas": "3"}}))
    .unwrap();
    v1alpha1.create(&PostParams::default(), &widget).await.unwrap();
    let patched = v1alpha1
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": "4"}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.data["spec"]["replicas"], json!("4"));
    let stored = v1.get("w").await.unwrap();
    assert_eq!(stored.data["spec"]["replicas"], json!(4));
    assert_eq!(
        stored
            .metadata
            .labels
            .unwrap_or_default()
            .get("checked")
            .map(String::as_str),
        Some("yes")
    );
    let paths: Vec<String> = admission
        .reviews()
        .iter()
        .map(|r| {
            r["path"]
                .as_str()
                .unwrap_or_default()
                .split('?')
                .next()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(
        paths,
        ["/mutate", "/validate", "/mutate", "/validate"],
        "each webhook once per write"
    );
    assert!(!conversion.reviews().is_empty());
}
