//! SimpleDeployment table rows S1–S11 (Knative's derived matrix), plus the
//! stored objects that must not crash the controller.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use apis::v1alpha1::{SimpleDeployment, SimpleDeploymentSpec, SimpleDeploymentStatus};
use k8s_openapi::api::core::v1::{Container, Pod, PodCondition, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kinject_runtime::apis::{ConditionType, KRShaped};
use kinject_runtime::controller::ObjectKey;
use kinject_testing::testenv::Reactor;
use kinject_testing::{DeleteAction, Table, TableRow, obj};
use kube::Resource;
use reconcilers::simpledeployment::new_controller;
use serde_json::{Value, json};

async fn run(rows: Vec<TableRow>) {
    Table {
        crds: generated::testing::custom_resource_definitions().unwrap(),
        kinds: generated::registry::custom_kinds(),
        rows,
    }
    .run(&new_controller)
    .await;
}

/// SimpleDeployment ns/sd.
fn sd(replicas: i32, image: &str) -> SimpleDeployment {
    let mut d = SimpleDeployment::new(
        "sd",
        SimpleDeploymentSpec {
            image: image.into(),
            replicas,
        },
    );
    d.metadata.namespace = Some("ns".into());
    d.metadata.uid = Some("8f2a2b9c-0000-4000-8000-000000000001".into());
    d.metadata.generation = Some(1);
    d
}

fn with_status(mut d: SimpleDeployment, edit: impl FnOnce(&mut SimpleDeploymentStatus)) -> SimpleDeployment {
    let status = d.status.get_or_insert_with(Default::default);
    status.status.observed_generation = d.metadata.generation.unwrap_or_default();
    edit(status);
    d
}

fn not_ready(ready: i32, missing: i32) -> impl FnOnce(&mut SimpleDeploymentStatus) {
    move |s| {
        s.ready_replicas = ready;
        s.mark_pods_not_ready(missing);
    }
}

fn all_ready(ready: i32) -> impl FnOnce(&mut SimpleDeploymentStatus) {
    move |s| {
        s.ready_replicas = ready;
        s.mark_pods_ready();
    }
}

/// A pod of `sd` (or of `owner` when given), running `image`.
fn pod(name: &str, owner: &str, namespace: &str, image: &str, ready: bool) -> Pod {
    let owner_sd = sd(1, image);
    Pod {
        metadata: ObjectMeta {
            namespace: Some(namespace.into()),
            name: Some(name.into()),
            labels: Some([("samples.knative.dev/podOwner".to_string(), owner.to_string())].into()),
            owner_references: (owner == "sd").then(|| vec![owner_sd.controller_owner_ref(&()).unwrap()]),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "user-container".into(),
                image: Some(image.into()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        status: Some(PodStatus {
            phase: Some("Running".into()),
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: if ready { "True" } else { "False" }.into(),
                ..PodCondition::default()
            }]),
            ..PodStatus::default()
        }),
    }
}

/// The pod the reconciler must create, as Knative's `makePod` builds it.
fn created_pod(image: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "sd-",
            "namespace": "ns",
            "labels": {"samples.knative.dev/podOwner": "sd"},
            "ownerReferences": [{
                "apiVersion": "samples.knative.dev/v1alpha1",
                "kind": "SimpleDeployment",
                "name": "sd",
                "uid": "8f2a2b9c-0000-4000-8000-000000000001",
                "controller": true,
                "blockOwnerDeletion": true
            }]
        },
        "spec": {"containers": [{"name": "user-container", "image": image}]}
    })
}

fn pod_delete(name: &str) -> DeleteAction {
    DeleteAction::new("pods", "ns", name)
}

/// Knative's row "S1 bad key" has no counterpart: the queue holds typed
/// keys, so a malformed one never reaches a reconciler.
#[tokio::test]
async fn s01_not_found() {
    run(vec![TableRow {
        name: "S1 not found",
        key: "ns/missing",
        ..TableRow::default()
    }])
    .await;
}

#[tokio::test]
async fn s02_fresh_two_replicas() {
    run(vec![TableRow {
        name: "S2 fresh, replicas 2",
        objects: vec![obj(&sd(2, "img:1"))],
        key: "ns/sd",
        // Two separate pod objects are sent (Knative sends one object twice,
        // which a generate-name reactor then mutates between the calls).
        want_creates: vec![created_pod("img:1"), created_pod("img:1")],
        want_status_updates: vec![obj(&with_status(sd(2, "img:1"), not_ready(0, 2)))],
        ..TableRow::default()
    }])
    .await;
}

