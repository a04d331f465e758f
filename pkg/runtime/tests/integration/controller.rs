#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! What the controller does with each reconcile outcome, and where each
//! enqueue helper puts keys.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kinject_runtime::controller::{Action, ControllerOptions, Error, Impl, ObjectKey, Reconciler};
use kube::api::ObjectMeta;
use kube::runtime::watcher::Event;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

type Outcome = Box<dyn FnOnce() -> Result<Action, Error> + Send>;

/// Returns scripted outcomes, then `Ok`; records when each call happened.
struct Scripted {
    start: Instant,
    outcomes: Mutex<VecDeque<Outcome>>,
    calls: Mutex<Vec<Duration>>,
}

impl Scripted {
    fn new(outcomes: Vec<Outcome>) -> Arc<Self> {
        Arc::new(Scripted {
            start: Instant::now(),
            outcomes: Mutex::new(outcomes.into()),
            calls: Mutex::default(),
        })
    }

    fn calls(&self) -> Vec<Duration> {
        self.calls.lock().unwrap().clone()
    }
}

impl Reconciler for Scripted {
    async fn reconcile(&self, key: &ObjectKey) -> Result<Action, Error> {
        let key = key.to_string();
        let key = key.as_str();
        assert_eq!(key, "ns/obj");
        self.calls.lock().unwrap().push(self.start.elapsed());
        let next = self.outcomes.lock().unwrap().pop_front();
        match next {
            Some(outcome) => outcome(),
            None => Ok(Action::await_change()),
        }
    }
}

fn transient() -> Outcome {
    Box::new(|| Err(Error::from("boom")))
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn conflict() -> kube::Error {
    kube::Error::Api(Box::new(kube::core::Status {
        code: 409,
        reason: "Conflict".into(),
        message: "the object has been modified; please apply your changes to the latest version".into(),
        ..kube::core::Status::default()
    }))
}

/// Runs a controller over `reconciler` with `ns/obj` enqueued for an hour of
/// paused time, and returns it (shut down) for inspection.
async fn run_for_an_hour(reconciler: Arc<Scripted>) -> Impl {
    let controller = Impl::new("results", reconciler, ControllerOptions::default());
    let shutdown = CancellationToken::new();
    let run = tokio::spawn({
        let (c, s) = (controller.clone(), shutdown.clone());
        async move { c.run(s).await }
    });
    controller.enqueue_key(ObjectKey::new("ns", "obj"));
    tokio::time::sleep(Duration::from_secs(3600)).await;
    shutdown.cancel();
    run.await.unwrap();
    controller
}

fn obj_key() -> ObjectKey {
    ObjectKey::new("ns", "obj")
}

/// Caches that say they are out of sync until told otherwise.
struct Gate(tokio::sync::watch::Sender<bool>);

impl kinject_runtime::controller::SyncGate for Gate {
    fn synced(&self) -> bool {
        *self.0.borrow()
    }
    fn wait(&self) -> futures::future::BoxFuture<'static, ()> {
        let mut synced = self.0.subscribe();
        Box::pin(async move {
            let _ = synced.wait_for(|s| *s).await;
        })
    }
    fn describe_unsynced(&self) -> String {
        "Widget (listing again)".into()
    }
}

