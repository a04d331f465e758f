//! The controller machinery: a work queue of object keys and the workers that
//! feed them to a [`Reconciler`] (Knative's `controller.Impl`).
//!
//! Informer event handlers call the enqueue methods of an [`Impl`]
//! ([`enqueue`](Impl::enqueue), [`enqueue_controller_of_kind`](Impl::enqueue_controller_of_kind),
//! …); [`Impl::enqueue_controller_handler`] is the whole handler for the
//! children a controller owns, right for namespaced and cluster-scoped owners
//! alike (children get their reference from
//! [`crate::owner::set_controller_ref`]). The [`WorkQueue`] dedupes keys, keeps
//! a key away from two workers at once, delays and backs off, and drains
//! changes before resyncs. [`Impl::run`]
//! starts the workers; each hands a key to [`Reconciler::reconcile`] and treats
//! the result as Knative's `handleErr` does (see [`Error`]).
//!
//! ```
//! use std::time::Duration;
//! use kinject_runtime::controller::{Action, ControllerOptions, Error, Impl, ObjectKey, Reconciler};
//! use tokio_util::sync::CancellationToken;
//!
//! struct Greeter;
//!
//! impl Reconciler for Greeter {
//!     async fn reconcile(&self, key: &ObjectKey) -> Result<Action, Error> {
//!         println!("converging {key}");
//!         Ok(Action::await_change())
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let controller = Impl::new("greeter", Greeter, ControllerOptions::default());
//! controller.enqueue_key(ObjectKey::new("default", "hello"));
//!
//! let shutdown = CancellationToken::new();
//! let run = tokio::spawn({
//!     let controller = controller.clone();
//!     let shutdown = shutdown.clone();
//!     async move { controller.run(shutdown).await }
//! });
//! tokio::time::sleep(Duration::from_secs(1)).await;
//! shutdown.cancel();
//! run.await.unwrap(); // returns once in-flight reconciles finish
//! # }
//! ```

mod action;
mod error;
pub mod filter;

mod metrics;
mod own_writes;
mod rate_limiter;
mod workqueue;

use std::collections::HashSet;
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::FutureExt;
use kube::Resource;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, Level};

pub use crate::key::{InvalidKey, ObjectKey};
pub use crate::token_bucket::TokenBucket;
pub use action::Action;
pub use error::{Error, ResultExt};
pub(crate) use metrics::BucketKeysProbe;
pub use metrics::WorkqueueMetrics;
pub(crate) use own_writes::OwnWrites;
pub use rate_limiter::{
    BucketRateLimiter, ItemExponentialFailureRateLimiter, MaxOfRateLimiter, RateLimiter,
    default_controller_rate_limiter,
};
pub use workqueue::{Lane, QueueSnapshot, Reason, Request, WorkQueue};

use crate::client::ApiScope;
use crate::duration::go_duration;
use crate::informer;
use crate::leader::{Bucket, Enqueue, LeaderAware};
use crate::owner;
use crate::tracker::Tracker;

/// Workers per controller when [`ControllerOptions::concurrency`] is zero
/// (Knative's `DefaultThreadsPerController`). A process that wants another
/// default sets it in the options it passes every controller; there is no
/// process-wide variable.
pub const DEFAULT_CONCURRENCY: usize = 2;

/// Log field carrying the key being reconciled (Knative's `logkey.Key`).
const KEY_FIELD: &str = "knative.dev/key";

/// Converges the object a key names: the business logic a controller runs.
///
/// It is called with one key at a time per key (never concurrently for the same
/// key) and must be idempotent: keys are level-triggered, so it reads the
/// object's current state (from a lister) rather than relying on which event
/// enqueued it. Its [`Action`] or [`Error`] decides what happens to the key
/// next.
pub trait Reconciler: Send + Sync + 'static {
    /// Converges the object `key` names: the key as the queue holds it, a
    /// namespace (empty for a cluster-scoped object) and a name.
    fn reconcile(&self, key: &ObjectKey) -> impl Future<Output = Result<Action, Error>> + Send;
}

/// A shared reconciler, so a test (or anything else) can keep a handle on the
/// reconciler it gave an [`Impl`].
impl<R: Reconciler> Reconciler for Arc<R> {
    fn reconcile(&self, key: &ObjectKey) -> impl Future<Output = Result<Action, Error>> + Send {
        (**self).reconcile(key)
    }
}

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// [`Reconciler`] behind a pointer, so [`Impl`] need not be generic.
trait DynReconciler: Send + Sync + 'static {
    fn reconcile_boxed<'a>(&'a self, key: &'a ObjectKey) -> BoxFuture<'a, Result<Action, Error>>;
}

impl<R: Reconciler> DynReconciler for R {
    fn reconcile_boxed<'a>(&'a self, key: &'a ObjectKey) -> BoxFuture<'a, Result<Action, Error>> {
        Box::pin(self.reconcile(key))
    }
}

