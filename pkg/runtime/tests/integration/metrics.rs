#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The work-queue metric families, scraped as Prometheus text.

use std::sync::Arc;
use std::time::Duration;

use kinject_runtime::controller::{
    Action, ControllerOptions, Error, Impl, ObjectKey, Reconciler, WorkqueueMetrics,
};
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

/// Fails `ns/fail` once; holds `ns/hold` until released.
#[derive(Default)]
struct Mixed {
    started: tokio::sync::Notify,
    release: tokio::sync::Notify,
    failed: std::sync::atomic::AtomicBool,
}

impl Reconciler for Mixed {
    async fn reconcile(&self, key: &ObjectKey) -> Result<Action, Error> {
        let key = key.to_string();
        let key = key.as_str();
        match key {
            "ns/fail" if !self.failed.swap(true, std::sync::atomic::Ordering::SeqCst) => Err("boom".into()),
            "ns/hold" => {
                self.started.notify_one();
                self.release.notified().await;
                Ok(Action::await_change())
            }
            _ => {
                tokio::time::sleep(Duration::from_millis(20)).await;
                Ok(Action::await_change())
            }
        }
    }
}

fn scrape(registry: &Registry) -> String {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
    text
}

/// The value of the sample line that starts with `series` (name and labels).
fn value(text: &str, series: &str) -> f64 {
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("{series} ")))
        .unwrap_or_else(|| panic!("no {series} in\n{text}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

#[tokio::test(start_paused = true)]
async fn queues_report_client_go_families_under_their_name() {
    let mut registry = Registry::default();
    let metrics = WorkqueueMetrics::register(&mut registry);
    let reconciler = Arc::new(Mixed::default());
    let controller = Impl::new(
        "addressableservices",
        reconciler.clone(),
        ControllerOptions::default().metrics(metrics.clone()),
    );
    // A second controller shares the families under its own name.
    let other = Impl::new(
        "simpledeployments",
        Arc::new(Mixed::default()),
        ControllerOptions::default().metrics(metrics),
    );

    controller.enqueue_key(ObjectKey::new("ns", "a"));
    controller.enqueue_key(ObjectKey::new("ns", "a"));
    controller.enqueue_slow_key(ObjectKey::new("ns", "b"));
    controller.enqueue_key(ObjectKey::new("ns", "fail"));
    other.enqueue_key(ObjectKey::new("ns", "x"));

    let text = scrape(&registry);
    for family in [
        "# TYPE workqueue_depth gauge",
        "# TYPE workqueue_adds counter",
        "# TYPE workqueue_retries counter",
        "# TYPE workqueue_queue_duration_seconds histogram",
        "# TYPE workqueue_work_duration_seconds histogram",
        "# TYPE workqueue_unfinished_work_seconds gauge",
        "# TYPE workqueue_longest_running_processor_seconds gauge",
    ] {
        assert!(text.contains(family), "missing {family:?} in\n{text}");
    }
    let q = r#"{name="addressableservices"}"#;
    assert_eq!(value(&text, &format!("workqueue_depth{q}")), 3.0);
    assert_eq!(
        value(&text, &format!("workqueue_adds_total{q}")),
        3.0,
        "the duplicate add is not counted"
    );
    assert_eq!(value(&text, r#"workqueue_depth{name="simpledeployments"}"#), 1.0);

    let shutdown = CancellationToken::new();
    let run = tokio::spawn({
        let (c, s) = (controller.clone(), shutdown.clone());
        async move { c.run(s).await }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;

    let text = scrape(&registry);
    assert_eq!(value(&text, &format!("workqueue_depth{q}")), 0.0);
    assert_eq!(
        value(&text, &format!("workqueue_retries_total{q}")),
        1.0,
        "the failure was retried"
    );
    assert_eq!(
        value(&text, &format!("workqueue_adds_total{q}")),
        4.0,
        "the retry was added again"
    );
    assert_eq!(
        value(&text, &format!("workqueue_queue_duration_seconds_count{q}")),
        4.0
    );
    assert_eq!(
        value(&text, &format!("workqueue_work_duration_seconds_count{q}")),
        4.0
    );
    assert!(
        text.contains(r#"workqueue_work_duration_seconds_bucket{le="0.025",name="addressableservices"} 4"#),
        "{text}"
    );

    // In-progress work is measured at scrape time.
    controller.enqueue_key(ObjectKey::new("ns", "hold"));
    reconciler.started.notified().await;
    tokio::time::advance(Duration::from_secs(3)).await;
    let text = scrape(&registry);
    assert_eq!(
        value(&text, &format!("workqueue_unfinished_work_seconds{q}")),
        3.0
    );
    assert_eq!(
        value(&text, &format!("workqueue_longest_running_processor_seconds{q}")),
        3.0
    );

    reconciler.release.notify_one();
    shutdown.cancel();
    run.await.unwrap();
    let text = scrape(&registry);
    assert_eq!(
        value(&text, &format!("workqueue_unfinished_work_seconds{q}")),
        0.0
    );

    // A dropped queue stops reporting its gauges.
    drop(other);
    assert!(!scrape(&registry).contains(r#"workqueue_depth{name="simpledeployments"}"#));
}

/// Succeeds, fails, panics or asks to come back, by key; `ns/now` asks to
/// come back at once the first time only.
#[derive(Default)]
struct Outcomes {
    requeued: std::sync::atomic::AtomicBool,
}

impl Reconciler for Outcomes {
    async fn reconcile(&self, key: &ObjectKey) -> Result<Action, Error> {
        let key = key.to_string();
        let key = key.as_str();
        match key {
            "ns/error" => Err("boom".into()),
            "ns/panic" => panic!("reconcile panicked on purpose"),
            "ns/now" if !self.requeued.swap(true, std::sync::atomic::Ordering::SeqCst) => {
                Ok(Action::requeue_after(Duration::ZERO))
            }
            "ns/later" => Ok(Action::requeue_after(Duration::from_secs(3600))),
            "ns/skip" => Err(Error::skip_key("ns/skip")),
            _ => Ok(Action::await_change()),
        }
    }
}

#[tokio::test(start_paused = true)]
async fn the_loop_reports_controller_runtime_families() {
    let mut registry = Registry::default();
    let metrics = WorkqueueMetrics::register(&mut registry);
    let controller = Impl::new(
        "widgets",
        Outcomes::default(),
        ControllerOptions::default().concurrency(3).metrics(metrics),
    );
    let c = r#"controller="widgets""#;
    // Present at zero before any reconcile, so a dashboard sees the controller.
    let text = scrape(&registry);
    assert_eq!(
        value(
            &text,
            &format!("controller_runtime_max_concurrent_reconciles{{{c}}}")
        ),
        3.0
    );
    assert_eq!(
        value(
            &text,
            &format!(r#"controller_runtime_reconcile_total{{{c},result="error"}}"#)
        ),
        0.0
    );
    for name in ["ok", "skip", "error", "panic", "now", "later"] {
        controller.enqueue_key(ObjectKey::new("ns", name));
    }
    let shutdown = CancellationToken::new();
    let run = tokio::spawn({
        let (c, s) = (controller.clone(), shutdown.clone());
        async move { c.run(s).await }
    });
    // Long enough for the first round, short of the error's second retry.
    tokio::time::sleep(Duration::from_millis(3)).await;
    shutdown.cancel();
    run.await.unwrap();

    let text = scrape(&registry);
    let total = |result: &str| {
        value(
            &text,
            &format!(r#"controller_runtime_reconcile_total{{{c},result="{result}"}}"#),
        )
    };
    assert!(total("success") >= 2.0, "ok and skip:\n{text}");
    assert!(total("error") >= 2.0, "error and panic:\n{text}");
    assert!(total("requeue") >= 1.0, "{text}");
    assert_eq!(total("requeue_after"), 1.0);
    assert!(
        value(
            &text,
            &format!("controller_runtime_reconcile_errors_total{{{c}}}")
        ) >= 2.0
    );
    assert!(
        value(
            &text,
            &format!("controller_runtime_reconcile_panics_total{{{c}}}")
        ) >= 1.0
    );
    assert_eq!(
        value(&text, &format!("controller_runtime_active_workers{{{c}}}")),
        0.0
    );
    assert!(
        value(
            &text,
            &format!("controller_runtime_reconcile_time_seconds_count{{{c}}}")
        ) >= 6.0
    );
    // No help text ends in "..": prometheus-client adds the period itself.
    assert!(!text.contains(".."), "{text}");
}

#[tokio::test]
async fn leading_a_bucket_is_reported_per_lease() {
    #[derive(Debug)]
    struct Lease(&'static str);
    impl kinject_runtime::leader::Bucket for Lease {
        fn name(&self) -> &str {
            self.0
        }
        fn has(&self, _: &ObjectKey) -> bool {
            true
        }
    }
    let mut registry = Registry::default();
    let metrics = WorkqueueMetrics::register(&mut registry);
    let controller = Impl::new(
        "widgets",
        Outcomes::default(),
        ControllerOptions::default()
            .metrics(metrics)
            .leader_aware(Arc::new(kinject_runtime::leader::LeaderAwareFuncs::default())),
    );
    let lease = Arc::new(Lease("controller.widgets.00-of-01"));
    controller.promote(lease.clone());
    let series = r#"leader_election_master_status{name="controller.widgets.00-of-01"}"#;
    assert_eq!(value(&scrape(&registry), series), 1.0);
    controller.demote(lease.as_ref());
    assert_eq!(value(&scrape(&registry), series), 0.0);
}

/// The keys a test hands the controller, changed between scrapes.
#[derive(Debug, Default)]
struct Keys(std::sync::Mutex<Vec<ObjectKey>>);

impl kinject_runtime::controller::KeySource for Keys {
    fn keys(&self) -> Vec<ObjectKey> {
        self.0.lock().unwrap().clone()
    }
}

/// Lease elections give the controller its buckets; from then on each scrape
/// counts its keys per bucket, as they are at that scrape, for every bucket
/// whoever leads it, until the controller is gone.
#[tokio::test(start_paused = true)]
async fn keys_per_bucket_are_counted_at_each_scrape() {
    use kinject_runtime::leader::LeaderAwareFuncs;
    use kinject_runtime::leaderelection::{ComponentConfig, spawn_electors};

    let mut registry = Registry::default();
    let metrics = WorkqueueMetrics::register(&mut registry);
    let keys = Arc::new(Keys::default());
    let controller = Impl::new(
        "widgets",
        Outcomes::default(),
        ControllerOptions::default()
            .metrics(metrics)
            .leader_aware(Arc::new(LeaderAwareFuncs::new(None, None)))
            .keys(keys.clone()),
    );
    assert!(
        !scrape(&registry).contains("kinject_bucket_keys{"),
        "no buckets before leader election"
    );

    let env = kinject_testenv::TestEnv::builder().namespace("ns").build();
    let mut config = ComponentConfig::new("controller");
    config.buckets = 3;
    let buckets = config.bucket_set(controller.name());
    let shutdown = CancellationToken::new();
    let electors = spawn_electors(
        env.client(),
        "ns",
        &controller,
        &config,
        "replica-a",
        shutdown.clone(),
    )
    .unwrap();

    let counts = |text: &str| -> Vec<f64> {
        buckets
            .names()
            .iter()
            .map(|name| {
                value(
                    text,
                    &format!(r#"kinject_bucket_keys{{controller="widgets",name="{name}"}}"#),
                )
            })
            .collect()
    };
    assert_eq!(counts(&scrape(&registry)), [0.0; 3]);
    let added: Vec<ObjectKey> = (0..50).map(|i| ObjectKey::new("ns", format!("w-{i}"))).collect();
    *keys.0.lock().unwrap() = added.clone();
    let expected: Vec<f64> = buckets
        .names()
        .iter()
        .map(|name| {
            added
                .iter()
                .filter(|k| buckets.owner_of(k) == Some(name.as_str()))
                .count() as f64
        })
        .collect();
    let text = scrape(&registry);
    assert!(text.contains("# TYPE kinject_bucket_keys gauge"), "{text}");
    assert_eq!(counts(&text), expected);
    assert_eq!(expected.iter().sum::<f64>(), 50.0);

    shutdown.cancel();
    electors.await.unwrap();
    drop(controller);
    assert!(
        !scrape(&registry).contains("kinject_bucket_keys{"),
        "a dropped controller stops reporting"
    );
}