#[tokio::test(start_paused = true)]
async fn no_reconcile_runs_while_its_caches_list_again() {
    let reconciler = Scripted::new(Vec::new());
    let controller = Impl::new("gated", reconciler.clone(), ControllerOptions::default());
    let gate = Arc::new(Gate(tokio::sync::watch::Sender::new(false)));
    controller.reconcile_only_when_synced(gate.clone());
    let shutdown = CancellationToken::new();
    let run = tokio::spawn({
        let (c, s) = (controller.clone(), shutdown.clone());
        async move { c.run(s).await }
    });
    controller.enqueue_key(obj_key());
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(
        reconciler.calls().is_empty(),
        "reconciled from a cache that was listing again"
    );

    gate.0.send_replace(true);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(reconciler.calls(), [Duration::from_secs(60)]);

    // A shutdown while a worker waits at the gate still ends the run.
    gate.0.send_replace(false);
    controller.enqueue_key(obj_key());
    tokio::time::sleep(Duration::from_secs(1)).await;
    shutdown.cancel();
    run.await.unwrap();
    assert_eq!(reconciler.calls().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn success_forgets_the_backoff() {
    let r = Scripted::new(vec![transient(), transient()]);
    let c = run_for_an_hour(r.clone()).await;
    // Two failures back off 5ms then 10ms; the success ends the retries.
    assert_eq!(r.calls(), [ms(0), ms(5), ms(15)]);
    assert_eq!(c.work_queue().num_requeues(&obj_key()), 0);
}

#[tokio::test(start_paused = true)]
async fn a_transient_error_retries_with_growing_backoff() {
    let r = Scripted::new(vec![transient(), transient(), transient(), transient()]);
    run_for_an_hour(r.clone()).await;
    assert_eq!(r.calls(), [ms(0), ms(5), ms(15), ms(35), ms(75)]);
}

#[tokio::test(start_paused = true)]
async fn skip_key_forgets_without_retrying() {
    let r = Scripted::new(vec![transient(), Box::new(|| Err(Error::skip_key("ns/obj")))]);
    let c = run_for_an_hour(r.clone()).await;
    assert_eq!(r.calls(), [ms(0), ms(5)], "no retry after the skip");
    assert_eq!(c.work_queue().num_requeues(&obj_key()), 0);
}

#[tokio::test(start_paused = true)]
async fn requeue_after_comes_back_after_the_delay_and_resets_the_backoff() {
    let r = Scripted::new(vec![
        transient(),
        Box::new(|| Ok(Action::requeue_after(Duration::from_secs(30)))),
        transient(),
    ]);
    run_for_an_hour(r.clone()).await;
    // After the requeue, the next failure starts again at the base delay.
    assert_eq!(r.calls(), [ms(0), ms(5), ms(30_005), ms(30_010)]);
}

#[tokio::test(start_paused = true)]
async fn requeue_immediately_comes_back_at_once() {
    let r = Scripted::new(vec![Box::new(|| Ok(Action::requeue_after(Duration::ZERO)))]);
    run_for_an_hour(r.clone()).await;
    assert_eq!(r.calls(), [ms(0), ms(0)]);
}

#[tokio::test(start_paused = true)]
async fn a_conflict_retries_with_backoff() {
    let r = Scripted::new(vec![
        Box::new(|| Err(conflict().into())),
        Box::new(|| Err(conflict().into())),
    ]);
    run_for_an_hour(r.clone()).await;
    assert_eq!(r.calls(), [ms(0), ms(5), ms(15)]);
}

#[tokio::test(start_paused = true)]
async fn a_permanent_error_is_not_retried() {
    let r = Scripted::new(vec![
        transient(),
        Box::new(|| Err(Error::permanent("invalid spec"))),
    ]);
    let c = run_for_an_hour(r.clone()).await;
    assert_eq!(r.calls(), [ms(0), ms(5)]);
    assert_eq!(c.work_queue().num_requeues(&obj_key()), 0, "forgotten");
}

#[tokio::test(start_paused = true)]
async fn a_panicking_reconcile_is_retried_and_the_worker_survives() {
    let r = Scripted::new(vec![Box::new(|| panic!("bug in reconciler"))]);
    run_for_an_hour(r.clone()).await;
    assert_eq!(r.calls(), [ms(0), ms(5)]);
}

// ---- logs -----------------------------------------------------------------

/// Records spans and events as `LEVEL message {field=value, ...}` lines.
#[derive(Clone, Default)]
struct Capture {
    lines: Arc<Mutex<Vec<String>>>,
    next_id: Arc<std::sync::atomic::AtomicU64>,
}

#[derive(Default)]
struct Fields(Vec<String>);

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push(format!("{}={value:?}", field.name()));
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.push(format!("{}={value}", field.name()));
    }
}