/// How an [`Impl`] is built. `Default` gives Knative's defaults: two workers and
/// client-go's default rate limiter, without metrics.
///
/// ```
/// use kinject_runtime::controller::ControllerOptions;
/// let options = ControllerOptions::default().concurrency(4);
/// assert_eq!(options.concurrency, 4);
/// ```
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct ControllerOptions {
    /// Workers reconciling in parallel; zero means [`DEFAULT_CONCURRENCY`].
    pub concurrency: usize,
    /// How long failing keys back off; `None` means
    /// [`default_controller_rate_limiter`].
    pub rate_limiter: Option<Box<dyn RateLimiter>>,
    /// Where the queue reports its metrics; `None` reports nowhere.
    pub metrics: Option<WorkqueueMetrics>,
    /// The reconciler's leadership, for leader election to promote and demote
    /// buckets through [`Impl::promote`] and [`Impl::demote`].
    pub leader_aware: Option<Arc<dyn LeaderAware>>,
    /// Cancelled as soon as [`Impl::run`] is told to shut down, so reconciles in
    /// flight can notice.
    pub shutdown_signal: Option<CancellationToken>,
    /// How long the controller's [`Tracker`] keeps a registration after its
    /// last renewal; `None` means [`DEFAULT_TRACKER_LEASE`]. Knative uses three
    /// resync periods, so a reconcile renews it well before it lapses.
    pub tracker_lease: Option<Duration>,
    /// The keys the controller is responsible for, which the
    /// `kinject_bucket_keys` gauge counts per leader election bucket and by
    /// which the replicas weigh the buckets they share; `None` reports no
    /// such gauge and shares buckets by count alone. Generated reconcilers
    /// pass their kind's cache.
    pub keys: Option<Arc<dyn KeySource>>,
}

/// The keys a controller is responsible for, such as the objects of its kind
/// in an informer's cache: what its metrics count per leader election bucket.
pub trait KeySource: Send + Sync + fmt::Debug {
    /// Every key, now.
    fn keys(&self) -> Vec<ObjectKey>;

    /// Whether [`keys`](Self::keys) has them all: false while a cache is
    /// still listing. Leader election weighs each bucket by its keys only
    /// then, so that replicas share the keys evenly, not the buckets alone.
    fn complete(&self) -> bool {
        true
    }
}

/// Three default resync periods of ten hours, as Knative's `GetTrackerLease`.
pub const DEFAULT_TRACKER_LEASE: Duration = Duration::from_secs(3 * 10 * 60 * 60);

impl ControllerOptions {
    /// Sets [`concurrency`](Self::concurrency).
    pub fn concurrency(mut self, workers: usize) -> Self {
        self.concurrency = workers;
        self
    }

    /// Sets [`rate_limiter`](Self::rate_limiter).
    pub fn rate_limiter(mut self, limiter: impl RateLimiter) -> Self {
        self.rate_limiter = Some(Box::new(limiter));
        self
    }

