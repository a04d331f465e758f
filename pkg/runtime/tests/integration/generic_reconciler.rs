//! The generated reconciler's generic behaviour (Knative's rows G1–G6), with a
//! scripted reconciler for Widget that finalizes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use crate::fixtures::{Widget, WidgetSpec, WidgetStatus};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kinject_runtime::controller::{Error, Impl, ObjectKey};
use kinject_runtime::informer::EventHandler;
use kinject_runtime::injection::Context;
use kinject_runtime::leader::UniversalBucket;
use kinject_runtime::reconciler::{
    Event, FinalizeKind, KRShapedHooks, KindConfig, NoFinalizer, Options, ReconcileContext, ReconcileKind,
    ReconcileResult, Reconciled, StatusHooks, WithFinalizer, new_impl,
};
use kinject_runtime::tracker::Reference;
use kinject_testing::testenv::{ErrorStatus, Reactor};
use kinject_testing::{PatchAction, Table, TableRow, obj, run_row, uid_for};
use kube::api::ObjectMeta;
use tokio_util::sync::CancellationToken;

const FINALIZER: &str = "widgets.fixtures.kinject.dev";

static KIND: KindConfig<Widget> = KindConfig {
    agent_name: "addressableservice-controller",
    finalizer_name: FINALIZER,
    class_keys: &[],
    status: Some(StatusHooks::new()),
    krshaped: Some(KRShapedHooks::new()),
};

type Script = Arc<dyn Fn() -> ReconcileResult + Send + Sync>;

/// A reconciler whose `reconcile_kind` returns what the row scripts.
struct Scripted {
    reconcile: Script,
}

#[kinject_runtime::async_trait]
impl ReconcileKind<Widget> for Scripted {
    type Finalizer = NoFinalizer;

    async fn reconcile_kind(&self, _: &ReconcileContext, _: &mut Widget) -> ReconcileResult {
        (self.reconcile)()
    }
}

/// [`Scripted`] that also finalizes, returning what the row scripts.
struct ScriptedFinalizer {
    reconcile: Script,
    finalize: Script,
}

#[kinject_runtime::async_trait]
impl ReconcileKind<Widget> for ScriptedFinalizer {
    type Finalizer = WithFinalizer;

    async fn reconcile_kind(&self, _: &ReconcileContext, _: &mut Widget) -> ReconcileResult {
        (self.reconcile)()
    }
}

#[kinject_runtime::async_trait]
impl FinalizeKind<Widget> for ScriptedFinalizer {
    async fn finalize_kind(&self, _: &ReconcileContext, _: &mut Widget) -> ReconcileResult {
        (self.finalize)()
    }
}

/// A steady Widget: its status already observed generation 1, so
/// only what a row provokes is written.
fn rut(finalizers: &[&str], deleting: bool) -> Widget {
    let mut asvc = Widget::new(
        "rut",
        WidgetSpec {
            service_name: "webhook".into(),
        },
    );
    asvc.metadata.namespace = Some("ns".into());
    asvc.metadata.generation = Some(1);
    if !finalizers.is_empty() {
        asvc.metadata.finalizers = Some(finalizers.iter().map(|f| f.to_string()).collect());
    }
    if deleting {
        asvc.metadata.deletion_timestamp = Some(Time("2026-01-01T00:00:00Z".parse().unwrap()));
    }
    let mut status = WidgetStatus::default();
    status.mark_service_available();
    status.status.observed_generation = 1;
    asvc.status = Some(status);
    asvc
}

async fn run(row: TableRow, reconcile: Script, finalize: Option<Script>) {
    let crd = kinject_types::crd::custom_resource_definition::<Widget>().unwrap();
    let constructor = move |ctx: &Context| -> Impl {
        let reconcile = reconcile.clone();
        match finalize.clone() {
            Some(finalize) => new_impl(
                ctx,
                ScriptedFinalizer { reconcile, finalize },
                &KIND,
                None,
                Options::default(),
            ),
            None => new_impl(ctx, Scripted { reconcile }, &KIND, None, Options::default()),
        }
    };
    Table {
        crds: vec![crd],
        rows: vec![row],
        ..Table::default()
    }
    .run(&constructor)
    .await;
}