impl tracing::Subscriber for Capture {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        let mut fields = Fields::default();
        span.record(&mut fields);
        self.lines
            .lock()
            .unwrap()
            .push(format!("SPAN {} {}", span.metadata().name(), fields.0.join(" ")));
        tracing::span::Id::from_u64(self.next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        self.lines
            .lock()
            .unwrap()
            .push(format!("{} {}", event.metadata().level(), fields.0.join(" ")));
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

async fn logs_of(outcomes: Vec<Outcome>) -> Vec<String> {
    let capture = Capture::default();
    let _guard = tracing::subscriber::set_default(capture.clone());
    run_for_an_hour(Scripted::new(outcomes)).await;
    capture.lines.lock().unwrap().clone()
}

fn has(lines: &[String], prefix: &str) -> bool {
    lines.iter().any(|l| l.starts_with(prefix))
}

#[tokio::test(start_paused = true)]
async fn conflicts_log_at_debug_and_other_failures_at_error() {
    let conflict_logs = logs_of(vec![Box::new(|| Err(conflict().into()))]).await;
    assert!(
        has(&conflict_logs, "DEBUG message=Reconcile conflict"),
        "{conflict_logs:#?}"
    );
    assert!(
        !conflict_logs.iter().any(|l| l.starts_with("ERROR")),
        "{conflict_logs:#?}"
    );

    let error_logs = logs_of(vec![transient()]).await;
    assert!(
        has(&error_logs, "ERROR message=Reconcile error; retrying in 5ms"),
        "{error_logs:#?}"
    );
    assert_eq!(
        error_logs.iter().filter(|l| l.starts_with("ERROR")).count(),
        1,
        "one line per failed reconcile: {error_logs:#?}"
    );
    assert!(
        error_logs.iter().any(|l| l.contains("error=boom")),
        "{error_logs:#?}"
    );

    let permanent_logs = logs_of(vec![Box::new(|| Err(Error::permanent("invalid spec")))]).await;
    assert!(
        has(
            &permanent_logs,
            "ERROR message=Reconcile error; not retried (permanent)"
        ),
        "{permanent_logs:#?}"
    );

    let skip_logs = logs_of(vec![Box::new(|| Err(Error::skip_key("ns/obj")))]).await;
    assert!(
        !skip_logs.iter().any(|l| l.starts_with("ERROR")),
        "{skip_logs:#?}"
    );
}

#[tokio::test(start_paused = true)]
async fn reconciles_run_in_a_span_with_the_key_and_the_controller_name() {
    let logs = logs_of(Vec::new()).await;
    assert!(
        has(&logs, "SPAN controller knative.dev/controller=results"),
        "{logs:#?}"
    );
    assert!(has(&logs, "SPAN reconcile knative.dev/key=ns/obj"), "{logs:#?}");
    assert!(has(&logs, "DEBUG message=Reconcile succeeded"), "{logs:#?}");
    assert!(
        has(
            &logs,
            "INFO message=Starting controller and workers threadiness=2"
        ),
        "{logs:#?}"
    );
}

// ---- enqueue helpers ----------------------------------------------------

struct Noop;

impl Reconciler for Noop {
    async fn reconcile(&self, _key: &ObjectKey) -> Result<Action, Error> {
        Ok(Action::await_change())
    }
}

fn controller() -> Impl {
    Impl::new("enqueue", Noop, ControllerOptions::default())
}

fn config_map(labels: &[(&str, &str)], owners: Vec<OwnerReference>) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            namespace: Some("ns".into()),
            name: Some("cm".into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            owner_references: Some(owners),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    }
}

fn owner(name: &str, controller: bool) -> OwnerReference {
    OwnerReference {
        api_version: "fixtures.kinject.dev/v1alpha1".into(),
        kind: "Widget".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        controller: Some(controller),
        block_owner_deletion: None,
    }
}

fn key(namespace: &str, name: &str) -> ObjectKey {
    ObjectKey::new(namespace, name)
}

#[tokio::test(start_paused = true)]
async fn enqueue_and_enqueue_key_use_the_fast_lane() {
    let c = controller();
    c.enqueue(&config_map(&[], Vec::new()));
    c.enqueue_key(key("", "cluster-thing"));
    let snap = c.work_queue().snapshot();
    assert_eq!(snap.fast, [key("ns", "cm"), key("", "cluster-thing")]);
    assert!(snap.slow.is_empty());
}

#[tokio::test(start_paused = true)]
async fn enqueue_after_delays_the_key() {
    let c = controller();
    c.enqueue_after(&config_map(&[], Vec::new()), Duration::from_secs(10));
    c.enqueue_key_after(key("ns", "other"), Duration::from_secs(5));
    let snap = c.work_queue().snapshot();
    assert!(snap.fast.is_empty());
    assert_eq!(
        snap.waiting,
        [
            (key("ns", "other"), Duration::from_secs(5)),
            (key("ns", "cm"), Duration::from_secs(10)),
        ]
    );
    tokio::time::advance(Duration::from_secs(10)).await;
    assert_eq!(
        c.work_queue().snapshot().fast,
        [key("ns", "other"), key("ns", "cm")]
    );
}

#[tokio::test(start_paused = true)]
async fn enqueue_slow_uses_the_slow_lane() {
    let c = controller();
    c.enqueue_slow(&config_map(&[], Vec::new()));
    c.enqueue_slow_key(key("ns", "other"));
    let snap = c.work_queue().snapshot();
    assert_eq!(snap.slow, [key("ns", "cm"), key("ns", "other")]);
    assert!(snap.fast.is_empty());
}

#[tokio::test(start_paused = true)]
async fn enqueue_controller_of_enqueues_the_controlling_owner_only() {
    let c = controller();
    c.enqueue_controller_of(&config_map(
        &[],
        vec![owner("not-me", false), owner("parent", true)],
    ));
    c.enqueue_controller_of(&config_map(&[], vec![owner("not-me", false)]));
    c.enqueue_controller_of(&config_map(&[], Vec::new()));
    assert_eq!(c.work_queue().snapshot().fast, [key("ns", "parent")]);
}

/// A namespaced child of a cluster-scoped owner: the owner's key has no
/// namespace, which the owner reference alone cannot tell.
fn owned_by(api_version: &str, kind: &str, name: &str) -> ConfigMap {
    config_map(
        &[],
        vec![OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }],
    )
}