    /// Sets [`metrics`](Self::metrics).
    pub fn metrics(mut self, metrics: WorkqueueMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Makes the controller leader-aware; see [`ControllerOptions::leader_aware`].
    pub fn leader_aware(mut self, leadership: Arc<dyn LeaderAware>) -> Self {
        self.leader_aware = Some(leadership);
        self
    }

    /// See [`ControllerOptions::shutdown_signal`].
    pub fn shutdown_signal(mut self, token: CancellationToken) -> Self {
        self.shutdown_signal = Some(token);
        self
    }

    /// Sets [`tracker_lease`](Self::tracker_lease).
    pub fn tracker_lease(mut self, lease: Duration) -> Self {
        self.tracker_lease = Some(lease);
        self
    }

    /// Sets [`keys`](Self::keys).
    pub fn keys(mut self, keys: Arc<dyn KeySource>) -> Self {
        self.keys = Some(keys);
        self
    }
}

/// A controller: a named [`WorkQueue`], the [`Reconciler`] its workers call,
/// and the enqueue methods informer event handlers use. Cloning is cheap and
/// shares everything, so handlers each hold a clone.
#[derive(Clone)]
pub struct Impl {
    inner: Arc<Inner>,
}

struct Inner {
    name: String,
    reconciler: Box<dyn DynReconciler>,
    queue: WorkQueue,
    concurrency: usize,
    leader_aware: Option<Arc<dyn LeaderAware>>,
    shutdown_signal: Option<CancellationToken>,
    tracker: Tracker,
    /// What the reconciler wrote to the controller's own objects; see
    /// [`Impl::enqueue_handler`].
    own_writes: OwnWrites,
    /// The keys queued when the workers started, until each was reconciled
    /// once: a restart reports them in one summary line, not a line each.
    startup: parking_lot::Mutex<Option<Startup>>,
    /// controller-runtime's reconcile-loop metrics, when the process has a registry.
    loop_metrics: Option<metrics::LoopMetrics>,
    /// The informers each reconcile waits for; see [`Impl::reconcile_only_when_synced`].
    gate: parking_lot::Mutex<Option<Arc<dyn SyncGate>>>,
    /// See [`ControllerOptions::keys`].
    keys: Option<Arc<dyn KeySource>>,
    /// What the metrics count keys per bucket with; the registry holds it
    /// weakly, so it goes when the controller does.
    bucket_keys: parking_lot::Mutex<Option<Arc<dyn metrics::BucketKeysProbe>>>,
    /// Electors of the controller's buckets that have not yet made their
    /// first attempt at their lease; the workers wait for them.
    first_elections: tokio::sync::watch::Sender<usize>,
}

/// An elector's first attempt at its bucket's lease, pending until dropped;
/// see [`Impl::first_election`].
pub(crate) struct FirstElection(Weak<Inner>);

impl Drop for FirstElection {
    fn drop(&mut self) {
        if let Some(inner) = self.0.upgrade() {
            inner.first_elections.send_modify(|n| *n = n.saturating_sub(1));
        }
    }
}

/// The caches a controller reads: whether they are in sync, and a future
/// that ends when they are. `InformerSet` (from the injection context) is
/// one.
pub trait SyncGate: Send + Sync {
    /// Whether every cache is in sync.
    fn synced(&self) -> bool;
    /// Ends once every cache is in sync.
    fn wait(&self) -> futures::future::BoxFuture<'static, ()>;
    /// What is not in sync, for the log line of a wait.
    fn describe_unsynced(&self) -> String;
}

/// How the first reconcile of the keys queued at start is going.
struct Startup {
    began: Instant,
    pending: HashSet<ObjectKey>,
    succeeded: usize,
    failed: usize,
    /// Skipped (not led yet, or gone) or requeued by request.
    skipped: usize,
}

/// How a reconcile ended, as controller-runtime's metrics count it: a skipped
/// key is a success, a conflict an error.
fn loop_result(
    outcome: &Result<Result<Action, Error>, Box<dyn std::any::Any + Send>>,
) -> metrics::LoopResult {
    match outcome {
        Ok(Ok(action)) => match action.requeue_delay() {
            None => metrics::LoopResult::Success,
            Some(Duration::ZERO) => metrics::LoopResult::Requeue,
            Some(_) => metrics::LoopResult::RequeueAfter,
        },
        Ok(Err(err)) if err.is_skip_key() => metrics::LoopResult::Success,
        Ok(Err(_)) => metrics::LoopResult::Error,
        Err(_) => metrics::LoopResult::Panic,
    }
}

/// How one reconcile went, for the start summary.
#[derive(Clone, Copy)]
enum Processed {
    Succeeded,
    Failed,
    Skipped,
}

impl fmt::Debug for Impl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Impl")
            .field("name", &self.inner.name)
            .field("concurrency", &self.inner.concurrency)
            .field("queue", &self.inner.queue)
            .finish_non_exhaustive()
    }
}

impl Impl {
    /// A controller named `name` (its queue's name: unique in the process, the
    /// `name` label of its metrics and the `knative.dev/controller` log field)
    /// that feeds keys to `reconciler`.
    pub fn new(name: impl Into<String>, reconciler: impl Reconciler, options: ControllerOptions) -> Self {
        Self::with_tracker(name, options, |_| reconciler)
    }

    /// Like [`Impl::new`], for a reconciler that needs the controller's
    /// [`Tracker`] (which enqueues into the controller, so it exists only once
    /// the controller does): `make` receives it.
    pub fn with_tracker<R: Reconciler>(
        name: impl Into<String>,
        options: ControllerOptions,
        make: impl FnOnce(Tracker) -> R,
    ) -> Self {
        Self::with_parts(name, options, |tracker, _| make(tracker))
    }

    /// Like [`Impl::with_tracker`], for a reconciler that also tells the
    /// controller what it writes to its own objects (the generic reconciler).
    pub(crate) fn with_parts<R: Reconciler>(
        name: impl Into<String>,
        options: ControllerOptions,
        make: impl FnOnce(Tracker, OwnWrites) -> R,
    ) -> Self {
        let name = name.into();
        let rate_limiter = options
            .rate_limiter
            .unwrap_or_else(|| Box::new(default_controller_rate_limiter()));
        let queue = WorkQueue::build(name.clone(), rate_limiter, options.metrics.as_ref());
        let concurrency = if options.concurrency == 0 {
            DEFAULT_CONCURRENCY
        } else {
            options.concurrency
        };
        let lease = options.tracker_lease.unwrap_or(DEFAULT_TRACKER_LEASE);
        let loop_metrics = options
            .metrics
            .as_ref()
            .map(|m| m.for_controller(&name, concurrency));
        let inner = Arc::new_cyclic(|weak: &Weak<Inner>| {
            // Weak, so a reconciler holding the tracker does not keep the
            // controller alive.
            let related = weak.clone();
            let tracker = Tracker::new(
                move |key| {
                    if let Some(inner) = related.upgrade() {
                        Impl { inner }.enqueue_related(key);
                    }
                },
                lease,
            );
            let changed = weak.clone();
            let own_writes = OwnWrites::new(move |key| {
                if let Some(inner) = changed.upgrade() {
                    Impl { inner }.enqueue_key(key);
                }
            });
            Inner {
                name,
                reconciler: Box::new(make(tracker.clone(), own_writes.clone())),
                queue,
                concurrency,
                leader_aware: options.leader_aware,
                shutdown_signal: options.shutdown_signal,
                tracker,
                own_writes,
                startup: parking_lot::Mutex::new(None),
                loop_metrics,
                gate: parking_lot::Mutex::new(None),
                keys: options.keys,
                bucket_keys: parking_lot::Mutex::new(None),
                first_elections: tokio::sync::watch::Sender::new(0),
            }
        });
        Impl { inner }
    }