fn done() -> Script {
    Arc::new(|| Ok(Reconciled::done()))
}

/// The table's API server holds writes to the CRD's validation rules, as
/// kube-apiserver does: a row expects the refusal of a status write that
/// breaks one, with kube-apiserver's message, and no setting turns it on.
#[tokio::test]
async fn a_status_write_the_crds_rules_refuse_fails_the_reconcile() {
    let mut crd =
        serde_json::to_value(kinject_types::crd::custom_resource_definition::<Widget>().unwrap()).unwrap();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]["x-kubernetes-validations"] = serde_json::json!([{
        "rule": "!has(self.observedGeneration) || self.observedGeneration < 2",
        "message": "this widget cannot reach generation 2",
    }]);
    let mut widget = rut(&[], false);
    widget.metadata.generation = Some(2);
    // A new generation is observed Unknown until the reconcile says more.
    let written = serde_json::json!({
        "apiVersion": "fixtures.kinject.dev/v1alpha1", "kind": "Widget",
        "metadata": {"generation": 2, "name": "rut", "namespace": "ns"},
        "spec": {"serviceName": "webhook"},
        "status": {"observedGeneration": 2, "conditions": [{
            "type": "Ready", "status": "Unknown", "reason": "NewObservedGenFailure",
            "message": "unsuccessfully observed a new generation",
        }]},
    });
    let constructor = |ctx: &Context| {
        new_impl(
            ctx,
            Scripted { reconcile: done() },
            &KIND,
            None,
            Options::default(),
        )
    };
    Table {
        crds: vec![serde_json::from_value(crd).unwrap()],
        kinds: Vec::new(),
        rows: vec![TableRow {
            name: "a status the rules refuse",
            objects: vec![obj(&widget)],
            key: "ns/rut",
            want_status_updates: vec![written],
            want_events: vec![
                "Warning UpdateFailed Failed to update status for \"rut\": Widget.fixtures.kinject.dev \"rut\" is \
                 invalid: status: Invalid value: \"object\": this widget cannot reach generation 2"
                    .into(),
            ],
            want_error: Some(
                "Widget.fixtures.kinject.dev \"rut\" is invalid: status: Invalid value: \"object\": this widget \
                 cannot reach generation 2",
            ),
            ..TableRow::default()
        }],
    }
    .run(&constructor)
    .await;
}