#[tokio::test]
async fn s03_all_ready() {
    run(vec![TableRow {
        name: "S3 all ready",
        objects: vec![
            obj(&sd(2, "img:1")),
            obj(&pod("sd-00001", "sd", "ns", "img:1", true)),
            obj(&pod("sd-00002", "sd", "ns", "img:1", true)),
        ],
        key: "ns/sd",
        want_status_updates: vec![obj(&with_status(sd(2, "img:1"), all_ready(2)))],
        ..TableRow::default()
    }])
    .await;
}

#[tokio::test]
async fn s04_partially_ready() {
    run(vec![TableRow {
        name: "S4 partially ready",
        objects: vec![
            obj(&sd(2, "img:1")),
            obj(&pod("sd-00001", "sd", "ns", "img:1", true)),
            obj(&pod("sd-00002", "sd", "ns", "img:1", false)),
        ],
        key: "ns/sd",
        want_status_updates: vec![obj(&with_status(sd(2, "img:1"), not_ready(1, 1)))],
        ..TableRow::default()
    }])
    .await;
}

#[tokio::test]
async fn s05_image_changed() {
    run(vec![TableRow {
        name: "S5 image changed",
        objects: vec![
            obj(&sd(2, "img:2")),
            obj(&pod("sd-00001", "sd", "ns", "img:1", true)),
            obj(&pod("sd-00002", "sd", "ns", "img:1", true)),
        ],
        key: "ns/sd",
        want_deletes: vec![pod_delete("sd-00001"), pod_delete("sd-00002")],
        want_creates: vec![created_pod("img:2"), created_pod("img:2")],
        want_status_updates: vec![obj(&with_status(sd(2, "img:2"), not_ready(0, 2)))],
        ..TableRow::default()
    }])
    .await;
}

#[tokio::test]
async fn s06_scale_down() {
    run(vec![TableRow {
        name: "S6 scale down",
        objects: vec![
            obj(&sd(1, "img:1")),
            obj(&pod("sd-00003", "sd", "ns", "img:1", true)),
            obj(&pod("sd-00001", "sd", "ns", "img:1", true)),
            obj(&pod("sd-00002", "sd", "ns", "img:1", true)),
        ],
        key: "ns/sd",
        // Deliberate difference: listers are ordered by name, so the first two
        // pods by name go (Knative's choice depends on map order).
        want_deletes: vec![pod_delete("sd-00001"), pod_delete("sd-00002")],
        // Readiness counts the pods that existed before the reconcile, as Knative.
        want_status_updates: vec![obj(&with_status(sd(1, "img:1"), all_ready(3)))],
        ..TableRow::default()
    }])
    .await;
}

#[tokio::test]
async fn s07_zero_replicas() {
    run(vec![TableRow {
        name: "S7 replicas 0",
        objects: vec![obj(&sd(0, "img:1"))],
        key: "ns/sd",
        want_status_updates: vec![obj(&with_status(sd(0, "img:1"), all_ready(0)))],
        ..TableRow::default()
    }])
    .await;
}

#[tokio::test]
async fn s08_terminating_pod() {
    let mut terminating = pod("sd-00001", "sd", "ns", "img:1", true);
    terminating.metadata.deletion_timestamp = Some(Time("2026-01-01T00:00:00Z".parse().unwrap()));
    terminating.metadata.finalizers = Some(vec!["example.com/wait".into()]);
    run(vec![TableRow {
        name: "S8 terminating pod",
        objects: vec![obj(&sd(1, "img:1")), obj(&terminating)],
        key: "ns/sd",
        want_status_updates: vec![obj(&with_status(sd(1, "img:1"), not_ready(0, 1)))],
        ..TableRow::default()
    }])
    .await;
}

