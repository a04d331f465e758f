#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

//! The generated glue reaches the right API paths and registers informers with
//! the injection context on demand.

use std::sync::{Arc, Mutex};

use generated::apps::v1::deployment;
use generated::coordination::v1::lease;
use generated::core::v1::pod;
use generated::samples::v1alpha1::{addressableservice, simpledeployment};
use kinject_runtime::injection::Context;

/// A context whose client records request paths and answers 404.
fn recording_context() -> (Context, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        record
            .lock()
            .unwrap()
            .push(format!("{} {}", req.method(), req.uri()));
        async move {
            let body =
                r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}"#;
            http::Response::builder()
                .status(404)
                .header("content-type", "application/json")
                .body(http_body_util::Full::new(bytes::Bytes::from(body)))
        }
    });
    (Context::new(kube::Client::new(service, "default")), seen)
}

#[tokio::test]
async fn clients_use_each_kinds_path() {
    let (ctx, seen) = recording_context();
    assert!(
        addressableservice::Client::new(&ctx, "ns")
            .get("a")
            .await
            .is_err()
    );
    assert!(pod::Client::new(&ctx, "ns").get("p").await.is_err());
    assert!(lease::Client::new(&ctx, "kube-system").get("l").await.is_err());
    let _ = deployment::Client::all_namespaces(&ctx)
        .list(&Default::default())
        .await;
    let sd = apis::v1alpha1::SimpleDeployment::new("sd", Default::default());
    assert!(
        simpledeployment::Client::new(&ctx, "ns")
            .update_status(&sd)
            .await
            .is_err()
    );
    assert_eq!(
        *seen.lock().unwrap(),
        [
            "GET /apis/samples.knative.dev/v1alpha1/namespaces/ns/addressableservices/a",
            "GET /api/v1/namespaces/ns/pods/p",
            "GET /apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l",
            "GET /apis/apps/v1/deployments?",
            "PUT /apis/samples.knative.dev/v1alpha1/namespaces/ns/simpledeployments/sd/status?",
        ]
    );
}

#[tokio::test]
async fn informers_are_registered_on_first_use_and_shared() {
    let (ctx, _) = recording_context();
    assert!(ctx.informer_descriptions().is_empty());
    let first = addressableservice::get(&ctx);
    let _again = addressableservice::get(&ctx);
    assert!(addressableservice::lister(&ctx).is_empty());
    assert!(
        addressableservice::lister(&ctx)
            .namespaced("ns")
            .get("x")
            .unwrap()
            .is_none()
    );
    let selector = kube::core::Selector::from_iter([("app", "web")]);
    let _filtered = pod::get_filtered(&ctx, &selector);
    assert_eq!(
        ctx.informer_descriptions().len(),
        2,
        "{:?}",
        ctx.informer_descriptions()
    );
    assert!(!first.has_synced());
}

#[test]
fn lists_the_crds_of_the_registrys_kinds_by_group() {
    let crds = generated::samples::custom_resource_definitions().unwrap();
    let names: Vec<_> = crds.iter().map(|c| c.metadata.name.clone().unwrap()).collect();
    let registry: Vec<String> = generated::registry::custom_kinds()
        .into_iter()
        .filter(|k| k.group == "samples.knative.dev")
        .map(|k| format!("{}.{}", k.plural, k.group))
        .collect();
    assert!(names.contains(&"addressableservices.samples.knative.dev".to_owned()));
    assert_eq!(names, registry);
    let every_group = generated::testing::custom_resource_definitions().unwrap();
    assert_eq!(every_group.len(), generated::registry::custom_kinds().len());
}