#[tokio::test]
async fn g1_adds_the_finalizer_then_reconciles() {
    let row = TableRow {
        name: "G1 add finalizer",
        objects: vec![obj(&rut(&["foreign.example.com/keep"], false))],
        key: "ns/rut",
        want_patches: vec![PatchAction::new(
            "ns",
            "rut",
            r#"{"metadata":{"finalizers":["foreign.example.com/keep","widgets.fixtures.kinject.dev"],"resourceVersion":"{resourceVersion}"}}"#,
        )],
        want_events: vec![r#"Normal FinalizerUpdate Updated "rut" finalizers"#.into()],
        ..TableRow::default()
    };
    run(row, done(), Some(done())).await;
}

#[tokio::test]
async fn g1_no_patch_when_the_finalizer_is_there() {
    let row = TableRow {
        name: "G1 finalizer already present",
        objects: vec![obj(&rut(&[FINALIZER], false))],
        key: "ns/rut",
        ..TableRow::default()
    };
    run(row, done(), Some(done())).await;
}

#[tokio::test]
async fn g2_finalize_ok_removes_the_finalizer_and_keeps_the_rest_sorted() {
    let row = TableRow {
        name: "G2 finalize ok",
        objects: vec![obj(&rut(
            &["z.example.com/last", FINALIZER, "a.example.com/first"],
            true,
        ))],
        key: "ns/rut",
        want_patches: vec![PatchAction::new(
            "ns",
            "rut",
            r#"{"metadata":{"finalizers":["a.example.com/first","z.example.com/last"],"resourceVersion":"{resourceVersion}"}}"#,
        )],
        want_events: vec![r#"Normal FinalizerUpdate Updated "rut" finalizers"#.into()],
        ..TableRow::default()
    };
    run(row, done(), Some(done())).await;
}

#[tokio::test]
async fn g2_finalize_with_a_normal_event_removes_the_last_finalizer() {
    let row = TableRow {
        name: "G2 finalize with a Normal event, empty list",
        objects: vec![obj(&rut(&[FINALIZER], true))],
        key: "ns/rut",
        want_patches: vec![PatchAction::new(
            "ns",
            "rut",
            r#"{"metadata":{"finalizers":[],"resourceVersion":"{resourceVersion}"}}"#,
        )],
        want_events: vec![
            r#"Normal FinalizerUpdate Updated "rut" finalizers"#.into(),
            "Normal Cleaned all gone".into(),
        ],
        ..TableRow::default()
    };
    run(
        row,
        done(),
        Some(Arc::new(|| {
            Ok(Reconciled::event(Event::normal("Cleaned", "all gone")))
        })),
    )
    .await;
}

#[tokio::test]
async fn g3_finalize_warning_keeps_the_finalizer() {
    let row = TableRow {
        name: "G3 finalize returns a Warning event",
        objects: vec![obj(&rut(&[FINALIZER], true))],
        key: "ns/rut",
        want_events: vec!["Warning NotYet the backend still holds data".into()],
        ..TableRow::default()
    };
    run(
        row,
        done(),
        Some(Arc::new(|| {
            Ok(Reconciled::event(Event::warning(
                "NotYet",
                "the backend still holds data",
            )))
        })),
    )
    .await;
}

#[tokio::test]
async fn g4_failed_finalizer_patch_is_reported() {
    let row = TableRow {
        name: "G4 finalizer patch fails",
        objects: vec![obj(&rut(&[], false))],
        key: "ns/rut",
        want_err: true,
        reactors: vec![Reactor::on("patch", "widgets")],
        want_patches: vec![PatchAction::new(
            "ns",
            "rut",
            r#"{"metadata":{"finalizers":["widgets.fixtures.kinject.dev"],"resourceVersion":"{resourceVersion}"}}"#,
        )],
        want_events: vec![
            r#"Warning FinalizerUpdateFailed Failed to update finalizers for "rut": inducing failure for patch widgets"#.into(),
        ],
        ..TableRow::default()
    };
    run(row, done(), Some(done())).await;
}

#[tokio::test]
async fn g4_conflicting_finalizer_patch_records_no_event() {
    let row = TableRow {
        name: "G4 finalizer patch conflicts",
        objects: vec![obj(&rut(&[], false))],
        key: "ns/rut",
        want_err: true,
        reactors: vec![Reactor::on("patch", "widgets").respond(ErrorStatus::conflict())],
        want_patches: vec![PatchAction::new(
            "ns",
            "rut",
            r#"{"metadata":{"finalizers":["widgets.fixtures.kinject.dev"],"resourceVersion":"{resourceVersion}"}}"#,
        )],
        ..TableRow::default()
    };
    run(row, done(), Some(done())).await;
}

#[tokio::test]
async fn g4_failed_finalizer_removal_is_reported_while_the_object_exists() {
    let row = TableRow {
        name: "G4 finalizer removal fails",
        objects: vec![obj(&rut(&[FINALIZER], true))],
        key: "ns/rut",
        want_err: true,
        reactors: vec![Reactor::on("patch", "widgets")],
        want_patches: vec![PatchAction::new(
            "ns",
            "rut",
            r#"{"metadata":{"finalizers":[],"resourceVersion":"{resourceVersion}"}}"#,
        )],
        want_events: vec![
            r#"Warning FinalizerUpdateFailed Failed to update finalizers for "rut": inducing failure for patch widgets"#.into(),
        ],
        ..TableRow::default()
    };
    run(row, done(), Some(done())).await;
}

#[tokio::test]
async fn g5_a_returned_event_is_recorded_and_is_success() {
    let row = TableRow {
        name: "G5 Normal event",
        objects: vec![obj(&rut(&[], false))],
        key: "ns/rut",
        want_events: vec!["Normal Foo bar x".into()],
        ..TableRow::default()
    };
    run(
        row,
        Arc::new(|| Ok(Reconciled::event(Event::normal("Foo", format!("bar {}", "x"))))),
        None,
    )
    .await;
}

#[tokio::test]
async fn g5_an_event_wrapped_in_an_error_is_recorded_and_fails() {
    let row = TableRow {
        name: "G5 wrapped event",
        objects: vec![obj(&rut(&[], false))],
        key: "ns/rut",
        want_err: true,
        want_events: vec!["Normal Foo bar x".into()],
        ..TableRow::default()
    };
    run(
        row,
        Arc::new(|| Err(Error::new("wrapping").with_event(Event::normal("Foo", "bar x")))),
        None,
    )
    .await;
}

#[tokio::test]
async fn g6_skip_and_conflict_record_no_event() {
    let conflict = || {
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "status": "Failure", "reason": "Conflict", "code": 409, "message": "the object has been modified"
        }))
        .unwrap();
        Error::from(kube::Error::Api(Box::new(status)))
    };
    // A requeue is no error at all: `Ok(Reconciled::requeue_after(..))`
    // (the rows of `want_requeue_after`).
    let scripts: Vec<(&'static str, Script)> = vec![
        ("G6 skip key", Arc::new(|| Err(Error::skip_key("ns/rut")))),
        ("G6 conflict", Arc::new(move || Err(conflict()))),
    ];
    for (name, script) in scripts {
        let row = TableRow {
            name,
            objects: vec![obj(&rut(&[], false))],
            key: "ns/rut",
            want_err: true,
            ..TableRow::default()
        };
        run(row, script, None).await;
    }
}