#[tokio::test]
async fn s09_foreign_pods_are_ignored() {
    run(vec![TableRow {
        name: "S9 foreign pods ignored",
        objects: vec![
            obj(&sd(1, "img:1")),
            obj(&pod("other-00001", "other", "ns", "img:1", true)),
            obj(&pod("sd-00001", "sd", "elsewhere", "img:1", true)),
        ],
        key: "ns/sd",
        want_creates: vec![created_pod("img:1")],
        want_status_updates: vec![obj(&with_status(sd(1, "img:1"), not_ready(0, 1)))],
        ..TableRow::default()
    }])
    .await;
}

fn new_generation_failure(ready_replicas: i32) -> impl FnOnce(&mut SimpleDeploymentStatus) {
    move |s| {
        s.ready_replicas = ready_replicas;
        s.initialize_conditions();
        SimpleDeployment::condition_set()
            .manage(&mut s.status.conditions)
            .mark_unknown(
                &ConditionType::READY,
                "NewObservedGenFailure",
                "unsuccessfully observed a new generation",
            );
    }
}

#[tokio::test]
async fn s10_create_fails() {
    run(vec![TableRow {
        name: "S10 create fails",
        objects: vec![obj(&sd(2, "img:1"))],
        key: "ns/sd",
        reactors: vec![Reactor::on("create", "pods")],
        want_err: true,
        want_creates: vec![created_pod("img:1")],
        want_status_updates: vec![obj(&with_status(sd(2, "img:1"), new_generation_failure(0)))],
        want_events: vec![
            "Warning InternalError failed to create pod: inducing failure for create pods".into(),
        ],
        ..TableRow::default()
    }])
    .await;
}

#[tokio::test]
async fn s11_delete_fails() {
    run(vec![TableRow {
        name: "S11 delete fails",
        objects: vec![
            obj(&sd(1, "img:2")),
            obj(&pod("sd-00001", "sd", "ns", "img:1", true)),
        ],
        key: "ns/sd",
        reactors: vec![Reactor::on("delete", "pods")],
        want_err: true,
        want_deletes: vec![pod_delete("sd-00001")],
        // The matrix lists no status update here, but the generation is new, so
        // the status records it, as in S10.
        want_status_updates: vec![obj(&with_status(sd(1, "img:2"), new_generation_failure(0)))],
        want_events: vec![
            "Warning InternalError failed to delete pod: inducing failure for delete pods".into(),
        ],
        ..TableRow::default()
    }])
    .await;
}

#[tokio::test]
async fn negative_replicas_end_in_a_status_and_an_event() {
    run(vec![TableRow {
        name: "negative replicas",
        objects: vec![obj(&sd(-1, "img:1"))],
        key: "ns/sd",
        want_status_updates: vec![obj(&with_status(sd(-1, "img:1"), |s| {
            s.mark_invalid_spec("invalid value: -1: spec.replicas")
        }))],
        want_events: vec!["Warning InvalidSpec invalid value: -1: spec.replicas".into()],
        ..TableRow::default()
    }])
    .await;
}

#[tokio::test]
async fn an_invalid_spec_is_announced_once() {
    // The status update of the first pass brings the object back; the second
    // pass finds the same complaint already in the status.
    let announced = with_status(sd(-1, "img:1"), |s| {
        s.mark_invalid_spec("invalid value: -1: spec.replicas")
    });
    let changed_again = with_status(sd(-2, "img:1"), |s| {
        s.mark_invalid_spec("invalid value: -1: spec.replicas")
    });
    run(vec![
        TableRow {
            name: "the same invalid spec, already in the status",
            objects: vec![obj(&announced)],
            key: "ns/sd",
            ..TableRow::default()
        },
        TableRow {
            name: "another invalid value",
            objects: vec![obj(&changed_again)],
            key: "ns/sd",
            want_status_updates: vec![obj(&with_status(sd(-2, "img:1"), |s| {
                s.mark_invalid_spec("invalid value: -2: spec.replicas")
            }))],
            want_events: vec!["Warning InvalidSpec invalid value: -2: spec.replicas".into()],
            ..TableRow::default()
        },
    ])
    .await;
}

#[tokio::test]
async fn a_pod_without_containers_is_replaced() {
    let mut empty = pod("sd-00001", "sd", "ns", "img:1", true);
    if let Some(spec) = empty.spec.as_mut() {
        spec.containers.clear();
    }
    run(vec![TableRow {
        name: "pod with no containers",
        objects: vec![obj(&sd(1, "img:1")), obj(&empty)],
        key: "ns/sd",
        want_deletes: vec![pod_delete("sd-00001")],
        want_creates: vec![created_pod("img:1")],
        want_status_updates: vec![obj(&with_status(sd(1, "img:1"), not_ready(0, 1)))],
        ..TableRow::default()
    }])
    .await;
}

