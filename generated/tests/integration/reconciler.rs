#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

//! Drives a generated `new_impl` end to end (without an API server): the
//! generic reconciler calls the user's reconcile, finalize and deletion hooks.

use std::sync::{Arc, Mutex};

use apis::v1alpha1::{AddressableService, AddressableServiceSpec};
use generated::samples::v1alpha1::addressableservice::{self, reconciler};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kinject_runtime::controller::{Error, ObjectKey};
use kinject_runtime::injection::Context;
use kinject_runtime::reconciler::{
    Event, FakeRecorder, FinalizeKind, ReconcileContext, ReconcileKind, ReconcileResult, Reconciled,
    SharedRecorder, UniversalBucket, WithFinalizer,
};
use kube::runtime::watcher;

/// A client that answers `PUT` with the object it was sent (a status update
/// that succeeds) and everything else with 404, recording each request.
fn context(recorder: Arc<FakeRecorder>) -> (Context, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        record
            .lock()
            .unwrap()
            .push(format!("{} {}", req.method(), req.uri().path()));
        async move {
            let (parts, body) = req.into_parts();
            let body = http_body_util::BodyExt::collect(body).await.unwrap().to_bytes();
            let (status, body) = if parts.method == http::Method::PUT {
                (200, body)
            } else {
                let not_found = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}"#;
                (404, bytes::Bytes::from(not_found))
            };
            http::Response::builder()
                .status(status)
                .header("content-type", "application/json")
                .body(http_body_util::Full::new(body))
        }
    });
    let ctx = Context::builder(kube::Client::new(service, "default"))
        .extension(SharedRecorder(recorder))
        .build();
    (ctx, seen)
}

/// Records each call in `calls`, which the test keeps a handle on.
#[derive(Default)]
struct Reconciler {
    calls: Arc<Mutex<Vec<String>>>,
}

#[kinject_runtime::async_trait]
impl ReconcileKind<AddressableService> for Reconciler {
    type Finalizer = WithFinalizer;

    async fn reconcile_kind(
        &self,
        ctx: &ReconcileContext,
        resource: &mut AddressableService,
    ) -> ReconcileResult {
        self.calls
            .lock()
            .unwrap()
            .push(format!("reconcile {}", ctx.key()));
        resource.status.get_or_insert_with(Default::default);
        Ok(Reconciled::event(Event::normal("Reconciled", "done")))
    }

    async fn observe_deletion(&self, _: &ReconcileContext, key: &ObjectKey) -> Result<(), Error> {
        self.calls.lock().unwrap().push(format!("deleted {key}"));
        Ok(())
    }
}

#[kinject_runtime::async_trait]
impl FinalizeKind<AddressableService> for Reconciler {
    async fn finalize_kind(&self, ctx: &ReconcileContext, _: &mut AddressableService) -> ReconcileResult {
        self.calls.lock().unwrap().push(format!("finalize {}", ctx.key()));
        Ok(Reconciled::done())
    }
}

fn object(name: &str, deleting: bool) -> AddressableService {
    let mut obj = AddressableService::new(
        name,
        AddressableServiceSpec {
            service_name: "svc".into(),
        },
    );
    obj.metadata.namespace = Some("ns".into());
    obj.metadata.resource_version = Some("1".into());
    obj.metadata.generation = Some(1);
    obj.metadata.finalizers = Some(vec![reconciler::DEFAULT_FINALIZER_NAME.to_owned()]);
    if deleting {
        obj.metadata.deletion_timestamp = Some(Time(Default::default()));
    }
    obj
}

#[tokio::test]
async fn new_impl_forwards_to_the_typed_traits() {
    let recorder = Arc::new(FakeRecorder::new());
    let (ctx, requests) = context(recorder.clone());
    let rec = Reconciler::default();
    let calls = rec.calls.clone();
    let controller = reconciler::new_impl(&ctx, rec, reconciler::Options::default());
    assert!(
        controller.name().ends_with(".Reconciler"),
        "{}",
        controller.name()
    );
    controller.promote(Arc::new(UniversalBucket));

    let informer = addressableservice::get(&ctx);
    informer.apply_event(watcher::Event::Apply(object("live", false)));
    informer.apply_event(watcher::Event::Apply(object("dying", true)));

    let action = controller
        .reconcile_once(&ObjectKey::new("ns", "live"))
        .await
        .unwrap();

    assert_eq!(action.requeue_delay(), None);
    let action = controller
        .reconcile_once(&ObjectKey::new("ns", "dying"))
        .await
        .unwrap();
    assert_eq!(action.requeue_delay(), None);
    let action = controller
        .reconcile_once(&ObjectKey::new("ns", "gone"))
        .await
        .unwrap();
    assert_eq!(action.requeue_delay(), None);

    assert_eq!(
        *calls.lock().unwrap(),
        ["reconcile ns/live", "finalize ns/dying", "deleted ns/gone"]
    );
    let requests = requests.lock().unwrap();
    assert_eq!(
        requests[0], "PUT /apis/samples.knative.dev/v1alpha1/namespaces/ns/addressableservices/live/status",
        "the leader writes the new status: {requests:?}"
    );
    assert!(
        recorder.events().iter().any(|e| e.contains("Reconciled")),
        "{:?}",
        recorder.events()
    );
}
