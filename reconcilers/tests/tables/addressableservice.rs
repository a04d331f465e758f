//! AddressableService table rows A1–A13 (Knative's derived matrix), plus the
//! stored objects that must not crash the controller.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use apis::v1alpha1::{AddressableService, AddressableServiceSpec, AddressableServiceStatus};
use generated::samples::v1alpha1::addressableservice;
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kinject_runtime::apis::duck::v1::Addressable;
use kinject_runtime::apis::{KRShaped, Url};
use kinject_runtime::controller::{ObjectKey, QueueSnapshot};
use kinject_testing::testenv::{ErrorStatus, Reactor};
use kinject_testing::{RowOutcome, Table, TableRow, obj};
use reconcilers::addressableservice::new_controller;

fn table(rows: Vec<TableRow>) -> Table {
    Table {
        crds: generated::testing::custom_resource_definitions().unwrap(),
        kinds: generated::registry::custom_kinds(),
        rows,
    }
}

async fn run(rows: Vec<TableRow>) {
    table(rows).run(&new_controller).await;
}

/// AddressableService ns/rut, serviceName webhook.
fn rut(generation: i64) -> AddressableService {
    let mut asvc = AddressableService::new(
        "rut",
        AddressableServiceSpec {
            service_name: "webhook".into(),
        },
    );
    asvc.metadata.namespace = Some("ns".into());
    asvc.metadata.generation = Some(generation);
    asvc
}

fn with_status(
    mut asvc: AddressableService,
    edit: impl FnOnce(&mut AddressableServiceStatus),
) -> AddressableService {
    let status = asvc.status.get_or_insert_with(Default::default);
    edit(status);
    asvc
}

fn address(url: &str) -> Option<Addressable> {
    Some(Addressable {
        url: Some(Url::parse(url).unwrap()),
        ..Addressable::default()
    })
}

fn unavailable(generation: i64) -> impl FnOnce(&mut AddressableServiceStatus) {
    move |s| {
        s.status.observed_generation = generation;
        s.mark_service_unavailable("webhook");
    }
}

fn ready(generation: i64, url: &'static str) -> impl FnOnce(&mut AddressableServiceStatus) {
    move |s| {
        s.status.observed_generation = generation;
        s.mark_service_available();
        s.address = address(url);
    }
}