/// More missing pods than one reconcile creates: BURST_REPLICAS now, in
/// slow-start batches, and the rest after an immediate requeue.
#[tokio::test]
async fn s12_a_large_gap_is_closed_over_several_reconciles() {
    use reconcilers::simpledeployment::BURST_REPLICAS;

    let replicas = i32::try_from(BURST_REPLICAS + 1).unwrap();
    run(vec![TableRow {
        name: "S12 more pods missing than one reconcile creates",
        objects: vec![obj(&sd(replicas, "img:1"))],
        key: "ns/sd",
        want_requeue_after: Some(std::time::Duration::ZERO),
        want_creates: vec![created_pod("img:1"); BURST_REPLICAS],
        want_status_updates: vec![obj(&with_status(
            sd(replicas, "img:1"),
            new_generation_failure(0),
        ))],
        ..TableRow::default()
    }])
    .await;
}

/// A reconcile that runs before the pod cache shows the pods the previous one
/// created must not create them again (client-go's expectations). The pod
/// informer here is synced by hand and never started, so its cache never
/// catches up: the second reconcile waits instead of doubling the pods, and
/// each pod that arrives counts down until the third may scale again.
#[tokio::test]
async fn a_lagging_pod_cache_never_doubles_the_pods() {
    use generated::core::v1::pod as pods;
    use generated::samples::v1alpha1::simpledeployment as sds;
    use kinject_runtime::leader::UniversalBucket;
    use kube::runtime::watcher::Event as Watched;
    use std::sync::Arc;

    let stored = sd(3, "img:1");
    let (ctx, env) = kinject_testing::context(
        &generated::testing::custom_resource_definitions().unwrap(),
        [obj(&stored)],
    )
    .unwrap();
    let controller = new_controller(&ctx);
    controller.promote_initial(Arc::new(UniversalBucket));
    let sd_informer = sds::get(&ctx);
    // The SimpleDeployment's cache follows the server (its status writes
    // included); only the pods' lags.
    let refresh_sd = || {
        let stored = env
            .get_object(
                "samples.knative.dev",
                "v1alpha1",
                "simpledeployments",
                Some("ns"),
                "sd",
            )
            .unwrap();
        sd_informer.apply_event(Watched::Apply(
            serde_json::from_value::<SimpleDeployment>(stored).unwrap(),
        ));
    };
    sd_informer.apply_event(Watched::Init);
    sd_informer.apply_event(Watched::InitDone);
    refresh_sd();
    // The form the controller caches pods in.
    let pod_informer = pods::compact::get(&ctx);
    pod_informer.apply_event(Watched::Init);
    pod_informer.apply_event(Watched::InitDone);

    let pod_creates = |env: &kinject_testing::testenv::TestEnv| {
        env.actions()
            .iter()
            .filter(|a| a.verb == "create" && a.resource == "pods")
            .count()
    };
    let action = controller
        .reconcile_once(&ObjectKey::new("ns", "sd"))
        .await
        .unwrap();
    assert_eq!(action.requeue_delay(), None);
    assert_eq!(pod_creates(&env), 3);
    refresh_sd();

    let second = controller.reconcile_once(&ObjectKey::new("ns", "sd")).await;
    assert_eq!(pod_creates(&env), 3, "the second reconcile created pods again");
    assert!(
        second
            .as_ref()
            .ok()
            .and_then(|action| action.requeue_delay())
            .is_some(),
        "the second reconcile waits for the cache and comes back: {second:?}"
    );

    // The pods arrive; then the count is right and nothing more is created.
    for created in env.list_objects("", "v1", "pods", Some("ns")) {
        pod_informer.apply_event(Watched::Apply(serde_json::from_value::<Pod>(created).unwrap()));
    }
    refresh_sd();
    let action = controller
        .reconcile_once(&ObjectKey::new("ns", "sd"))
        .await
        .unwrap();
    assert_eq!(action.requeue_delay(), None);
    assert_eq!(pod_creates(&env), 3);
}