/// A reconciler on a schedule: every minute on the minute, by the context's
/// clock, as a cron-like controller computes its next run.
struct EveryMinute;

#[kinject_runtime::async_trait]
impl ReconcileKind<Widget> for EveryMinute {
    type Finalizer = NoFinalizer;

    async fn reconcile_kind(&self, ctx: &ReconcileContext, _: &mut Widget) -> ReconcileResult {
        let since_epoch = ctx
            .now()
            .duration_since(std::time::SystemTime::UNIX_EPOCH)
            .map_err(|e| Error::permanent(Error::new(e.to_string())))?;
        let next = Duration::from_secs(60 - since_epoch.as_secs() % 60);
        Ok(Reconciled::requeue_after(next)
            .with_event(Event::normal("Scheduled", format!("next run in {next:?}"))))
    }
}

/// 2030-03-17T17:46:00Z, on the minute.
const ON_THE_MINUTE: u64 = 1_899_999_960;

fn at(seconds: u64) -> std::time::SystemTime {
    std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(seconds)
}

#[tokio::test]
async fn a_schedule_requeues_by_the_rows_clock_and_is_no_failure() {
    let crds = vec![kinject_types::crd::custom_resource_definition::<Widget>().unwrap()];
    let constructor = |ctx: &Context| new_impl(ctx, EveryMinute, &KIND, None, Options::default());
    let row = |now: u64, want: u64| TableRow {
        name: "on a schedule",
        objects: vec![obj(&rut(&[], false))],
        key: "ns/rut",
        now: Some(at(now)),
        want_requeue_after: Some(Duration::from_secs(want)),
        want_events: vec![format!("Normal Scheduled next run in {want}s")],
        ..TableRow::default()
    };
    // No InternalError event and no error: a schedule is not a failure.
    Table {
        crds: crds.clone(),
        kinds: Vec::new(),
        rows: vec![
            row(ON_THE_MINUTE + 30, 30),
            row(ON_THE_MINUTE + 59, 1),
            row(ON_THE_MINUTE + 20, 40),
        ],
    }
    .run(&constructor)
    .await;
    // A row that expects another delay, or none, fails and says so.
    let problems = run_row(&crds, &row(ON_THE_MINUTE + 30, 10), &constructor)
        .await
        .unwrap_err()
        .join("\n");
    assert!(
        problems.contains(
            "requeue differs (want_requeue_after):\n    want requeue after 10s\n    got  requeue after 30s"
        ),
        "{problems}"
    );
    let unexpected = TableRow {
        want_requeue_after: None,
        want_events: vec!["Normal Scheduled next run in 30s".into()],
        ..row(ON_THE_MINUTE + 30, 30)
    };
    let problems = run_row(&crds, &unexpected, &constructor)
        .await
        .unwrap_err()
        .join("\n");
    assert!(problems.contains("got  requeue after 30s"), "{problems}");
}