#[tokio::test(start_paused = true)]
async fn enqueue_controller_of_kind_uses_the_owner_kinds_scope() {
    let c = controller();
    c.enqueue_controller_of_kind::<Namespace, _>(&owned_by("v1", "Namespace", "team-a"));
    c.enqueue_controller_of_kind::<ClusterRole, _>(&owned_by(
        "rbac.authorization.k8s.io/v1",
        "ClusterRole",
        "admin",
    ));
    c.enqueue_controller_of_kind::<Deployment, _>(&owned_by("apps/v1", "Deployment", "web"));
    // Controlled by another kind, or by the same kind name in another group.
    c.enqueue_controller_of_kind::<ClusterRole, _>(&owned_by("v1", "Namespace", "team-b"));
    c.enqueue_controller_of_kind::<ClusterRole, _>(&owned_by("example.com/v1", "ClusterRole", "fake"));
    assert_eq!(
        c.work_queue().snapshot().fast,
        [key("", "team-a"), key("", "admin"), key("ns", "web")]
    );
}

/// The handler as an informer runs it: adds, updates and deletes of children
/// controlled by a ClusterRole enqueue that ClusterRole; other ConfigMaps
/// enqueue nothing.
#[tokio::test]
async fn enqueue_controller_handler_filters_and_enqueues_cluster_scoped_owners() {
    let (ctx, _env) = kinject_testing::context(&[], []).unwrap();
    let c = controller();
    let informer = ctx.informer::<ConfigMap>();
    informer.add_event_handler(c.enqueue_controller_handler::<ClusterRole, ConfigMap>());
    let named = |name: &str, mut cm: ConfigMap| {
        cm.metadata.name = Some(name.into());
        cm
    };
    informer.apply_event(Event::Init);
    informer.apply_event(Event::InitDone);
    let owned = named(
        "owned",
        owned_by("rbac.authorization.k8s.io/v1", "ClusterRole", "admin"),
    );
    informer.apply_event(Event::Apply(owned.clone()));
    informer.apply_event(Event::Apply(named(
        "other",
        owned_by("apps/v1", "Deployment", "web"),
    )));
    assert_eq!(c.work_queue().snapshot().fast, [key("", "admin")]);

    // Takes the queued key, so the next event's enqueue shows.
    let drain = async || {
        let got = c.work_queue().get().await.unwrap();
        c.work_queue().done(&got.key);
        assert!(c.work_queue().snapshot().fast.is_empty());
    };
    drain().await;
    let mut changed = owned.clone();
    changed.data = Some([("k".to_owned(), "v".to_owned())].into());
    informer.apply_event(Event::Apply(changed.clone()));
    assert_eq!(c.work_queue().snapshot().fast, [key("", "admin")], "update");
    drain().await;
    informer.apply_event(Event::Delete(changed));
    assert_eq!(c.work_queue().snapshot().fast, [key("", "admin")], "delete");
}

#[tokio::test(start_paused = true)]
async fn enqueue_label_of_namespace_scoped_resource() {
    let c = controller();
    let both = c.enqueue_label_of_namespace_scoped_resource::<ConfigMap>("owner-ns", "owner-name");
    both(&config_map(
        &[("owner-ns", "elsewhere"), ("owner-name", "parent")],
        Vec::new(),
    ));
    both(&config_map(&[("owner-name", "no-namespace-label")], Vec::new()));
    both(&config_map(&[("owner-ns", "no-name-label")], Vec::new()));
    let same_ns = c.enqueue_label_of_namespace_scoped_resource::<ConfigMap>("", "owner-name");
    same_ns(&config_map(&[("owner-name", "sibling")], Vec::new()));
    same_ns(&config_map(&[], Vec::new()));
    assert_eq!(
        c.work_queue().snapshot().fast,
        [key("elsewhere", "parent"), key("ns", "sibling")]
    );
}