    /// Makes every reconcile wait until `gate`'s caches are in sync. A cache
    /// that lists again (the API server restarted, another informer of the
    /// process saw its history change) then holds back the reconciles, and
    /// so the writes, that would act on what it held before.
    pub fn reconcile_only_when_synced(&self, gate: Arc<dyn SyncGate>) {
        *self.inner.gate.lock() = Some(gate);
    }

    /// The controller's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The work queue, for direct use and for tests that check what was
    /// enqueued ([`WorkQueue::snapshot`]).
    pub fn work_queue(&self) -> &WorkQueue {
        &self.inner.queue
    }

    /// The controller's tracker (Knative's `impl.Tracker`): its callback
    /// enqueues the observer's key into this controller. Wire the referenced
    /// kind's informer to [`Tracker::on_changed`].
    pub fn tracker(&self) -> &Tracker {
        &self.inner.tracker
    }

    /// The handler that feeds this controller its own kind (Knative's
    /// `HandleAll(impl.Enqueue)`): adds, updates and deletes enqueue the
    /// object in the fast lane, and an informer's periodic resync in the slow
    /// lane, so a resync of every object never delays a real change.
    ///
    /// An update that only echoes a write of the generic reconciler (its
    /// status update or finalizer patch, from the version it replaced to the
    /// version it wrote) enqueues nothing: the reconcile that wrote it saw
    /// that state. Knative enqueues it, and reconciles every object it
    /// writes a second time.
    ///
    /// ```
    /// # use k8s_openapi::api::core::v1::ConfigMap;
    /// # use kinject_runtime::{controller::Impl, injection::Context};
    /// # fn wire(ctx: &Context, controller: &Impl) {
    /// ctx.informer::<ConfigMap>().add_event_handler(controller.enqueue_handler());
    /// # }
    /// ```
    pub fn enqueue_handler<K: Resource + 'static>(&self) -> informer::EventHandler<K> {
        let (changed, updated, resynced) = (self.clone(), self.clone(), self.clone());
        informer::EventHandler::all(move |obj: &K| changed.enqueue(obj))
            .on_update(move |old: &K, new: &K| {
                let key = ObjectKey::of(new);
                let versions = (
                    old.meta().resource_version.as_deref(),
                    new.meta().resource_version.as_deref(),
                );
                if !updated.inner.own_writes.is_echo(&key, versions.0, versions.1) {
                    updated.enqueue_key(key);
                }
            })
            .on_resync(move |obj: &K| resynced.enqueue_slow(obj))
    }

    /// Enqueues the object's `namespace/name` in the fast lane, as
    /// [`Reason::Changed`].
    pub fn enqueue<K: Resource>(&self, obj: &K) {
        self.enqueue_key(ObjectKey::of(obj));
    }

    /// Enqueues `key` in the fast lane, as [`Reason::Changed`].
    pub fn enqueue_key(&self, key: ObjectKey) {
        self.enqueue_for(key, Reason::Changed);
    }

    /// Enqueues `key` for `reason`, in the reason's lane ([`Reason::lane`]).
    pub fn enqueue_for(&self, key: ObjectKey, reason: Reason) {
        let queue = &self.inner.queue;
        if tracing::enabled!(Level::DEBUG) {
            queue.add_for(key.clone(), reason);
            tracing::debug!({ KEY_FIELD } = %key, %reason, "Adding to queue {key} (depth: {})", queue.len());
        } else {
            queue.add_for(key, reason);
        }
    }

    /// Enqueues `key` because another object it depends on changed (its
    /// child, its namespace, an object it tracks).
    fn enqueue_related(&self, key: ObjectKey) {
        self.enqueue_for(key, Reason::Related);
    }

    /// Enqueues the object's key in the fast lane after `delay`.
    pub fn enqueue_after<K: Resource>(&self, obj: &K, delay: Duration) {
        self.enqueue_key_after(ObjectKey::of(obj), delay);
    }

    /// Enqueues `key` in the fast lane after `delay`; a key already delayed keeps
    /// the earlier time.
    pub fn enqueue_key_after(&self, key: ObjectKey, delay: Duration) {
        let queue = &self.inner.queue;
        tracing::debug!(
            { KEY_FIELD } = %key,
            "Adding to queue {key} (delay: {}, depth: {})",
            go_duration(delay),
            queue.len()
        );
        queue.add_after(key, delay);
    }

    /// Enqueues the object's key in the slow lane, behind every change.
    pub fn enqueue_slow<K: Resource>(&self, obj: &K) {
        self.enqueue_slow_key(ObjectKey::of(obj));
    }

    /// Enqueues `key` in the slow lane as [`Reason::Resync`], behind every
    /// change. A key already queued in either lane stays where it is.
    pub fn enqueue_slow_key(&self, key: ObjectKey) {
        let queue = &self.inner.queue;
        queue.add_slow(key.clone());
        tracing::debug!(
            { KEY_FIELD } = %key,
            "Adding to the slow queue {key} (depth(total/slow): {}/{})",
            queue.len(),
            queue.slow_len()
        );
    }

    /// A handler that enqueues `key` whatever object it is given (Knative's
    /// `EnqueueSentinel`): for a controller that reconciles one fixed object when
    /// any of some other objects changes.
    pub fn enqueue_sentinel<K: Resource>(
        &self,
        key: ObjectKey,
    ) -> impl Fn(&K) + Send + Sync + Clone + 'static {
        let this = self.clone();
        move |_: &K| this.enqueue_key(key.clone())
    }

    /// Enqueues the object's controller: the name of its owner reference marked
    /// `controller: true`, in the object's own namespace (Knative's
    /// `EnqueueControllerOf`). Objects without a controller are ignored.
    ///
    /// Right only for namespaced owners: an owner reference does not say its
    /// kind's scope, so a cluster-scoped owner would be enqueued under the
    /// child's namespace and never found. Prefer
    /// [`enqueue_controller_of_kind`](Impl::enqueue_controller_of_kind), which
    /// knows the owner's type.
    ///
    /// Keys are queued as [`Reason::Related`]. In a handler of your own, add
    /// [`skip_resyncs`](informer::EventHandler::skip_resyncs): the owner's
    /// informer resyncs the owner already.
    pub fn enqueue_controller_of<K: Resource>(&self, obj: &K) {
        if let Some(owner) = filter::controller_of(obj) {
            let namespace = obj.meta().namespace.clone().unwrap_or_default();
            self.enqueue_related(ObjectKey::new(namespace, owner.name.clone()));
        }
    }

    /// Enqueues the object's controller when it is an `O`, under the key
    /// [`owner::controller_key`] gives: in the child's namespace for a
    /// namespaced `O`, with an empty namespace for a cluster-scoped one. Objects
    /// without a controller, or controlled by another kind, are ignored.
    pub fn enqueue_controller_of_kind<O, C>(&self, child: &C)
    where
        O: Resource<DynamicType = (), Scope: ApiScope>,
        C: Resource,
    {
        if let Some(key) = owner::controller_key::<O, C>(child) {
            self.enqueue_related(key);
        }
    }

    /// The handler a controller puts on the children it owns (Knative's
    /// `FilterControllerGK` with `EnqueueControllerOf`): children controlled by
    /// an `O` enqueue that `O` on add, update and delete, others are left out.
    ///
    /// ```
    /// # use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
    /// # use kinject_runtime::{controller::Impl, injection::Context};
    /// # fn wire(ctx: &Context, controller: &Impl) {
    /// // ConfigMaps a Namespace controls enqueue the Namespace (key "", name).
    /// ctx.informer::<ConfigMap>()
    ///     .add_event_handler(controller.enqueue_controller_handler::<Namespace, ConfigMap>());
    /// # }
    /// ```
    pub fn enqueue_controller_handler<O, C>(&self) -> informer::EventHandler<C>
    where
        O: Resource<DynamicType = (), Scope: ApiScope>,
        C: Resource + 'static,
    {
        let this = self.clone();
        informer::EventHandler::all(move |child: &C| this.enqueue_controller_of_kind::<O, C>(child))
            .with_filter(filter::filter_controller::<C, O>())
            .skip_resyncs()
    }

    /// A handler that enqueues the namespace-scoped object an object names in
    /// its labels: the name in label `name_label`, the namespace in label
    /// `namespace_label`, or the object's own namespace when `namespace_label` is
    /// empty. Objects without the labels are ignored (logged at debug). Wrap
    /// it as `EventHandler::all(f).skip_resyncs()`: the named object's own
    /// informer resyncs it.
    pub fn enqueue_label_of_namespace_scoped_resource<K: Resource>(
        &self,
        namespace_label: impl Into<String>,
        name_label: impl Into<String>,
    ) -> impl Fn(&K) + Send + Sync + Clone + 'static {
        let this = self.clone();
        let (namespace_label, name_label) = (namespace_label.into(), name_label.into());
        move |obj: &K| {
            let meta = obj.meta();
            let own = ObjectKey::of(obj);
            let labels = meta.labels.as_ref();
            let Some(name) = labels.and_then(|l| l.get(&name_label)) else {
                tracing::debug!(
                    "Object {}/{} does not have a referring name label {name_label}",
                    own.namespace,
                    own.name
                );
                return;
            };
            if namespace_label.is_empty() {
                this.enqueue_related(ObjectKey::new(own.namespace, name.clone()));
                return;
            }
            match labels.and_then(|l| l.get(&namespace_label)) {
                Some(namespace) => this.enqueue_related(ObjectKey::new(namespace.clone(), name.clone())),
                None => tracing::debug!(
                    "Object {}/{} does not have a referring namespace label {namespace_label}",
                    own.namespace,
                    own.name
                ),
            }
        }
    }

    /// A handler that enqueues the cluster-scoped object an object names in its
    /// label `name_label`. Objects without the label are ignored (logged at
    /// debug). Wrap it as `EventHandler::all(f).skip_resyncs()`.
    pub fn enqueue_label_of_cluster_scoped_resource<K: Resource>(
        &self,
        name_label: impl Into<String>,
    ) -> impl Fn(&K) + Send + Sync + Clone + 'static {
        let this = self.clone();
        let name_label = name_label.into();
        move |obj: &K| match obj.meta().labels.as_ref().and_then(|l| l.get(&name_label)) {
            Some(name) => this.enqueue_related(ObjectKey::new("", name.clone())),
            None => {
                let own = ObjectKey::of(obj);
                tracing::debug!(
                    "Object {}/{} does not have a referring name label {name_label}",
                    own.namespace,
                    own.name
                );
            }
        }
    }

    /// Enqueues the namespace the object lives in: the key with an empty
    /// namespace and the object's namespace as the name, for a controller of
    /// `Namespace` objects.
    pub fn enqueue_namespace_of<K: Resource>(&self, obj: &K) {
        let namespace = obj.meta().namespace.clone().unwrap_or_default();
        self.enqueue_related(ObjectKey::new("", namespace));
    }

    /// Enqueues every key in the slow lane, so that a resync does not delay real
    /// changes (Knative's `GlobalResync`, given the keys of an informer's store).
    /// No-op while shutting down.
    pub fn global_resync(&self, keys: impl IntoIterator<Item = ObjectKey>) {
        let queue = &self.inner.queue;
        if queue.is_shutting_down() {
            return;
        }
        for key in keys {
            queue.add_for(key, Reason::Resync);
        }
    }

    /// Runs the reconciler once for `key`, outside the queue and its result
    /// handling; table tests use it as Knative's call `Reconcile(ctx, key)`.
    pub async fn reconcile_once(&self, key: &ObjectKey) -> Result<Action, Error> {
        self.inner.reconciler.reconcile_boxed(key).await
    }

    /// True when the reconciler takes part in leader election.
    pub fn is_leader_aware(&self) -> bool {
        self.inner.leader_aware.is_some()
    }

    /// This replica now leads `bucket`: the reconciler may write its keys, and
    /// every key of the bucket is re-enqueued on the slow lane to catch up with
    /// what changed while another replica led it.
    pub fn promote(&self, bucket: Arc<dyn Bucket>) {
        let Some(leadership) = &self.inner.leader_aware else {
            return;
        };
        let weak = Arc::downgrade(&self.inner);
        let enqueue: Enqueue = Arc::new(move |bucket: &dyn Bucket, key: ObjectKey| {
            if let Some(inner) = weak.upgrade() {
                Impl { inner }.maybe_enqueue_bucket_key(bucket, key);
            }
        });
        if let Some(m) = &self.inner.loop_metrics {
            m.leading(bucket.name(), true);
        }
        leadership.promote(bucket, Some(enqueue));
    }

    /// Leads `bucket` from the start without re-enqueuing (the universal bucket
    /// of a replica running alone, whose informers deliver every object anyway).
    pub fn promote_initial(&self, bucket: Arc<dyn Bucket>) {
        if let Some(leadership) = &self.inner.leader_aware {
            leadership.promote(bucket, None);
        }
    }

    /// This replica no longer leads `bucket`; its keys are no longer written.
    pub fn demote(&self, bucket: &dyn Bucket) {
        if let Some(leadership) = &self.inner.leader_aware {
            if let Some(m) = &self.inner.loop_metrics {
                m.leading(bucket.name(), false);
            }
            leadership.demote(bucket);
            // No longer written here, so no longer this replica's writes.
            self.inner.own_writes.forget_bucket(bucket);
        }
    }

    /// Returns once no reconcile of a key of `bucket` is running. After
    /// [`demote`](Self::demote), reconciles that start write nothing, but one
    /// that passed its leadership check before may still write; leader
    /// election waits for this before it releases the bucket's lease.
    pub async fn reconciles_finished(&self, bucket: &dyn Bucket) {
        self.inner.queue.processed(|key| bucket.has(key)).await;
    }

    /// The keys the controller is responsible for, when it was told
    /// ([`ControllerOptions::keys`]).
    pub(crate) fn key_source(&self) -> Option<Arc<dyn KeySource>> {
        self.inner.keys.clone()
    }

    /// Reports the keys per bucket from `probe`, when the process has a
    /// metrics registry, in place of what was reported before.
    pub(crate) fn count_bucket_keys(&self, probe: Arc<dyn metrics::BucketKeysProbe>) {
        let Some(m) = &self.inner.loop_metrics else {
            return;
        };
        m.count_bucket_keys(Arc::downgrade(&probe));
        *self.inner.bucket_keys.lock() = Some(probe);
    }

    /// Holds the workers back (see [`run`](Self::run)) until the returned
    /// guard is dropped: an elector holds one until its first attempt at its
    /// lease has promoted the controller or found the lease another's.
    pub(crate) fn first_election(&self) -> FirstElection {
        self.inner.first_elections.send_modify(|n| *n += 1);
        FirstElection(Arc::downgrade(&self.inner))
    }

    /// Waits until every elector started for the controller has made its
    /// first attempt; false when `shutdown` came first.
    async fn elected(&self, shutdown: &CancellationToken) -> bool {
        let mut pending = self.inner.first_elections.subscribe();
        tokio::select! {
            // The sender lives as long as `self`: this ends only at zero.
            _ = pending.wait_for(|n| *n == 0) => true,
            () = shutdown.cancelled() => false,
        }
    }

    /// Enqueues `key` on the slow lane if `bucket` holds it (Knative's
    /// `MaybeEnqueueBucketKey`).
    pub fn maybe_enqueue_bucket_key(&self, bucket: &dyn Bucket, key: ObjectKey) {
        if bucket.has(&key) {
            self.enqueue_for(key, Reason::Promoted);
        }
    }

    /// Runs the workers until `shutdown` is cancelled, then stops the queue and
    /// returns once every in-flight reconcile has finished.
    ///
    /// With leader election started for the controller
    /// ([`spawn_electors`](crate::leaderelection::spawn_electors)), the
    /// workers start once each bucket's elector has made its first attempt
    /// at its lease: a key reconciled before its bucket's promotion would be
    /// reconciled again by it, as Knative does at every start. Keys queued
    /// meanwhile wait, and a promotion adds none twice.
    ///
    /// Keys still queued or delayed at shutdown are dropped, not processed: keys
    /// are level-triggered, and the next process (or the next leader) lists and
    /// enqueues every object again. Knative instead drains the queue, which can
    /// outlast a pod's termination grace period.
    ///
    /// Each worker runs in its own tokio task. Cancel through `shutdown` rather
    /// than by dropping this future, which would abort reconciles mid-way. Once
    /// it returns, the queue stays shut down; an `Impl` runs once.
    pub async fn run(&self, shutdown: CancellationToken) {
        let inner = &self.inner;
        let mut workers = JoinSet::new();
        if self.elected(&shutdown).await {
            self.start_workers(&mut workers, &shutdown);
        }

        shutdown.cancelled().await;
        if let Some(signal) = &inner.shutdown_signal {
            signal.cancel();
        }

        let span = self.span();
        async {
            let dropped = inner.queue.shut_down();
            tracing::info!(dropped_keys = dropped, "Shutting down workers");
            while let Some(joined) = workers.join_next().await {
                if let Err(err) = joined {
                    tracing::error!(error = %err, "Worker task failed");
                }
            }
            tracing::info!("Workers finished");
        }
        .instrument(span)
        .await;
    }

    /// Notes the keys queued now, for the start summary, and spawns the workers.
    fn start_workers(&self, workers: &mut JoinSet<()>, shutdown: &CancellationToken) {
        let inner = &self.inner;
        let entered = self.span().entered();
        tracing::info!(threadiness = inner.concurrency, "Starting controller and workers");
        let snapshot = inner.queue.snapshot();
        let pending: HashSet<ObjectKey> = snapshot
            .fast
            .into_iter()
            .chain(snapshot.slow)
            .chain(snapshot.waiting.into_iter().map(|(key, _)| key))
            .collect();
        if !pending.is_empty() {
            *inner.startup.lock() = Some(Startup {
                began: Instant::now(),
                pending,
                succeeded: 0,
                failed: 0,
                skipped: 0,
            });
        }
        for _ in 0..inner.concurrency {
            let (this, shutdown) = (self.clone(), shutdown.clone());
            workers.spawn(async move { this.work(shutdown).await }.in_current_span());
        }
        tracing::info!("Started workers");
        drop(entered);
    }

    /// One worker: takes keys until the queue shuts down.
    async fn work(&self, shutdown: CancellationToken) {
        while let Some(Request { key, reason }) = self.inner.queue.get().await {
            let gate = self.inner.gate.lock().clone();
            if let Some(gate) = gate.filter(|g| !g.synced()) {
                tracing::info!(key = %key, "waiting for the caches to list again before reconciling: {}",
                    gate.describe_unsynced());
                tokio::select! {
                    () = gate.wait() => {}
                    () = shutdown.cancelled() => {
                        self.inner.queue.done(&key);
                        break;
                    }
                }
            }
            let first = self.process(&key, reason).await;
            self.inner.queue.done(&key);
            // Outside the key's span: the summary is about the controller.
            self.note_startup(&key, first);
        }
    }

    /// Reconciles one key and decides what happens to it next.
    async fn process(&self, key: &ObjectKey, reason: Reason) -> Processed {
        let span = tracing::info_span!("reconcile", { KEY_FIELD } = %key, %reason);
        let start = Instant::now();
        tracing::debug!(
            parent: &span,
            "Processing from queue {key} (depth: {})",
            self.inner.queue.len()
        );
        if let Some(m) = &self.inner.loop_metrics {
            m.started();
        }
        // What the reconcile tracks is then registered without reconciling
        // the key a second time, unless a referent changed meanwhile.
        let tracking = self.inner.tracker.reconciling(key);
        let outcome = AssertUnwindSafe(self.inner.reconciler.reconcile_boxed(key))
            .catch_unwind()
            .instrument(span.clone())
            .await;
        drop(tracking);
        if let Some(m) = &self.inner.loop_metrics {
            m.finished(loop_result(&outcome), start.elapsed());
        }
        let _entered = span.enter();
        let processed = match &outcome {
            Ok(Ok(action)) if action.requeue_delay().is_some() => Processed::Skipped,
            Ok(Ok(_)) => Processed::Succeeded,
            Ok(Err(err)) if err.is_skip_key() => Processed::Skipped,
            _ => Processed::Failed,
        };
        match outcome {
            Ok(result) => self.handle_result(key, result, start),
            Err(panic) => {
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".to_owned());
                tracing::error!(
                    duration = ?start.elapsed(),
                    panic = %message,
                    "Reconcile panicked; retrying with backoff"
                );
                self.inner.queue.add_rate_limited(key.clone());
            }
        }
        processed
    }

    /// The span of the controller's own log lines (start, stop, summaries).
    fn span(&self) -> tracing::Span {
        tracing::info_span!("controller", "knative.dev/controller" = %self.inner.name)
    }

    /// Counts the first reconcile of a key queued at start; after the last
    /// one, logs how the start went in one line.
    fn note_startup(&self, key: &ObjectKey, processed: Processed) {
        let mut startup = self.inner.startup.lock();
        let Some(progress) = startup.as_mut() else {
            return;
        };
        if !progress.pending.remove(key) {
            return;
        }
        match processed {
            Processed::Succeeded => progress.succeeded += 1,
            Processed::Failed => progress.failed += 1,
            Processed::Skipped => progress.skipped += 1,
        }
        if progress.pending.is_empty() {
            let _controller = self.span().entered();
            tracing::info!(
                succeeded = progress.succeeded,
                failed = progress.failed,
                skipped = progress.skipped,
                duration = ?progress.began.elapsed(),
                "Reconciled every key queued at start once"
            );
            *startup = None;
        }
    }

    /// Knative's `handleErr`, plus forgetting the backoff on success and on a
    /// requested requeue.
    fn handle_result(&self, key: &ObjectKey, result: Result<Action, Error>, start: Instant) {
        let queue = &self.inner.queue;
        let err = match result {
            Ok(action) => {
                // A requested requeue is not a failure either: the next
                // failure's backoff starts from the bottom.
                queue.forget(key);
                match action.requeue_delay() {
                    Some(delay) if !queue.is_shutting_down() => {
                        queue.add_after(key.clone(), delay);
                        tracing::debug!(
                            duration = ?start.elapsed(),
                            "Requeuing key {key} (by request) after {} (depth: {})",
                            go_duration(delay),
                            queue.len()
                        );
                    }
                    _ => tracing::debug!(duration = ?start.elapsed(), "Reconcile succeeded"),
                }
                return;
            }
            Err(err) => err,
        };
        if err.is_skip_key() || queue.is_shutting_down() {
            queue.forget(key);
            return;
        }
        if err.is_conflict() {
            tracing::debug!(duration = ?start.elapsed(), error = %err, "Reconcile conflict");
            queue.add_rate_limited(key.clone());
            return;
        }
        // The one line a failed reconcile logs: what failed (the whole
        // chain) and when the key comes back.
        if err.is_permanent() {
            queue.forget(key);
            tracing::error!(duration = ?start.elapsed(), error = %format_args!("{err:#}"),
                "Reconcile error; not retried (permanent)");
        } else {
            let retry = queue
                .add_rate_limited(key.clone())
                .map(go_duration)
                .unwrap_or_default();
            tracing::error!(duration = ?start.elapsed(), error = %format_args!("{err:#}"), retry_in = %retry,
                "Reconcile error; retrying in {retry}");
        }
    }
}