#[tokio::test]
async fn a_finalizer_that_asks_to_come_back_stays() {
    let row = TableRow {
        name: "finalize not finished: look again in 5s",
        objects: vec![obj(&rut(&[FINALIZER], true))],
        key: "ns/rut",
        want_requeue_after: Some(Duration::from_secs(5)),
        ..TableRow::default()
    };
    run(
        row,
        done(),
        Some(Arc::new(|| Ok(Reconciled::requeue_after(Duration::from_secs(5))))),
    )
    .await;
}

/// A controller of a cluster-scoped kind that writes into a namespace: each
/// Namespace gets a ConfigMap of settings, created from the cached copy.
struct NamespaceSettings {
    ctx: Context,
}

static NAMESPACES: KindConfig<k8s_openapi::api::core::v1::Namespace> = KindConfig {
    agent_name: "namespace-settings-controller",
    finalizer_name: "namespaces.settings.kinject.dev",
    class_keys: &[],
    status: None,
    krshaped: None,
};

#[kinject_runtime::async_trait]
impl ReconcileKind<k8s_openapi::api::core::v1::Namespace> for NamespaceSettings {
    type Finalizer = NoFinalizer;

    async fn reconcile_kind(
        &self,
        _: &ReconcileContext,
        namespace: &mut k8s_openapi::api::core::v1::Namespace,
    ) -> ReconcileResult {
        let name = namespace.metadata.name.clone().unwrap_or_default();
        let settings = ConfigMap {
            metadata: ObjectMeta {
                name: Some("settings".into()),
                namespace: Some(name.clone()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        };
        kube::Api::<ConfigMap>::namespaced(self.ctx.client(), &name)
            .create(&kube::api::PostParams::default(), &settings)
            .await
            .map_err(Error::from)?;
        // An update as well, from the cached copy, whose generation the
        // server set: the row need not spell it out.
        kube::Api::<k8s_openapi::api::core::v1::Namespace>::all(self.ctx.client())
            .replace(&name, &kube::api::PostParams::default(), namespace)
            .await
            .map_err(Error::from)?;
        Ok(Reconciled::done())
    }
}

#[tokio::test]
async fn a_cluster_scoped_owner_writes_into_namespaces_with_no_row_flag() {
    let constructor = |ctx: &Context| {
        new_impl(
            ctx,
            NamespaceSettings { ctx: ctx.clone() },
            &NAMESPACES,
            None,
            Options::default(),
        )
    };
    let namespace = serde_json::json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "team-a", "generation": 3}});
    Table {
        crds: Vec::new(),
        kinds: Vec::new(),
        rows: vec![TableRow {
            name: "cluster-scoped key, namespaced child",
            objects: vec![namespace],
            key: "team-a",
            want_creates: vec![serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "settings", "namespace": "team-a"}})],
            want_updates: vec![
                serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}),
            ],
            ..TableRow::default()
        }],
    }
    .run(&constructor)
    .await;
}

#[tokio::test]
async fn g6_other_errors_become_internal_error_events() {
    let row = TableRow {
        name: "G6 plain error",
        objects: vec![obj(&rut(&[], false))],
        key: "ns/rut",
        want_err: true,
        want_events: vec!["Warning InternalError the backend is down".into()],
        ..TableRow::default()
    };
    run(row, Arc::new(|| Err(Error::new("the backend is down"))), None).await;
}