#[tokio::test(start_paused = true)]
async fn enqueue_label_of_cluster_scoped_resource() {
    let c = controller();
    let handler = c.enqueue_label_of_cluster_scoped_resource::<ConfigMap>("owner-name");
    handler(&config_map(&[("owner-name", "global")], Vec::new()));
    handler(&config_map(&[("other", "x")], Vec::new()));
    assert_eq!(c.work_queue().snapshot().fast, [key("", "global")]);
}

#[tokio::test(start_paused = true)]
async fn enqueue_namespace_of_enqueues_the_namespace() {
    let c = controller();
    c.enqueue_namespace_of(&config_map(&[], Vec::new()));
    assert_eq!(c.work_queue().snapshot().fast, [key("", "ns")]);
}

#[tokio::test(start_paused = true)]
async fn enqueue_sentinel_always_enqueues_its_key() {
    let c = controller();
    let handler = c.enqueue_sentinel::<ConfigMap>(key("system", "config"));
    handler(&config_map(&[], Vec::new()));
    handler(&ConfigMap::default());
    assert_eq!(c.work_queue().snapshot().fast, [key("system", "config")]);
}

#[tokio::test(start_paused = true)]
async fn global_resync_uses_the_slow_lane_and_stops_at_shutdown() {
    let c = controller();
    c.enqueue_key(key("ns", "changed"));
    c.global_resync([key("ns", "a"), key("ns", "changed"), key("ns", "b")]);
    let snap = c.work_queue().snapshot();
    assert_eq!(
        snap.fast,
        [key("ns", "changed")],
        "a queued change stays in the fast lane"
    );
    assert_eq!(snap.slow, [key("ns", "a"), key("ns", "b")]);

    c.work_queue().shut_down();
    c.global_resync([key("ns", "c")]);
    assert_eq!(c.work_queue().len(), 0);
}

#[tokio::test(start_paused = true)]
async fn the_controllers_tracker_enqueues_observers() {
    let c = controller();
    let tracker = c.tracker().clone();
    let reference = kinject_runtime::tracker::Reference::named("v1", "ConfigMap", "ns", "cm");
    let observer = config_map(&[], Vec::new());
    tracker.track_reference(&reference, &observer).unwrap();
    assert_eq!(c.work_queue().snapshot().fast, [key("ns", "cm")]);

    // The tracker does not keep the controller alive.
    drop(c);
    tracker.on_changed(&observer);
}

/// A controller that starts with keys queued (a restart over existing
/// objects) logs one line once each was reconciled, not a line per key.
#[tokio::test(start_paused = true)]
async fn keys_queued_at_start_are_summed_up_in_one_line() {
    let capture = Capture::default();
    let _guard = tracing::subscriber::set_default(capture.clone());
    /// Fails the first reconcile of `ns/b`.
    struct FailsOnce(std::sync::atomic::AtomicBool);
    impl Reconciler for FailsOnce {
        async fn reconcile(&self, key: &ObjectKey) -> Result<Action, Error> {
            let key = key.to_string();
            let key = key.as_str();
            if key == "ns/b" && !self.0.swap(true, std::sync::atomic::Ordering::SeqCst) {
                return Err(Error::from("boom"));
            }
            Ok(Action::await_change())
        }
    }
    let controller = Impl::new(
        "results",
        FailsOnce(Default::default()),
        ControllerOptions::default(),
    );
    for name in ["a", "b", "c"] {
        controller.enqueue_key(ObjectKey::new("ns", name));
    }
    let shutdown = CancellationToken::new();
    let run = tokio::spawn({
        let (c, s) = (controller.clone(), shutdown.clone());
        async move { c.run(s).await }
    });
    tokio::time::sleep(Duration::from_secs(60)).await;
    shutdown.cancel();
    run.await.unwrap();

    let logs = capture.lines.lock().unwrap().clone();
    let summaries: Vec<&String> = logs
        .iter()
        .filter(|l| l.starts_with("INFO message=Reconciled every key queued at start once"))
        .collect();
    assert_eq!(summaries.len(), 1, "{logs:#?}");
    assert!(
        summaries[0].contains("succeeded=2 failed=1 skipped=0"),
        "{}",
        summaries[0]
    );
    assert!(
        !logs
            .iter()
            .any(|l| l.starts_with("INFO message=Reconcile succeeded")),
        "{logs:#?}"
    );
}