fn service(namespace: &str, name: &str) -> Service {
    Service {
        metadata: ObjectMeta {
            namespace: Some(namespace.into()),
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            ports: Some(vec![ServicePort {
                port: 443,
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

const URL: &str = "http://webhook.ns.svc.cluster.local";

// Knative's row "A1 bad key" has no counterpart: the queue holds typed
// keys, so a malformed one never reaches a reconciler.

#[tokio::test]
async fn a02_not_found() {
    run(vec![TableRow {
        name: "A2 not found",
        key: "ns/missing",
        ..TableRow::default()
    }])
    .await;
}

#[tokio::test]
async fn a03_service_missing_new_generation() {
    run(vec![TableRow {
        name: "A3 service missing, new generation",
        objects: vec![obj(&rut(1))],
        key: "ns/rut",
        want_status_updates: vec![obj(&with_status(rut(1), unavailable(1)))],
        ..TableRow::default()
    }])
    .await;
}

#[tokio::test]
async fn a04_service_missing_generation_zero() {
    let want = with_status(rut(0), unavailable(0));
    assert!(
        !serde_json::to_string(&want)
            .unwrap()
            .contains("observedGeneration"),
        "0 is left out"
    );
    run(vec![TableRow {
        name: "A4 service missing, generation 0",
        objects: vec![obj(&rut(0))],
        key: "ns/rut",
        want_status_updates: vec![obj(&want)],
        ..TableRow::default()
    }])
    .await;
}

#[tokio::test]
async fn a05_service_exists() {
    run(vec![TableRow {
        name: "A5 service exists",
        objects: vec![obj(&rut(1)), obj(&service("ns", "webhook"))],
        key: "ns/rut",
        want_status_updates: vec![obj(&with_status(rut(1), ready(1, URL)))],
        // The tracker watches ns/webhook for ns/rut: a change to the Service
        // enqueues the AddressableService. The informer's initial add (and the
        // status update's echo) queued ns/rut already, so the queue is drained
        // first: the key must be absent before the Service changes and present
        // after, or the check proves nothing.
        post_conditions: Some(Box::new(|outcome| {
            Box::pin(async move {
                let key = ObjectKey::new("ns", "rut");
                await_status_update_echo(outcome).await?;
                let queue = outcome.controller.work_queue();
                while !queue.is_empty() {
                    let Some(queued) = queue.get().await else {
                        return Err("the work queue shut down while draining it".into());
                    };
                    queue.done(&queued.key);
                    queue.forget(&queued.key);
                }
                let before = queue.snapshot();
                if mentions(&before, &key) {
                    return Err(format!("ns/rut is still queued after draining: {before:?}"));
                }

                let mut svc = outcome
                    .env
                    .get_object("", "v1", "services", Some("ns"), "webhook")
                    .unwrap();
                svc["metadata"]["labels"] = serde_json::json!({"touched": "yes"});
                outcome.env.update_object(svc).map_err(|e| e.to_string())?;
                // A bound on failure only: the key normally appears within
                // milliseconds.
                let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
                while tokio::time::Instant::now() < deadline {
                    if queue.snapshot().fast.contains(&key) {
                        return Ok(());
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Err(format!(
                    "changing the Service did not enqueue ns/rut within 10 s: {:?}",
                    queue.snapshot()
                ))
            })
        })),
        ..TableRow::default()
    }])
    .await;
}

/// Waits until the AddressableService informer has delivered ns/rut as the API
/// server now stores it (the reconcile's status update), so no event for it is
/// still on its way to the controller's handler. The informer updates its cache
/// and calls its handlers in one synchronous step, and table rows run on a
/// current-thread runtime, so a cache holding that version means the handlers
/// have seen it too.
async fn await_status_update_echo(outcome: &RowOutcome<'_>) -> Result<(), String> {
    let stored = outcome
        .env
        .get_object(
            "samples.knative.dev",
            "v1alpha1",
            "addressableservices",
            Some("ns"),
            "rut",
        )
        .ok_or("ns/rut is not stored")?;
    let want = stored["metadata"]["resourceVersion"].as_str().map(str::to_owned);
    let lister = addressableservice::get(outcome.ctx).lister();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let cached = lister.get_by_key("ns", "rut").map_err(|e| e.to_string())?;
        if cached.as_ref().and_then(|a| a.metadata.resource_version.clone()) == want {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!(
                "the informer did not see ns/rut at resourceVersion {want:?} within 10 s"
            ));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// True when `key` is queued, delayed or being processed.
fn mentions(snapshot: &QueueSnapshot, key: &ObjectKey) -> bool {
    snapshot.fast.contains(key)
        || snapshot.slow.contains(key)
        || snapshot.processing.contains(key)
        || snapshot.requeued_after_processing.contains(key)
        || snapshot.waiting.iter().any(|(k, _)| k == key)
}

/// The address uses the context's cluster domain, so two contexts (or two
/// controllers) in one process can serve different clusters.
#[tokio::test]
async fn a05_service_exists_in_another_cluster_domain() {
    run(vec![TableRow {
        name: "A5 service exists, cluster domain example.internal",
        objects: vec![obj(&rut(1)), obj(&service("ns", "webhook"))],
        key: "ns/rut",
        cluster_domain: Some("example.internal"),
        want_status_updates: vec![obj(&with_status(
            rut(1),
            ready(1, "http://webhook.ns.svc.example.internal"),
        ))],
        ..TableRow::default()
    }])
    .await;
}

#[tokio::test]
async fn a06_steady_state() {
    run(vec![TableRow {
        name: "A6 steady state",
        objects: vec![
            obj(&with_status(rut(1), ready(1, URL))),
            obj(&service("ns", "webhook")),
        ],
        key: "ns/rut",
        ..TableRow::default()
    }])
    .await;
}

#[tokio::test]
async fn a07_service_name_changed() {
    let before = with_status(rut(2), ready(1, "http://old-webhook.ns.svc.cluster.local"));
    run(vec![TableRow {
        name: "A7 serviceName changed",
        objects: vec![obj(&before), obj(&service("ns", "webhook"))],
        key: "ns/rut",
        want_status_updates: vec![obj(&with_status(before.clone(), ready(2, URL)))],
        ..TableRow::default()
    }])
    .await;
}

#[tokio::test]
async fn a08_service_deleted_after_ready_keeps_the_address() {
    let before = with_status(rut(1), ready(1, URL));
    let after = with_status(before.clone(), |s| s.mark_service_unavailable("webhook"));
    assert_eq!(after.status.as_ref().unwrap().address, address(URL));
    run(vec![TableRow {
        name: "A8 service deleted after ready",
        objects: vec![obj(&before)],
        key: "ns/rut",
        want_status_updates: vec![obj(&after)],
        ..TableRow::default()
    }])
    .await;
}

#[tokio::test]
async fn a09_status_update_fails() {
    run(vec![TableRow {
        name: "A9 status update fails",
        objects: vec![obj(&rut(1)), obj(&service("ns", "webhook"))],
        key: "ns/rut",
        reactors: vec![Reactor::on("update", "addressableservices")],
        want_err: true,
        want_status_updates: vec![obj(&with_status(rut(1), ready(1, URL)))],
        want_events: vec![
            r#"Warning UpdateFailed Failed to update status for "rut": inducing failure for update addressableservices"#
                .into(),
        ],
        ..TableRow::default()
    }])
    .await;
}

#[tokio::test]
async fn a10_status_conflict_then_success() {
    let want = obj(&with_status(rut(1), ready(1, URL)));
    run(vec![TableRow {
        name: "A10 status conflict then success",
        objects: vec![obj(&rut(1)), obj(&service("ns", "webhook"))],
        key: "ns/rut",
        reactors: vec![
            Reactor::on("update", "addressableservices")
                .subresource("status")
                .times(1)
                .respond(ErrorStatus::conflict()),
        ],
        want_status_updates: vec![want.clone(), want],
        post_conditions: Some(Box::new(|outcome| {
            Box::pin(async move {
                // The retry read the object from the API server, not the cache.
                let verbs: Vec<String> = outcome
                    .env
                    .actions()
                    .iter()
                    .filter(|a| a.resource == "addressableservices" && a.verb != "watch" && a.verb != "list")
                    .map(|a| format!("{} {}", a.verb, a.subresource))
                    .collect();
                if verbs == ["update status", "get ", "update status"] {
                    Ok(())
                } else {
                    Err(format!("requests were {verbs:?}"))
                }
            })
        })),
        ..TableRow::default()
    }])
    .await;
}

#[tokio::test]
async fn a11_being_deleted_without_finalizer() {
    let mut deleting = rut(1);
    deleting.metadata.deletion_timestamp = Some(Time("2026-01-01T00:00:00Z".parse().unwrap()));
    run(vec![TableRow {
        name: "A11 being deleted, no finalizer",
        objects: vec![obj(&deleting), obj(&service("ns", "webhook"))],
        key: "ns/rut",
        ..TableRow::default()
    }])
    .await;
}

#[tokio::test]
async fn a12_not_leader() {
    run(vec![TableRow {
        name: "A12 not leader",
        objects: vec![obj(&rut(1)), obj(&service("ns", "webhook"))],
        key: "ns/rut",
        not_leader: true,
        // The default observe_kind skips keys this replica does not lead.
        want_error: Some(r#"skipped key: "ns/rut""#),
        ..TableRow::default()
    }])
    .await;
}

/// Ready=False, `InvalidServiceName`, with `message`.
fn invalid_service_name(
    generation: i64,
    message: &'static str,
) -> impl FnOnce(&mut AddressableServiceStatus) {
    move |s| {
        s.status.observed_generation = generation;
        s.initialize_conditions();
        AddressableService::condition_set()
            .manage(&mut s.status.conditions)
            .mark_false(
                &kinject_runtime::apis::ConditionType::READY,
                "InvalidServiceName",
                message,
            );
    }
}

/// A serviceName that cannot name a Service: Knative's tracker rejects the
/// reference and the object keeps `NewObservedGenFailure` while the key is
/// retried forever; here Ready says which field and why, once.
#[tokio::test]
async fn a13_invalid_service_name_says_which_field_and_why() {
    let mut bad = rut(1);
    bad.spec.service_name = "Bad_Name".into();
    let message = "invalid value: Bad_Name: spec.serviceName\n\
        a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic \
        character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for \
        validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
    run(vec![TableRow {
        name: "A13 invalid serviceName",
        objects: vec![obj(&bad)],
        key: "ns/rut",
        want_status_updates: vec![obj(&with_status(bad.clone(), invalid_service_name(1, message)))],
        want_events: vec![format!("Warning InvalidServiceName {message}")],
        ..TableRow::default()
    }])
    .await;
}

#[tokio::test]
async fn an_empty_service_name_ends_in_a_status_not_a_crash() {
    let mut empty = rut(1);
    empty.spec.service_name = String::new();
    let message = "missing field(s): spec.serviceName";
    run(vec![TableRow {
        name: "empty serviceName",
        objects: vec![obj(&empty)],
        key: "ns/rut",
        want_status_updates: vec![obj(&with_status(empty.clone(), invalid_service_name(1, message)))],
        want_events: vec![format!("Warning InvalidServiceName {message}")],
        ..TableRow::default()
    }])
    .await;
}