/// A deleted observer's tracker registrations go with it, so churn cannot grow
/// the tracker and a change to what it referenced enqueues nothing.
#[tokio::test]
async fn g7_a_deleted_object_is_forgotten_by_the_tracker() {
    let config_map = || ConfigMap {
        metadata: ObjectMeta {
            namespace: Some("ns".into()),
            name: Some("settings".into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    let constructor = |ctx: &Context| -> Impl {
        let controller = new_impl(
            ctx,
            Scripted { reconcile: done() },
            &KIND,
            None,
            Options::default(),
        );
        let reference = Reference::named("v1", "ConfigMap", "ns", "settings");
        controller
            .tracker()
            .track_reference(&reference, &rut(&[], false))
            .unwrap();
        assert_eq!(
            controller.tracker().get_observers(&config_map()),
            [ObjectKey::new("ns", "rut")]
        );
        controller
    };
    let row = TableRow {
        name: "G7 gone",
        key: "ns/rut",
        post_conditions: Some(Box::new(move |outcome| {
            let observers = outcome.controller.tracker().get_observers(&config_map());
            Box::pin(async move {
                if observers.is_empty() {
                    Ok(())
                } else {
                    Err(format!("still tracked for {observers:?}"))
                }
            })
        })),
        ..TableRow::default()
    };
    Table {
        crds: vec![kinject_types::crd::custom_resource_definition::<Widget>().unwrap()],
        kinds: Vec::new(),
        rows: vec![row],
    }
    .run(&constructor)
    .await;
}

/// Finalizes, and reports on every reconcile that its Service is gone, so the
/// first reconcile both adds the finalizer and changes the status.
struct FinalizingStatusWriter;

#[kinject_runtime::async_trait]
impl ReconcileKind<Widget> for FinalizingStatusWriter {
    type Finalizer = WithFinalizer;

    async fn reconcile_kind(&self, _: &ReconcileContext, asvc: &mut Widget) -> ReconcileResult {
        let name = asvc.spec.service_name.clone();
        asvc.status
            .get_or_insert_default()
            .mark_service_unavailable(&name);
        Ok(Reconciled::done())
    }
}

#[kinject_runtime::async_trait]
impl FinalizeKind<Widget> for FinalizingStatusWriter {
    async fn finalize_kind(&self, _: &ReconcileContext, _: &mut Widget) -> ReconcileResult {
        Ok(Reconciled::done())
    }
}

/// The finalizer patch moves the object to a new resourceVersion; a status
/// write that still carried the cached one would be refused with a 409 and
/// cost a re-read and a second write on every new object.
#[tokio::test]
async fn g1_the_status_write_after_adding_the_finalizer_does_not_conflict() {
    let mut want = rut(&["foreign.example.com/keep", FINALIZER], false);
    if let Some(status) = want.status.as_mut() {
        status.mark_service_unavailable("webhook");
    }
    let row = TableRow {
        name: "G1 add finalizer, then write status",
        objects: vec![obj(&rut(&["foreign.example.com/keep"], false))],
        key: "ns/rut",
        want_patches: vec![PatchAction::new(
            "ns",
            "rut",
            r#"{"metadata":{"finalizers":["foreign.example.com/keep","widgets.fixtures.kinject.dev"],"resourceVersion":"{resourceVersion}"}}"#,
        )],
        want_status_updates: vec![obj(&want)],
        want_events: vec![r#"Normal FinalizerUpdate Updated "rut" finalizers"#.into()],
        post_conditions: Some(Box::new(|outcome| {
            let actions = outcome.env.actions();
            Box::pin(async move {
                let on_rut: Vec<String> = actions
                    .iter()
                    .filter(|a| a.resource == "widgets" && a.name == "rut")
                    .map(|a| format!("{} {}", a.verb, a.subresource).trim_end().to_owned())
                    .collect();
                // One patch, one status write: a re-read would mean the first
                // write was refused.
                if on_rut == ["patch", "update status"] {
                    Ok(())
                } else {
                    Err(format!("requests on the object: {on_rut:?}"))
                }
            })
        })),
        ..TableRow::default()
    };
    let crd = kinject_types::crd::custom_resource_definition::<Widget>().unwrap();
    let constructor =
        |ctx: &Context| -> Impl { new_impl(ctx, FinalizingStatusWriter, &KIND, None, Options::default()) };
    Table {
        crds: vec![crd],
        rows: vec![row],
        ..Table::default()
    }
    .run(&constructor)
    .await;
}

/// A new object of a finalizing kind, through the running controller: any
/// later reconcile either waits for the cache or finds nothing to do, so the
/// object gets one finalizer patch and one status write, and no request is
/// refused (a re-read would follow a 409).
#[tokio::test]
async fn a_new_finalizing_object_costs_one_patch_and_one_status_write() {
    let crd = kinject_types::crd::custom_resource_definition::<Widget>().unwrap();
    let (ctx, env) = kinject_testing::context(&[crd], [obj(&rut(&[], false))]).unwrap();
    let controller = new_impl(&ctx, FinalizingStatusWriter, &KIND, None, Options::default());
    let informer = ctx.informer::<Widget>();
    informer.add_event_handler(controller.enqueue_handler());
    // Registered after the enqueueing handler, so by the time it reports the
    // final object, that object's key is queued.
    let (seen, mut finished) = tokio::sync::watch::channel(false);
    informer.add_event_handler(EventHandler::all(move |o: &Widget| {
        let has_finalizer = o.metadata.finalizers.iter().flatten().any(|f| f == FINALIZER);
        let written = o.status.as_ref().is_some_and(|s| !s.is_ready());
        if has_finalizer && written {
            seen.send_replace(true);
        }
    }));
    let stop = CancellationToken::new();
    ctx.start_informers(&stop);
    ctx.wait_for_cache_sync(Duration::from_secs(10)).await.unwrap();
    controller.promote(Arc::new(UniversalBucket));
    env.clear_actions();
    let run = tokio::spawn({
        let (controller, stop) = (controller.clone(), stop.clone());
        async move { controller.run(stop).await }
    });

    let settled = async {
        finished.wait_for(|done| *done).await.unwrap();
        // A reconcile queued after the writes must end without writing.
        loop {
            let queue = controller.work_queue().snapshot();
            if queue.fast.is_empty() && queue.processing.is_empty() && queue.waiting.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), settled)
        .await
        .expect("the object was never reconciled to its final state");
    stop.cancel();
    run.await.unwrap();

    let on_rut: Vec<String> = env
        .actions()
        .iter()
        .filter(|a| a.resource == "widgets" && a.name == "rut")
        .map(|a| format!("{} {}", a.verb, a.subresource).trim_end().to_owned())
        .collect();
    assert_eq!(on_rut, ["patch", "update status"]);
}

/// Through the running controller, the updates a reconcile's own finalizer
/// patch and status write cause queue nothing: each new object is reconciled
/// once, with one patch and one status write. Knative queues both updates,
/// and reconciles every object it writes twice or three times at start.
#[tokio::test(start_paused = true)]
async fn the_updates_of_a_reconciles_own_writes_queue_nothing() {
    use kinject_runtime::reconciler::ReconcileMetrics;
    use prometheus_client::registry::Registry;

    let crd = kinject_types::crd::custom_resource_definition::<Widget>().unwrap();
    let names = ["rut-0", "rut-1", "rut-2"];
    let objects = names.map(|name| {
        let mut widget = rut(&[], false);
        widget.metadata.name = Some(name.into());
        widget.status = None;
        obj(&widget)
    });
    let (_, env) = kinject_testing::context(&[crd], objects).unwrap();
    let mut registry = Registry::default();
    let ctx = Context::builder(env.client())
        .extension(ReconcileMetrics::register(&mut registry))
        .build();
    let controller = new_impl(&ctx, FinalizingStatusWriter, &KIND, None, Options::default());
    ctx.informer::<Widget>()
        .add_event_handler(controller.enqueue_handler());
    let stop = CancellationToken::new();
    ctx.start_informers(&stop);
    ctx.wait_for_cache_sync(Duration::from_secs(10)).await.unwrap();
    controller.promote(Arc::new(UniversalBucket));
    env.clear_actions();
    let run = tokio::spawn({
        let (controller, stop) = (controller.clone(), stop.clone());
        async move { controller.run(stop).await }
    });
    tokio::time::sleep(Duration::from_secs(60)).await;
    stop.cancel();
    run.await.unwrap();

    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    let reconciles: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("reconcile_count_total{"))
        .collect();
    assert_eq!(
        reconciles,
        [format!(
            "reconcile_count_total{{kind=\"{}.{}\",result=\"success\"}} {}",
            <Widget as kube::Resource>::group(&()),
            <Widget as kube::Resource>::kind(&()),
            names.len()
        )],
        "one reconcile per object\n{text}"
    );
    for name in names {
        let requests: Vec<String> = env
            .actions()
            .iter()
            .filter(|a| a.resource == "widgets" && a.name == name)
            .map(|a| format!("{} {}", a.verb, a.subresource).trim_end().to_owned())
            .collect();
        assert_eq!(requests, ["patch", "update status"], "{name}");
    }
}

static STATUS_ONLY: KindConfig<Widget> = KindConfig {
    agent_name: "addressableservice-controller",
    finalizer_name: FINALIZER,
    class_keys: &[],
    status: Some(StatusHooks::new()),
    krshaped: None,
};

/// Creates a ConfigMap it owns and records the uid the server gave it.
struct RecordsItsChild {
    ctx: Context,
}

#[kinject_runtime::async_trait]
impl ReconcileKind<Widget> for RecordsItsChild {
    type Finalizer = NoFinalizer;

    async fn reconcile_kind(&self, _: &ReconcileContext, asvc: &mut Widget) -> ReconcileResult {
        let mut settings = ConfigMap {
            metadata: ObjectMeta {
                name: Some("rut-settings".into()),
                namespace: Some("ns".into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        };
        kinject_runtime::owner::set_controller_ref(&mut settings, asvc).map_err(Error::permanent)?;
        let created = kube::Api::<ConfigMap>::namespaced(self.ctx.client(), "ns")
            .create(&Default::default(), &settings)
            .await?;
        let status = asvc.status.get_or_insert_with(Default::default);
        status
            .status
            .annotations
            .insert("settings-uid".into(), created.metadata.uid.unwrap_or_default());
        Ok(Reconciled::done())
    }
}

/// Table rows name server-set uids with `uid_for`: the seeded parent (given
/// without a uid) in the child's owner reference, the created child in the
/// status that records it.
#[tokio::test]
async fn rows_name_the_uids_the_server_sets() {
    let parent_uid = uid_for::<Widget>("ns", "rut");
    let child_uid = uid_for::<k8s_openapi::api::core::v1::ConfigMap>("ns", "rut-settings");
    assert_ne!(parent_uid, child_uid);
    let mut stored = rut(&[], false);
    stored.status = None;
    let mut want_child = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "rut-settings", "namespace": "ns", "ownerReferences": [{
            "apiVersion": "fixtures.kinject.dev/v1alpha1", "kind": "Widget",
            "name": "rut", "uid": parent_uid, "controller": true, "blockOwnerDeletion": true
        }]}
    });
    let mut want_status = stored.clone();
    want_status.metadata.uid = Some(parent_uid.clone());
    let status = want_status.status.get_or_insert_with(Default::default);
    status.status.annotations.insert("settings-uid".into(), child_uid);
    let constructor = |ctx: &Context| -> Impl {
        new_impl(
            ctx,
            RecordsItsChild { ctx: ctx.clone() },
            &STATUS_ONLY,
            None,
            Options::default(),
        )
    };
    let crds = [kinject_types::crd::custom_resource_definition::<Widget>().unwrap()];
    let row = |want_child: serde_json::Value| TableRow {
        name: "records its child's uid",
        objects: vec![obj(&stored)],
        key: "ns/rut",
        want_creates: vec![want_child],
        want_status_updates: vec![obj(&want_status)],
        ..TableRow::default()
    };
    let outcome = run_row(&crds, &row(want_child.clone()), &constructor).await;
    assert_eq!(outcome, Ok(()));

    // The same row fails with another uid where one is expected.
    want_child["metadata"]["ownerReferences"][0]["uid"] = serde_json::json!("another");
    let problems = run_row(&crds, &row(want_child), &constructor).await.unwrap_err();
    assert!(problems[0].starts_with("create #1 differs"), "{problems:?}");
    // The failure shows what was written, ready to paste into the row.
    assert!(
        problems[0].contains("paste into the row:\n    serde_json::json!({")
            && problems[0].contains(r#""name": "rut-settings""#),
        "{}",
        problems[0]
    );
    // A write the row does not expect at all is shown the same way.
    let unexpected = TableRow {
        want_creates: Vec::new(),
        ..row(serde_json::Value::Null)
    };
    let problems = run_row(&crds, &unexpected, &constructor)
        .await
        .unwrap_err()
        .join("\n");
    assert!(
        problems.contains("want 0 creates, got 1") && problems.contains("serde_json::json!({"),
        "{problems}"
    );
}
