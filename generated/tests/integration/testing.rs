#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

//! `generated::testing`: a context over testenv with the CRDs installed and
//! objects preloaded, used by a generated reconciler end to end.

use std::time::Duration;

use apis::v1alpha1::{AddressableService, AddressableServiceSpec};
use generated::core::v1::service;
use generated::samples::v1alpha1::addressableservice::{self, reconciler};
use kinject_runtime::controller::ObjectKey;
use kinject_runtime::reconciler::{
    Event, NoFinalizer, ReconcileContext, ReconcileKind, ReconcileResult, Reconciled, UniversalBucket,
};
use tokio_util::sync::CancellationToken;

fn asvc(name: &str) -> serde_json::Value {
    let mut obj = AddressableService::new(
        name,
        AddressableServiceSpec {
            service_name: "web".into(),
        },
    );
    obj.metadata.namespace = Some("ns".into());
    serde_json::to_value(obj).unwrap()
}

fn k8s_service(name: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"ports": [{"port": 80}]},
    })
}

#[tokio::test]
async fn preloaded_objects_reach_clients_informers_and_listers() {
    let (ctx, env) = kinject_testing::context(
        &generated::testing::custom_resource_definitions().unwrap(),
        [asvc("a"), k8s_service("web")],
    )
    .unwrap();
    // One CRD per kind the registry lists: a new kind changes no number here.
    assert_eq!(
        generated::testing::custom_resource_definitions().unwrap().len(),
        generated::registry::custom_kinds().len()
    );

    let got = addressableservice::Client::new(&ctx, "ns")
        .get("a")
        .await
        .unwrap();
    assert_eq!(got.spec.service_name, "web");
    assert!(
        got.metadata.uid.is_some(),
        "created through the API server's rules"
    );

    let _ = addressableservice::get(&ctx);
    let _ = service::get(&ctx);
    let shutdown = CancellationToken::new();
    ctx.start_informers(&shutdown);
    ctx.wait_for_cache_sync(Duration::from_secs(10)).await.unwrap();
    assert!(
        addressableservice::lister(&ctx)
            .namespaced("ns")
            .get("a")
            .unwrap()
            .is_some()
    );
    assert_eq!(service::lister(&ctx).len(), 1);
    // Listed by the informer: by a watch that streams the list, by default.
    assert!(
        env.actions()
            .iter()
            .any(|a| a.resource == "addressableservices" && a.lists())
    );
    shutdown.cancel();
}

struct MarkReady;

#[kinject_runtime::async_trait]
impl ReconcileKind<AddressableService> for MarkReady {
    type Finalizer = NoFinalizer;

    async fn reconcile_kind(
        &self,
        _: &ReconcileContext,
        resource: &mut AddressableService,
    ) -> ReconcileResult {
        resource
            .status
            .get_or_insert_with(Default::default)
            .mark_service_available();
        Ok(Reconciled::event(Event::normal("Reconciled", "ready")))
    }
}

#[tokio::test]
async fn a_generated_reconciler_writes_status_to_the_test_api_server() {
    let (ctx, _env) = kinject_testing::context(
        &generated::testing::custom_resource_definitions().unwrap(),
        [asvc("a")],
    )
    .unwrap();
    let controller = reconciler::new_impl(&ctx, MarkReady, reconciler::Options::default());
    controller.promote(std::sync::Arc::new(UniversalBucket));
    let shutdown = CancellationToken::new();
    ctx.start_informers(&shutdown);
    ctx.wait_for_cache_sync(Duration::from_secs(10)).await.unwrap();

    let action = controller
        .reconcile_once(&ObjectKey::new("ns", "a"))
        .await
        .unwrap();

    assert_eq!(action.requeue_delay(), None);

    let stored = addressableservice::Client::new(&ctx, "ns")
        .get("a")
        .await
        .unwrap();
    let status = stored.status.unwrap();
    assert_eq!(status.status.observed_generation, 1, "post-processing ran");
    assert!(status.is_ready(), "{status:?}");
    shutdown.cancel();
}

#[tokio::test]
async fn preloaded_objects_keep_their_status() {
    let mut obj = AddressableService::new(
        "a",
        AddressableServiceSpec {
            service_name: "web".into(),
        },
    );
    obj.metadata.namespace = Some("ns".into());
    obj.status
        .get_or_insert_with(Default::default)
        .mark_service_available();
    let (ctx, _env) = kinject_testing::context(
        &generated::testing::custom_resource_definitions().unwrap(),
        [serde_json::to_value(&obj).unwrap()],
    )
    .unwrap();
    let got = addressableservice::Client::new(&ctx, "ns")
        .get("a")
        .await
        .unwrap();
    assert!(got.status.unwrap().is_ready());
}
