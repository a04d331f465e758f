//! The controller loop's metrics, for Prometheus: the work queue's with
//! client-go's names, the reconcile loop's with controller-runtime's, so
//! dashboards built for either carry over.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

/// Bucket bounds of the two duration histograms, in seconds: Knative's, which
/// resolve the 5 ms to 10 s range where reconciles live.
const DURATION_BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabels {
    controller: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BucketLabels {
    controller: String,
    name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    controller: String,
    result: &'static str,
}

type HistogramFamily = Family<QueueLabels, Histogram, fn() -> Histogram>;

fn duration_histogram() -> Histogram {
    Histogram::new(DURATION_BUCKETS)
}

/// The work-queue metric families of a process: registered once, in an
/// explicit [`Registry`], and shared by every controller (pass a clone in
/// [`ControllerOptions`](super::ControllerOptions)); each queue reports under its
/// own `name` label. Cloning is cheap; clones report into the same families.
///
/// The families are client-go's:
///
/// | family | type | meaning |
/// |---|---|---|
/// | `workqueue_depth` | gauge | keys waiting to be processed |
/// | `workqueue_adds_total` | counter | keys added (a key already waiting is not counted again) |
/// | `workqueue_retries_total` | counter | delayed and rate-limited adds |
/// | `workqueue_queue_duration_seconds` | histogram | time from add to the start of processing |
/// | `workqueue_work_duration_seconds` | histogram | time spent processing |
/// | `workqueue_unfinished_work_seconds` | gauge | sum of the ages of the reconciles in progress |
/// | `workqueue_longest_running_processor_seconds` | gauge | age of the oldest reconcile in progress |
///
/// and controller-runtime's, labelled with the `controller` (the queue's name):
///
/// | family | type | meaning |
/// |---|---|---|
/// | `controller_runtime_reconcile_total` | counter | reconciles by `result`: `success`, `error`, `requeue` (at once) or `requeue_after` |
/// | `controller_runtime_reconcile_errors_total` | counter | reconciles that failed (panics included) |
/// | `controller_runtime_reconcile_panics_total` | counter | reconciles that panicked |
/// | `controller_runtime_reconcile_time_seconds` | histogram | time one reconcile took |
/// | `controller_runtime_active_workers` | gauge | workers reconciling now |
/// | `controller_runtime_max_concurrent_reconciles` | gauge | workers of the controller |
///
/// and client-go's leader election gauge, `leader_election_master_status`
/// (1 while this replica leads the lease `name`, 0 after it stopped), with
/// ours beside it:
///
/// | family | type | meaning |
/// |---|---|---|
/// | `kinject_bucket_keys` | gauge | keys of the `controller` that hash into the bucket `name` |
///
/// `kinject_bucket_keys` counts the objects of the controller's own kind in
/// this replica's informer cache (the keys its reconciler is asked about),
/// hashed as leader election assigns them, whichever replica leads each
/// bucket: every replica reports every bucket, so an operator sees at once
/// whether the buckets are balanced and how many keys each replica's share
/// holds. A controller reports it once leader election has given it buckets
/// and when it was built with [`ControllerOptions::keys`](super::ControllerOptions::keys)
/// (generated reconcilers are); with `--disable-ha` there are no buckets.
///
/// Depth, the two in-progress gauges and the keys per bucket are computed
/// when the registry is scraped, so they are exact and need no background
/// task. The keys per bucket cost, at each scrape, a copy of the cache's
/// keys and one hash per bucket and key, linear in the objects cached.
///
/// ```
/// use prometheus_client::registry::Registry;
/// use kinject_runtime::controller::{ControllerOptions, Impl, WorkqueueMetrics};
/// # struct Noop;
/// # impl kinject_runtime::controller::Reconciler for Noop {
/// #     async fn reconcile(&self, _key: &kinject_runtime::controller::ObjectKey) -> Result<kinject_runtime::controller::Action, kinject_runtime::controller::Error> { Ok(kinject_runtime::controller::Action::await_change()) }
/// # }
///
/// let mut registry = Registry::default();
/// let metrics = WorkqueueMetrics::register(&mut registry);
/// let controller = Impl::new("addressableservices", Noop, ControllerOptions::default().metrics(metrics));
/// controller.enqueue_key(kinject_runtime::controller::ObjectKey::new("default", "web"));
///
/// let mut text = String::new();
/// prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
/// assert!(text.contains(r#"workqueue_depth{name="addressableservices"} 1"#));
/// ```
#[derive(Clone, Debug)]
pub struct WorkqueueMetrics {
    adds: Family<QueueLabels, Counter>,
    retries: Family<QueueLabels, Counter>,
    queue_duration: HistogramFamily,
    work_duration: HistogramFamily,
    queues: Arc<Mutex<Vec<Probe>>>,
    reconciles: Family<ResultLabels, Counter>,
    errors: Family<ControllerLabels, Counter>,
    panics: Family<ControllerLabels, Counter>,
    reconcile_time: Family<ControllerLabels, Histogram, fn() -> Histogram>,
    active_workers: Family<ControllerLabels, Gauge>,
    max_concurrent: Family<ControllerLabels, Gauge>,
    leading: Family<QueueLabels, Gauge>,
    buckets: Arc<Mutex<Vec<BucketProbe>>>,
}

impl WorkqueueMetrics {
    /// Registers the families in `registry` and returns the handle queues report
    /// through. Call it once per registry: the names are fixed, so a second call
    /// would register them twice.
    pub fn register(registry: &mut Registry) -> WorkqueueMetrics {
        let metrics = WorkqueueMetrics {
            adds: Family::default(),
            retries: Family::default(),
            queue_duration: Family::new_with_constructor(duration_histogram),
            work_duration: Family::new_with_constructor(duration_histogram),
            queues: Arc::default(),
            reconciles: Family::default(),
            errors: Family::default(),
            panics: Family::default(),
            reconcile_time: Family::new_with_constructor(duration_histogram),
            active_workers: Family::default(),
            max_concurrent: Family::default(),
            leading: Family::default(),
            buckets: Arc::default(),
        };
        registry.register(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            metrics.adds.clone(),
        );
        registry.register(
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            metrics.retries.clone(),
        );
        registry.register_with_unit(
            "workqueue_queue_duration",
            "How long in seconds an item stays in workqueue before being requested",
            Unit::Seconds,
            metrics.queue_duration.clone(),
        );
        registry.register_with_unit(
            "workqueue_work_duration",
            "How long in seconds processing an item from workqueue takes",
            Unit::Seconds,
            metrics.work_duration.clone(),
        );
        registry.register_collector(Box::new(ScrapeTimeGauges {
            queues: metrics.queues.clone(),
        }));
        metrics.register_loop(registry);
        metrics
    }

    /// controller-runtime's families (help texts as it words them).
    fn register_loop(&self, registry: &mut Registry) {
        registry.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            self.reconciles.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            self.errors.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_panics",
            "Total number of reconciliation panics per controller",
            self.panics.clone(),
        );
        registry.register_with_unit(
            "controller_runtime_reconcile_time",
            "Length of time per reconciliation per controller",
            Unit::Seconds,
            self.reconcile_time.clone(),
        );
        registry.register(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            self.active_workers.clone(),
        );
        registry.register(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            self.max_concurrent.clone(),
        );
        registry.register(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease",
            self.leading.clone(),
        );
        registry.register_collector(Box::new(BucketKeys {
            probes: self.buckets.clone(),
        }));
    }

    /// The handles one controller's loop records through, its families
    /// present (at zero) from the start so a dashboard sees every controller.
    pub(crate) fn for_controller(&self, name: &str, workers: usize) -> LoopMetrics {
        let labels = ControllerLabels {
            controller: name.to_owned(),
        };
        self.max_concurrent
            .get_or_create(&labels)
            .set(i64::try_from(workers).unwrap_or(i64::MAX));
        for result in RESULTS {
            let _present = self.reconciles.get_or_create(&ResultLabels {
                controller: name.to_owned(),
                result,
            });
        }
        LoopMetrics {
            controller: name.to_owned(),
            reconciles: self.reconciles.clone(),
            errors: self.errors.get_or_create_owned(&labels),
            panics: self.panics.get_or_create_owned(&labels),
            reconcile_time: self.reconcile_time.get_or_create_owned(&labels),
            active_workers: self.active_workers.get_or_create_owned(&labels),
            leading: self.leading.clone(),
            buckets: self.buckets.clone(),
        }
    }

    /// The handles one queue records through; `probe` answers the scrape-time
    /// gauges for as long as the queue lives.
    pub(crate) fn for_queue(&self, name: &str, probe: Weak<dyn QueueProbe>) -> QueueMetrics {
        let labels = QueueLabels {
            name: name.to_owned(),
        };
        let mut queues = lock(&self.queues);
        queues.retain(|p| p.probe.strong_count() > 0);
        queues.push(Probe {
            name: name.to_owned(),
            probe,
        });
        QueueMetrics {
            adds: self.adds.get_or_create_owned(&labels),
            retries: self.retries.get_or_create_owned(&labels),
            queue_duration: self.queue_duration.get_or_create_owned(&labels),
            work_duration: self.work_duration.get_or_create_owned(&labels),
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// controller-runtime's results of a reconcile.
const RESULTS: [&str; 4] = ["success", "error", "requeue", "requeue_after"];

/// How one reconcile ended, as controller-runtime counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LoopResult {
    Success,
    Error,
    Panic,
    Requeue,
    RequeueAfter,
}

/// One controller's reconcile-loop handles.
#[derive(Debug)]
pub(crate) struct LoopMetrics {
    controller: String,
    reconciles: Family<ResultLabels, Counter>,
    errors: Counter,
    panics: Counter,
    reconcile_time: Histogram,
    active_workers: Gauge,
    leading: Family<QueueLabels, Gauge>,
    buckets: Arc<Mutex<Vec<BucketProbe>>>,
}

impl LoopMetrics {
    /// Reports this controller's keys per bucket from `probe` while it
    /// lives, in place of what it reported before (leader election started
    /// again with other buckets).
    pub(crate) fn count_bucket_keys(&self, probe: Weak<dyn BucketKeysProbe>) {
        let mut probes = lock(&self.buckets);
        probes.retain(|p| p.probe.strong_count() > 0 && p.controller != self.controller);
        probes.push(BucketProbe {
            controller: self.controller.clone(),
            probe,
        });
    }

    /// Whether this replica leads the lease (bucket) `name`.
    pub(crate) fn leading(&self, name: &str, leads: bool) {
        let labels = QueueLabels {
            name: name.to_owned(),
        };
        self.leading.get_or_create(&labels).set(i64::from(leads));
    }

    pub(crate) fn started(&self) {
        self.active_workers.inc();
    }

    pub(crate) fn finished(&self, result: LoopResult, took: Duration) {
        self.active_workers.dec();
        self.reconcile_time.observe(took.as_secs_f64());
        let result = match result {
            LoopResult::Success => "success",
            LoopResult::Requeue => "requeue",
            LoopResult::RequeueAfter => "requeue_after",
            LoopResult::Error => {
                self.errors.inc();
                "error"
            }
            LoopResult::Panic => {
                self.panics.inc();
                self.errors.inc();
                "error"
            }
        };
        self.reconciles
            .get_or_create(&ResultLabels {
                controller: self.controller.clone(),
                result,
            })
            .inc();
    }
}

/// What a queue reports at scrape time.
pub(crate) trait QueueProbe: Send + Sync {
    /// Keys waiting, and the ages of the keys being processed.
    fn sample(&self) -> QueueSample;
}

/// A queue's state at one scrape.
#[derive(Debug, Default)]
pub(crate) struct QueueSample {
    pub(crate) depth: usize,
    pub(crate) processing_ages: Vec<Duration>,
}

#[derive(Debug)]
struct Probe {
    name: String,
    probe: Weak<dyn QueueProbe>,
}

/// What a controller's buckets hold, at scrape time.
pub(crate) trait BucketKeysProbe: Send + Sync {
    /// Each bucket's name and how many of the controller's keys it holds.
    fn count(&self) -> Vec<(String, usize)>;
}

#[derive(Debug)]
struct BucketProbe {
    controller: String,
    probe: Weak<dyn BucketKeysProbe>,
}

/// Encodes `kinject_bucket_keys` from the live controllers at scrape time.
#[derive(Debug)]
struct BucketKeys {
    probes: Arc<Mutex<Vec<BucketProbe>>>,
}

impl Collector for BucketKeys {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        // Counted outside the lock: a count walks a whole cache.
        let live: Vec<(String, Arc<dyn BucketKeysProbe>)> = lock(&self.probes)
            .iter()
            .filter_map(|p| p.probe.upgrade().map(|probe| (p.controller.clone(), probe)))
            .collect();
        let mut series: Vec<(BucketLabels, usize)> = live
            .into_iter()
            .flat_map(|(controller, probe)| {
                probe.count().into_iter().map(move |(name, keys)| {
                    let labels = BucketLabels {
                        controller: controller.clone(),
                        name,
                    };
                    (labels, keys)
                })
            })
            .collect();
        series.sort_by(|a, b| (&a.0.controller, &a.0.name).cmp(&(&b.0.controller, &b.0.name)));
        let mut family = encoder.encode_descriptor(
            "kinject_bucket_keys",
            "Number of the controller's keys that hash into the leader election bucket. 'name' is \
             the bucket, as leader_election_master_status names it.",
            None,
            MetricType::Gauge,
        )?;
        for (labels, keys) in &series {
            ConstGauge::new(i64::try_from(*keys).unwrap_or(i64::MAX))
                .encode(family.encode_family(labels)?)?;
        }
        Ok(())
    }
}

/// The counters and histograms of one queue.
#[derive(Debug)]
pub(crate) struct QueueMetrics {
    adds: Counter,
    retries: Counter,
    queue_duration: Histogram,
    work_duration: Histogram,
}

impl QueueMetrics {
    pub(crate) fn add(&self) {
        self.adds.inc();
    }

    pub(crate) fn retry(&self) {
        self.retries.inc();
    }

    pub(crate) fn started(&self, waited: Duration) {
        self.queue_duration.observe(waited.as_secs_f64());
    }

    pub(crate) fn finished(&self, worked: Duration) {
        self.work_duration.observe(worked.as_secs_f64());
    }
}

/// Encodes depth and the in-progress gauges from the live queues at scrape time.
#[derive(Debug)]
struct ScrapeTimeGauges {
    queues: Arc<Mutex<Vec<Probe>>>,
}

#[derive(Default)]
struct Totals {
    depth: i64,
    unfinished: f64,
    longest: f64,
}

impl Collector for ScrapeTimeGauges {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        // Queues sharing a name (which Knative forbids) are summed, not duplicated.
        let mut by_name: Vec<(String, Totals)> = Vec::new();
        {
            let probes: Vec<(String, Arc<dyn QueueProbe>)> = lock(&self.queues)
                .iter()
                .filter_map(|p| p.probe.upgrade().map(|q| (p.name.clone(), q)))
                .collect();
            for (name, probe) in probes {
                let sample = probe.sample();
                if !by_name.iter().any(|(n, _)| *n == name) {
                    by_name.push((name.clone(), Totals::default()));
                }
                let Some((_, totals)) = by_name.iter_mut().find(|(n, _)| *n == name) else {
                    continue;
                };
                totals.depth += i64::try_from(sample.depth).unwrap_or(i64::MAX);
                for age in sample.processing_ages {
                    let secs = age.as_secs_f64();
                    totals.unfinished += secs;
                    totals.longest = totals.longest.max(secs);
                }
            }
        }
        by_name.sort_by(|a, b| a.0.cmp(&b.0));

        let mut depth = encoder.encode_descriptor(
            "workqueue_depth",
            "Current depth of workqueue",
            None,
            MetricType::Gauge,
        )?;
        for (name, totals) in &by_name {
            let labels = QueueLabels { name: name.clone() };
            ConstGauge::new(totals.depth).encode(depth.encode_family(&labels)?)?;
        }
        let mut unfinished = encoder.encode_descriptor(
            "workqueue_unfinished_work",
            "How many seconds of work has done that is in progress and hasn't been observed by \
             work_duration. Large values indicate stuck threads. One can deduce the number of stuck \
             threads by observing the rate at which this increases.",
            Some(&Unit::Seconds),
            MetricType::Gauge,
        )?;
        for (name, totals) in &by_name {
            let labels = QueueLabels { name: name.clone() };
            ConstGauge::new(totals.unfinished).encode(unfinished.encode_family(&labels)?)?;
        }
        let mut longest = encoder.encode_descriptor(
            "workqueue_longest_running_processor",
            "How many seconds has the longest running processor for workqueue been running.",
            Some(&Unit::Seconds),
            MetricType::Gauge,
        )?;
        for (name, totals) in &by_name {
            let labels = QueueLabels { name: name.clone() };
            ConstGauge::new(totals.longest).encode(longest.encode_family(&labels)?)?;
        }
        Ok(())
    }
}
