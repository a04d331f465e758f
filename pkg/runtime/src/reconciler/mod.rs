//! The generated reconciler's behaviour, written once and generic over the kind
//! (Knative's `reconciler.go` template, `reconciler.PreProcessReconcile` and
//! friends).
//!
//! Users implement [`ReconcileKind`] for their kind (`reconcile_kind`, and
//! optionally `observe_kind`, `observe_deletion`) and [`FinalizeKind`] when
//! they finalize. The generated `new_impl` of a kind passes the reconciler and
//! the kind's constants to [`new_impl`], which wraps them in Knative's
//! algorithm, for each key:
//!
//! 1. an invalid key is logged and dropped;
//! 2. the object is read from the informer's lister; when it is gone,
//!    `observe_deletion` runs (a no-op unless implemented);
//! 3. objects of another class (class annotation) are left alone;
//! 4. the leader runs `reconcile_kind` (after adding the finalizer for
//!    finalizers, and with Knative's status pre- and post-processing),
//!    `finalize_kind` on deletion (then removes the finalizer); a replica that
//!    does not lead the key runs `observe_kind`, which skips the key unless
//!    implemented;
//! 5. a status that changed semantically (transition times aside) is written by
//!    the leader through the status subresource, retrying conflicts;
//! 6. the returned event is recorded, and errors other than skip, requeue and
//!    conflicts are recorded as `InternalError` events; the result goes back to
//!    the work queue.
//!
//! Deliberate differences from Knative, each a fix:
//! - the [`ReconcileContext`] carries a cancellation token that fires when the
//!   controller shuts down (Knative hands reconciles a fresh background context,
//!   so they cannot notice);
//! - `observe_kind` receives `&K`, so a non-leader cannot even try to change
//!   the object (Knative warns after the fact);
//! - the `concurrency` option is honoured (Knative's generated `NewImpl`
//!   ignores it).

mod metrics;
mod reconciled;

use std::any::Any;
use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::future::BoxFuture;
use kube::api::{Patch, PatchParams};
use kube::{Api, Resource};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::apis::{Defaultable, HasStatus, KRShaped, Object, go_quote};
pub use crate::batch::{Batched, slow_start};
use crate::client::{ApiScope, scoped_api};
use crate::clock::Clock;
use crate::controller::{self, ControllerOptions, Error, Impl};
use crate::events::object_reference;
pub use crate::events::{Event, EventType, FakeRecorder, KubeRecorder, Recorder};
use crate::informer::Informer;
use crate::injection::Context;
use crate::key::ObjectKey;
pub use crate::leader::{
    Bucket, BucketHook, Enqueue, LeaderAware, LeaderAwareFuncs, PromoteHook, UniversalBucket,
};
use crate::lister::Lister;
use crate::rbac::Verb;
use crate::tracker::Tracker;
pub use metrics::ReconcileMetrics;
pub use reconciled::Reconciled;

/// What a reconcile step returns: `Ok(Reconciled::done())` when done,
/// `Ok(event.into())` when done with an event to record (Knative's bare
/// `ReconcilerEvent`), `Ok(Reconciled::requeue_after(d))` to look again after
/// `d` (a schedule, not a failure), `Err` when it failed; an error may carry
/// an event with [`Error::with_event`], which is recorded before the error
/// goes back to the queue.
pub type ReconcileResult = Result<Reconciled, Error>;

const NEW_OBSERVED_GEN_FAILURE: &str = "NewObservedGenFailure";

/// Everything a reconcile step receives besides the object.
pub struct ReconcileContext {
    key: ObjectKey,
    tracker: Tracker,
    recorder: Arc<dyn Recorder>,
    cancellation: CancellationToken,
    config: Option<Arc<dyn Any + Send + Sync>>,
    leader: bool,
    clock: Clock,
}

impl fmt::Debug for ReconcileContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReconcileContext")
            .field("key", &self.key)
            .field("leader", &self.leader)
            .finish()
    }
}

impl ReconcileContext {
    /// The key being reconciled.
    pub fn key(&self) -> &ObjectKey {
        &self.key
    }

    /// Records an extra event about `obj` (returned events are recorded for you).
    pub fn record<K: Resource<DynamicType = ()>>(&self, obj: &K, event: &Event) {
        self.recorder.record(&object_reference(obj), event);
    }

    /// The controller's tracker: `track_reference` here, and wire the referenced
    /// kind's informer to `controller.tracker().on_changed`, to be enqueued when
    /// what the object references changes. Registrations of deleted objects are
    /// dropped for you.
    pub fn tracker(&self) -> &Tracker {
        &self.tracker
    }

    /// Fires when the controller is shutting down: long waits should stop.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancellation
    }

    /// The configuration snapshot the [`ConfigStore`] took for this reconcile.
    pub fn config<T: Send + Sync + 'static>(&self) -> Option<&T> {
        self.config.as_ref()?.downcast_ref::<T>()
    }

    /// True when this replica leads the key.
    pub fn is_leader(&self) -> bool {
        self.leader
    }

    /// The current time, from the clock of the injection context (the
    /// system's, unless a test fixed it with
    /// [`ContextBuilder::clock`](crate::injection::ContextBuilder::clock)):
    /// read it, not `SystemTime::now`, to decide what a schedule says.
    pub fn now(&self) -> SystemTime {
        self.clock.now()
    }
}

/// Provides the configuration a reconcile sees (Knative's `ConfigStore`), read
/// once per reconcile so one pass sees one consistent snapshot.
pub trait ConfigStore: Send + Sync {
    /// The current configuration.
    fn snapshot(&self) -> Arc<dyn Any + Send + Sync>;
}

/// Decides whether an object is re-enqueued when its bucket is promoted.
pub type PromoteFilter<K> = Arc<dyn Fn(&K) -> bool + Send + Sync>;

/// Options of a generated reconciler (Knative's `controller.Options`).
pub struct Options<K> {
    /// Overrides the default finalizer name (`<plural>.<group>`).
    pub finalizer_name: Option<String>,
    /// Overrides the event source component (`<kind>-controller`).
    pub agent_name: Option<String>,
    /// Neither pre/post-process status nor write it.
    pub skip_status_updates: bool,
    /// On promotion, only objects passing this filter are re-enqueued.
    pub promote_filter: Option<PromoteFilter<K>>,
    /// Called when a bucket is promoted, before its keys are re-enqueued.
    pub promote_func: Option<BucketHook>,
    /// Called after a bucket is demoted.
    pub demote_func: Option<BucketHook>,
    /// Configuration handed to every reconcile.
    pub config_store: Option<Arc<dyn ConfigStore>>,
    /// Workers of this controller; defaults to the process default (2).
    pub concurrency: Option<usize>,
}

impl<K> Default for Options<K> {
    fn default() -> Self {
        Options {
            finalizer_name: None,
            agent_name: None,
            skip_status_updates: false,
            promote_filter: None,
            promote_func: None,
            demote_func: None,
            config_store: None,
            concurrency: None,
        }
    }
}

impl<K> fmt::Debug for Options<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Options")
            .field("finalizer_name", &self.finalizer_name)
            .field("agent_name", &self.agent_name)
            .field("skip_status_updates", &self.skip_status_updates)
            .field("concurrency", &self.concurrency)
            .finish_non_exhaustive()
    }
}

/// What a reconciler of kind `K` implements (Knative's generated `Interface`,
/// `ReadOnlyInterface` and `OnDeletionInterface` in one trait).
///
/// `type Finalizer` says whether the reconciler finalizes: [`NoFinalizer`], or
/// [`WithFinalizer`] together with an implementation of [`FinalizeKind`]. The
/// compiler holds the two together, so a `finalize_kind` that would never run
/// cannot be written:
///
/// ```
/// use kinject_runtime::reconciler::{NoFinalizer, ReconcileContext, ReconcileKind, ReconcileResult, Reconciled};
/// # use k8s_openapi::api::core::v1::ConfigMap;
///
/// struct Reconciler;
///
/// #[kinject_runtime::async_trait]
/// impl ReconcileKind<ConfigMap> for Reconciler {
///     type Finalizer = NoFinalizer;
///
///     async fn reconcile_kind(&self, _ctx: &ReconcileContext, cm: &mut ConfigMap) -> ReconcileResult {
///         cm.data.get_or_insert_default().insert("seen".into(), "yes".into());
///         Ok(Reconciled::done())
///     }
/// }
/// ```
#[async_trait::async_trait]
pub trait ReconcileKind<K: Send + Sync + 'static>: Send + Sync + Sized + 'static {
    /// [`NoFinalizer`] or [`WithFinalizer`] (which requires [`FinalizeKind`]).
    type Finalizer: Finalization<K, Self>;

    /// Moves the world towards `resource`'s spec and records what it saw in its
    /// status; the framework writes status and finalizer changes back. Called on
    /// the leader only, never for objects being deleted.
    async fn reconcile_kind(&self, ctx: &ReconcileContext, resource: &mut K) -> ReconcileResult;

    /// Observes `resource` on a replica that does not lead its key (for example
    /// to warm a cache); it cannot change the object. By default the key is
    /// skipped, as Knative does for reconcilers without `ObserveKind`.
    async fn observe_kind(&self, ctx: &ReconcileContext, resource: &K) -> ReconcileResult {
        let _ = resource;
        Err(Error::skip_key(ctx.key().to_string()))
    }

    /// The object `key` names is gone (Knative's `ObserveDeletion`). By default
    /// nothing happens.
    async fn observe_deletion(&self, ctx: &ReconcileContext, key: &ObjectKey) -> Result<(), Error> {
        let _ = (ctx, key);
        Ok(())
    }
}

/// Cleans up before an object goes away: the finalizer is added before
/// `reconcile_kind` and removed when `finalize_kind` succeeds with no event or
/// a Normal one and does not ask to come back later. Called on the leader only.
///
/// Implementing it requires `type Finalizer = WithFinalizer` in
/// [`ReconcileKind`]; saying [`NoFinalizer`] there does not compile:
///
/// ```compile_fail,E0271
/// # use kinject_runtime::reconciler::*;
/// # use k8s_openapi::api::core::v1::ConfigMap;
/// struct Reconciler;
/// #[kinject_runtime::async_trait]
/// impl ReconcileKind<ConfigMap> for Reconciler {
///     type Finalizer = NoFinalizer;
///     async fn reconcile_kind(&self, _: &ReconcileContext, _: &mut ConfigMap) -> ReconcileResult { Ok(Reconciled::done()) }
/// }
/// #[kinject_runtime::async_trait]
/// impl FinalizeKind<ConfigMap> for Reconciler {
///     async fn finalize_kind(&self, _: &ReconcileContext, _: &mut ConfigMap) -> ReconcileResult { Ok(Reconciled::done()) }
/// }
/// ```
///
/// and neither does `WithFinalizer` without `FinalizeKind`:
///
/// ```compile_fail,E0277
/// # use kinject_runtime::reconciler::*;
/// # use k8s_openapi::api::core::v1::ConfigMap;
/// struct Reconciler;
/// #[kinject_runtime::async_trait]
/// impl ReconcileKind<ConfigMap> for Reconciler {
///     type Finalizer = WithFinalizer;
///     async fn reconcile_kind(&self, _: &ReconcileContext, _: &mut ConfigMap) -> ReconcileResult { Ok(Reconciled::done()) }
/// }
/// ```
#[async_trait::async_trait]
pub trait FinalizeKind<K: Send + Sync + 'static>: ReconcileKind<K, Finalizer = WithFinalizer> {
    /// Releases what `resource` holds outside the cluster object.
    async fn finalize_kind(&self, ctx: &ReconcileContext, resource: &mut K) -> ReconcileResult;
}

/// Whether reconciler `R` finalizes kind `K`: implemented by [`NoFinalizer`]
/// and [`WithFinalizer`] only.
pub trait Finalization<K, R>: Send + Sync + 'static {
    /// True when a finalizer is added and `finalize_kind` runs on deletion.
    const FINALIZES: bool;

    /// `R::finalize_kind`, when `R` finalizes.
    fn finalize<'a>(
        reconciler: &'a R,
        ctx: &'a ReconcileContext,
        resource: &'a mut K,
    ) -> Option<BoxFuture<'a, ReconcileResult>>;
}

/// The reconciler adds no finalizer; deleted objects are left to the API server.
#[derive(Debug)]
pub enum NoFinalizer {}

/// The reconciler finalizes: it implements [`FinalizeKind`].
#[derive(Debug)]
pub enum WithFinalizer {}

impl<K, R> Finalization<K, R> for NoFinalizer {
    const FINALIZES: bool = false;

    fn finalize<'a>(
        _: &'a R,
        _: &'a ReconcileContext,
        _: &'a mut K,
    ) -> Option<BoxFuture<'a, ReconcileResult>> {
        None
    }
}

impl<K: Send + Sync + 'static, R: FinalizeKind<K>> Finalization<K, R> for WithFinalizer {
    const FINALIZES: bool = true;

    fn finalize<'a>(
        reconciler: &'a R,
        ctx: &'a ReconcileContext,
        resource: &'a mut K,
    ) -> Option<BoxFuture<'a, ReconcileResult>> {
        Some(reconciler.finalize_kind(ctx, resource))
    }
}

/// Reads and writes the status of a kind that has one.
pub struct StatusHooks<K> {
    equal: fn(&K, &K) -> bool,
    copy: fn(&K, &mut K),
}

impl<K> Clone for StatusHooks<K> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<K> Copy for StatusHooks<K> {}

impl<K> fmt::Debug for StatusHooks<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StatusHooks")
    }
}

impl<K: HasStatus> StatusHooks<K> {
    /// The hooks of `K`; a missing status equals an empty one.
    pub const fn new() -> Self {
        StatusHooks {
            equal: status_equal::<K>,
            copy: status_copy::<K>,
        }
    }
}

impl<K> StatusHooks<K> {
    /// True when the statuses are semantically equal (transition times aside).
    pub fn equal(&self, a: &K, b: &K) -> bool {
        (self.equal)(a, b)
    }

    /// Copies `from`'s status onto `to`.
    pub fn copy(&self, from: &K, to: &mut K) {
        (self.copy)(from, to)
    }
}

impl<K: HasStatus> Default for StatusHooks<K> {
    fn default() -> Self {
        Self::new()
    }
}

fn status_equal<K: HasStatus>(a: &K, b: &K) -> bool {
    match (a.status(), b.status()) {
        (Some(a), Some(b)) => a == b,
        (None, None) => true,
        (Some(s), None) | (None, Some(s)) => *s == K::Status::default(),
    }
}

fn status_copy<K: HasStatus>(from: &K, to: &mut K) {
    *to.status_mut() = from.status().cloned().unwrap_or_default();
}

/// Knative's status pre- and post-processing for kinds with
/// `krshapedlogic` (the default).
pub struct KRShapedHooks<K> {
    pre: fn(&mut K),
    post: fn(&mut K, &K),
}

impl<K> Clone for KRShapedHooks<K> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<K> Copy for KRShapedHooks<K> {}

impl<K> fmt::Debug for KRShapedHooks<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("KRShapedHooks")
    }
}

impl<K: KRShaped + Defaultable + Resource> KRShapedHooks<K> {
    /// The hooks of `K`.
    pub const fn new() -> Self {
        KRShapedHooks {
            pre: pre_process::<K>,
            post: post_process::<K>,
        }
    }
}

impl<K: KRShaped + Defaultable + Resource> Default for KRShapedHooks<K> {
    fn default() -> Self {
        Self::new()
    }
}

/// Defaults, initialises the conditions, and marks the happy condition Unknown
/// (`NewObservedGenFailure`) when the generation is new, so a failed reconcile
/// never leaves an old Ready standing for a new spec.
pub fn pre_process<K: KRShaped + Defaultable + Resource>(resource: &mut K) {
    resource.set_defaults();
    let generation = resource.meta().generation.unwrap_or(0);
    let set = K::condition_set();
    let status = resource.duck_status_mut();
    let observed = status.observed_generation;
    let mut manager = set.manage(&mut status.conditions);
    manager.initialize_conditions();
    if observed != generation {
        manager.mark_unknown(
            set.happy(),
            NEW_OBSERVED_GEN_FAILURE,
            "unsuccessfully observed a new generation",
        );
    }
}

/// Records the observed generation (even when the reconcile failed) and gives
/// every condition that changed one shared new transition time, keeping the old
/// time on the others.
pub fn post_process<K: KRShaped + Defaultable + Resource>(resource: &mut K, old: &K) {
    let generation = resource.meta().generation.unwrap_or(0);
    let happy = K::condition_set().happy().clone();
    let status = resource.duck_status_mut();
    status.observed_generation = generation;
    match status.get_condition(&happy) {
        None => tracing::warn!("A reconciliation included no top-level condition"),
        Some(c) if c.reason == NEW_OBSERVED_GEN_FAILURE => {
            tracing::warn!("A reconciler observed a new generation without updating the resource status")
        }
        Some(_) => {}
    }
    let now = crate::apis::VolatileTime::now();
    let old_conditions = old
        .duck_status()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    for cond in &mut status.conditions {
        match old_conditions.iter().find(|o| o.type_ == cond.type_) {
            Some(old_cond) if old_cond == cond => {
                cond.last_transition_time = old_cond.last_transition_time.clone()
            }
            _ => cond.last_transition_time = now.clone(),
        }
    }
}

/// The per-kind constants generated code passes to [`new_impl`].
pub struct KindConfig<K> {
    /// Default event source component (`addressableservice-controller`).
    pub agent_name: &'static str,
    /// Default finalizer name (`addressableservices.samples.knative.dev`).
    pub finalizer_name: &'static str,
    /// Class annotation keys; empty when the kind is not class-filtered.
    pub class_keys: &'static [&'static str],
    /// Status access, when the kind has a status.
    pub status: Option<StatusHooks<K>>,
    /// Pre/post-processing, unless `krshapedlogic = false`.
    pub krshaped: Option<KRShapedHooks<K>>,
}

impl<K> fmt::Debug for KindConfig<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KindConfig")
            .field("agent_name", &self.agent_name)
            .field("finalizer_name", &self.finalizer_name)
            .field("class_keys", &self.class_keys)
            .field("status", &self.status.is_some())
            .field("krshaped", &self.krshaped.is_some())
            .finish()
    }
}

pub use crate::events::SharedRecorder;

/// The default worker count of the process (`K_THREADS_PER_CONTROLLER`), put in
/// the injection context by `sharedmain`.
#[derive(Clone, Copy, Debug)]
pub struct ThreadsPerController(pub usize);

/// The queue name of a reconciler type, like Knative's (`reconcilers.addressableservice.Reconciler`).
pub fn queue_name(type_name: &str) -> String {
    type_name.replace("::", ".")
}

/// Builds the controller for kind `K` around `reconciler` with Knative's
/// generated-reconciler behaviour, its work queue named after `R`. Generated
/// `new_impl` functions call this; `class_value` is the reconciler's class when
/// the kind is class-filtered.
pub fn new_impl<K, R>(
    ctx: &Context,
    reconciler: R,
    kind: &'static KindConfig<K>,
    class_value: Option<&str>,
    options: Options<K>,
) -> Impl
where
    K: Object<Scope: ApiScope>,
    R: ReconcileKind<K>,
{
    let queue_name = queue_name(std::any::type_name::<R>());
    let informer = ctx.informer::<K>();
    declare_needs::<K>(
        ctx,
        kind.status.is_some() && !options.skip_status_updates,
        <R::Finalizer as Finalization<K, R>>::FINALIZES,
    );
    let lister = informer.lister();
    let agent_name = options
        .agent_name
        .clone()
        .unwrap_or_else(|| kind.agent_name.to_owned());
    let recorder: Arc<dyn Recorder> = match ctx.get::<SharedRecorder>() {
        Some(shared) => shared.0.clone(),
        None => Arc::new(KubeRecorder::new(
            ctx.client(),
            &agent_name,
            ctx.pod_name().map(str::to_owned),
        )),
    };
    let leadership = Arc::new(LeaderAwareFuncs::new(
        Some(on_promote(lister.clone(), &options)),
        options.demote_func.clone(),
    ));
    let stopping = CancellationToken::new();
    let controller_options = controller_options(ctx, &options, leadership.clone(), &stopping)
        .keys(Arc::new(CachedKeys(informer.clone())));
    let make_core = move |tracker: Tracker, own_writes: controller::OwnWrites| Core {
        reconciler,
        tracker,
        lister,
        client: ctx.client(),
        kind,
        class_value: class_value.map(str::to_owned),
        finalizer_name: options
            .finalizer_name
            .clone()
            .unwrap_or_else(|| kind.finalizer_name.to_owned()),
        skip_status_updates: options.skip_status_updates,
        config_store: options.config_store.clone(),
        recorder,
        leadership,
        stopping,
        clock: ctx.clock().clone(),
        metrics: ctx.get::<ReconcileMetrics>(),
        own_writes,
        kind_label: format!("{}.{}", K::group(&()), K::kind(&()))
            .trim_start_matches('.')
            .to_owned(),
    };
    Impl::with_parts(queue_name, controller_options, make_core)
}

/// Declares what the generic reconciler of `K` writes, for the RBAC that
/// grants it: its status, the finalizer patch, the conflict retry's read,
/// and events.
fn declare_needs<K: Object>(ctx: &Context, writes_status: bool, finalizes: bool) {
    if writes_status {
        ctx.needs_subresource::<K>("status", &[Verb::Update]);
    }
    if finalizes {
        // Finalizers are added and removed with a merge patch.
        ctx.needs::<K>(&[Verb::Patch]);
    }
    if writes_status || finalizes {
        // A write that conflicts is retried on the object read afresh.
        ctx.needs::<K>(&[Verb::Get]);
    }
    ctx.needs::<k8s_openapi::api::core::v1::Event>(&[Verb::Create, Verb::Patch]);
}

/// On promotion to a bucket: the user's hook, then every cached key of the
/// bucket (that `promote_filter` keeps) enqueued.
fn on_promote<K: Object>(lister: Lister<K>, options: &Options<K>) -> PromoteHook {
    let promote_filter = options.promote_filter.clone();
    let user_promote = options.promote_func.clone();
    Arc::new(move |bucket: &dyn Bucket, enqueue: Option<&Enqueue>| {
        if let Some(hook) = &user_promote {
            hook(bucket);
        }
        let Some(enqueue) = enqueue else { return };
        match lister.list_all() {
            Ok(objects) => {
                for obj in objects {
                    if promote_filter.as_ref().is_none_or(|f| f(&obj)) {
                        enqueue(bucket, ObjectKey::of(obj.as_ref()));
                    }
                }
            }
            Err(err) => tracing::error!(error = %err, "could not list objects to enqueue on promotion"),
        }
    })
}

/// The keys of a generated reconciler: the objects of its kind in the cache,
/// for the count of keys per leader election bucket.
struct CachedKeys<K>(Informer<K>);

impl<K> fmt::Debug for CachedKeys<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CachedKeys")
    }
}

impl<K: Object> controller::KeySource for CachedKeys<K> {
    fn keys(&self) -> Vec<ObjectKey> {
        self.0
            .lister()
            .keys()
            .into_iter()
            .map(|(namespace, name)| ObjectKey { namespace, name })
            .collect()
    }

    fn complete(&self) -> bool {
        self.0.has_synced()
    }
}

/// The work queue's settings: workers (the options', else the process's
/// `K_THREADS_PER_CONTROLLER`), leadership, the shutdown signal, the
/// tracker's lease (three resync periods) and the metrics.
fn controller_options<K: Object>(
    ctx: &Context,
    options: &Options<K>,
    leadership: Arc<LeaderAwareFuncs>,
    stopping: &CancellationToken,
) -> ControllerOptions {
    let concurrency = options
        .concurrency
        .or_else(|| ctx.get::<ThreadsPerController>().map(|t| t.0))
        .unwrap_or_default();
    let mut controller_options = ControllerOptions::default()
        .concurrency(concurrency)
        .leader_aware(leadership)
        .shutdown_signal(stopping.clone())
        .tracker_lease(match ctx.resync_period() {
            Duration::ZERO => controller::DEFAULT_TRACKER_LEASE,
            period => 3 * period,
        });
    if let Some(metrics) = ctx.get::<controller::WorkqueueMetrics>() {
        controller_options = controller_options.metrics((*metrics).clone());
    }
    controller_options
}

/// The generic reconciler: Knative's generated `Reconcile` for kind `K`.
struct Core<K: 'static, R> {
    reconciler: R,
    tracker: Tracker,
    lister: Lister<K>,
    client: kube::Client,
    kind: &'static KindConfig<K>,
    class_value: Option<String>,
    finalizer_name: String,
    skip_status_updates: bool,
    config_store: Option<Arc<dyn ConfigStore>>,
    recorder: Arc<dyn Recorder>,
    leadership: Arc<LeaderAwareFuncs>,
    stopping: CancellationToken,
    clock: Clock,
    metrics: Option<Arc<ReconcileMetrics>>,
    /// `<group>.<Kind>`, the kind label of logs and metrics.
    kind_label: String,
    /// Its writes to its own objects, shared with the controller's handler.
    own_writes: controller::OwnWrites,
}

/// How soon a key whose cached copy is stale is looked at again, in case the
/// watch event that updates the cache is late.
///
/// Right after a write, the informer cache still holds the old version until
/// the watch delivers the new one, and a reconcile in that gap (a child's
/// event queues one) would write again from the stale copy and get a 409.
/// Knative pays that round trip; here the reconcile waits for the cache
/// instead ([`OwnWrites::is_stale`](controller::OwnWrites)). One reconcile can
/// write twice (the finalizer patch, then the status), so every version
/// replaced is stale, not just the last.
const STALE_CACHE_RECHECK: Duration = Duration::from_millis(250);

/// Which user method runs for an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    Reconcile,
    Finalize,
    Observe,
    Unknown,
}

impl<K, R> controller::Reconciler for Core<K, R>
where
    K: Object<Scope: ApiScope>,
    R: ReconcileKind<K>,
{
    async fn reconcile(&self, key: &ObjectKey) -> Result<controller::Action, Error> {
        let started = tokio::time::Instant::now();
        let outcome = self.reconcile_key(key).await;
        if let Some(metrics) = &self.metrics {
            let result = match &outcome {
                Ok(Outcome::Done) => "success",
                Ok(Outcome::Event) => "event",
                Ok(Outcome::Requeue(_)) => "requeue",
                Err(e) if e.is_skip_key() => "skip",
                Err(e) if e.is_conflict() => "conflict",
                Err(_) => "error",
            };
            metrics.observe(&self.kind_label, result, started.elapsed());
        }
        outcome.map(|outcome| match outcome {
            Outcome::Requeue(delay) => controller::Action::requeue_after(delay),
            Outcome::Done | Outcome::Event => controller::Action::await_change(),
        })
    }
}

/// How a successful reconcile ended, for metrics and the queue.
enum Outcome {
    Done,
    Event,
    /// Come back after the delay; an event it carried is recorded already.
    Requeue(Duration),
}

impl<K, R> Core<K, R>
where
    K: Object<Scope: ApiScope>,
    R: ReconcileKind<K>,
{
    async fn reconcile_key(&self, key: &ObjectKey) -> Result<Outcome, Error> {
        let key = key.clone();
        let leader = self.leadership.is_leader_for(&key);
        let ctx = ReconcileContext {
            key: key.clone(),
            tracker: self.tracker.clone(),
            recorder: self.recorder.clone(),
            cancellation: self.stopping.child_token(),
            config: self.config_store.as_ref().map(|s| s.snapshot()),
            leader,
            clock: self.clock.clone(),
        };

        let Some(original) = self.lister.get_by_key(&key.namespace, &key.name)? else {
            tracing::debug!("Resource {} no longer exists", go_quote(&key.to_string()));
            self.own_writes.forget(&key);
            self.tracker.forget_observer(&key);
            return self
                .reconciler
                .observe_deletion(&ctx, &key)
                .await
                .map(|()| Outcome::Done);
        };
        if !self.class_matches(&original) {
            tracing::debug!(
                "Skip reconciling resource, class annotation value does not match reconciler instance value."
            );
            return Ok(Outcome::Done);
        }

        if self
            .own_writes
            .is_stale(&key, original.meta().resource_version.as_deref())
        {
            // Our last write replaced this version; the watch will deliver the
            // new one (and enqueue the key) in a moment. Writing from the stale
            // copy would only earn a conflict.
            tracing::debug!(
                "Cache still holds the version replaced by our last write; waiting for the watch"
            );
            return Ok(Outcome::Requeue(STALE_CACHE_RECHECK));
        }

        let mut resource = (*original).clone();
        // What the status write starts from: the cached copy, or the object a
        // finalizer patch returned, whose resourceVersion the API server now
        // expects (the cached one would earn a 409 and a re-read).
        let mut base = Cow::Borrowed(original.as_ref());
        let method = self.method_for(&resource, leader);
        tracing::debug!(targetMethod = ?method, "reconciling");
        let result = match method {
            Method::Reconcile => {
                if let Err(err) = self.set_finalizer_if_finalizer(&mut resource).await {
                    return Err(err.context("failed to set finalizers"));
                }
                if resource.meta().resource_version != original.meta().resource_version {
                    base = Cow::Owned(resource.clone());
                }
                self.reconcile_with_status_hooks(&ctx, &mut resource, &original)
                    .await
            }
            Method::Finalize => {
                let result = match R::Finalizer::finalize(&self.reconciler, &ctx, &mut resource) {
                    Some(finalize) => finalize.await,
                    None => Ok(Reconciled::done()),
                };
                if let Err(err) = self.clear_finalizer(&mut resource, &result).await {
                    return Err(err.context("failed to clear finalizers"));
                }
                result
            }
            Method::Observe => self.reconciler.observe_kind(&ctx, &resource).await,
            Method::Unknown => Ok(Reconciled::done()),
        };
        self.write_changed_status(&base, &resource, leader).await?;
        self.report(&resource, result)
    }

    /// `reconcile_kind` between Knative's status pre- and post-processing
    /// (unless the kind skips status updates).
    async fn reconcile_with_status_hooks(
        &self,
        ctx: &ReconcileContext,
        resource: &mut K,
        original: &K,
    ) -> ReconcileResult {
        let krshaped = self.kind.krshaped.filter(|_| !self.skip_status_updates);
        if let Some(hooks) = krshaped {
            (hooks.pre)(resource);
        }
        let result = self.reconciler.reconcile_kind(ctx, resource).await;
        if let Some(hooks) = krshaped {
            (hooks.post)(resource, original);
        }
        result
    }

    /// Writes `resource`'s status when it differs from `base`'s and this
    /// replica leads the key; a failed write is reported as an
    /// `UpdateFailed` event and fails the reconcile.
    async fn write_changed_status(&self, base: &K, resource: &K, leader: bool) -> Result<(), Error> {
        let Some(status) = self.kind.status.filter(|_| !self.skip_status_updates) else {
            return Ok(());
        };
        if (status.equal)(base, resource) {
            return Ok(());
        }
        if !leader {
            tracing::warn!("Saw status changes when we aren't the leader!");
            return Ok(());
        }
        if let Err(err) = self.update_status(status, base, resource).await {
            tracing::debug!(error = %api_message(&err), "Failed to update resource status");
            self.record(
                resource,
                &Event::warning(
                    "UpdateFailed",
                    format!(
                        "Failed to update status for {}: {}",
                        go_quote(name_of(resource)),
                        api_message(&err)
                    ),
                ),
            );
            return Err(err.into());
        }
        Ok(())
    }

    /// Records the event a reconcile step returned (or the error it failed
    /// with, as an `InternalError` event, unless the error says otherwise);
    /// a step that asked to come back later goes back to the queue as a
    /// requeue, which is no failure.
    fn report(&self, resource: &K, result: ReconcileResult) -> Result<Outcome, Error> {
        match result.map(Reconciled::into_parts) {
            Ok((event, requeue_after)) => {
                if let Some(event) = &event {
                    tracing::info!(reason = %event.reason, "Returned an event");
                    self.record(resource, event);
                }
                match (requeue_after, event) {
                    (Some(delay), _) => Ok(Outcome::Requeue(delay)),
                    (None, Some(_)) => Ok(Outcome::Event),
                    (None, None) => Ok(Outcome::Done),
                }
            }
            Err(err) => {
                if let Some(event) = err.event() {
                    tracing::info!(reason = %event.reason, "Returned an event");
                    self.record(resource, event);
                } else if !(err.is_skip_key() || err.is_conflict()) {
                    // The controller logs the failure once, with its retry.
                    tracing::debug!(error = %err, "Returned an error");
                    self.record(resource, &Event::warning("InternalError", err.to_string()));
                }
                Err(err)
            }
        }
    }
}

impl<K, R> Core<K, R>
where
    K: Object<Scope: ApiScope>,
    R: ReconcileKind<K>,
{
    const FINALIZES: bool = <R::Finalizer as Finalization<K, R>>::FINALIZES;

    fn record(&self, obj: &K, event: &Event) {
        self.recorder.record(&object_reference(obj), event);
    }

    fn class_matches(&self, obj: &K) -> bool {
        let Some(want) = &self.class_value else {
            return true;
        };
        if self.kind.class_keys.is_empty() {
            return true;
        }
        let annotations = obj.meta().annotations.as_ref();
        // With several keys, the first one present decides.
        let found = self
            .kind
            .class_keys
            .iter()
            .find_map(|k| annotations.and_then(|a| a.get(*k)));
        found.is_some_and(|v| v == want)
    }

    fn method_for(&self, obj: &K, leader: bool) -> Method {
        if obj.meta().deletion_timestamp.is_none() {
            if leader {
                Method::Reconcile
            } else {
                Method::Observe
            }
        } else if leader && Self::FINALIZES {
            Method::Finalize
        } else {
            Method::Unknown
        }
    }

    /// Adds our finalizer (appended, existing order kept) when the reconciler
    /// finalizes and the object lacks it; the object becomes the patched one.
    async fn set_finalizer_if_finalizer(&self, resource: &mut K) -> Result<(), Error> {
        if !Self::FINALIZES {
            return Ok(());
        }
        let mut finalizers = resource.meta().finalizers.clone().unwrap_or_default();
        if finalizers.contains(&self.finalizer_name) {
            return Ok(());
        }
        finalizers.push(self.finalizer_name.clone());
        self.patch_finalizers(resource, finalizers).await
    }

    /// Removes our finalizer after a successful (or Normal-event) finalize.
    async fn clear_finalizer(&self, resource: &mut K, result: &ReconcileResult) -> Result<(), Error> {
        if !Self::FINALIZES || resource.meta().deletion_timestamp.is_none() {
            return Ok(());
        }
        let current = resource.meta().finalizers.clone().unwrap_or_default();
        if !current.contains(&self.finalizer_name) {
            return Ok(());
        }
        let event = match result {
            // Asked to look again later: not finished.
            Ok(reconciled) if reconciled.requeue_delay().is_some() => return Ok(()),
            Ok(reconciled) => reconciled.recorded_event(),
            Err(err) => match err.event() {
                Some(event) => Some(event),
                None => return Ok(()),
            },
        };
        if event.is_some_and(|e| e.type_ != EventType::Normal) {
            return Ok(());
        }
        let mut remaining: Vec<String> = current
            .into_iter()
            .filter(|f| *f != self.finalizer_name)
            .collect();
        remaining.sort();
        remaining.dedup();
        let name = name_of(resource).to_owned();
        if let Err(err) = self.patch_finalizers(resource, remaining).await {
            // The object may be gone already, which is what removing the last
            // finalizer was for.
            if let Err(kube::Error::Api(status)) = self.namespaced_api(resource).get(&name).await
                && status.code == 404
            {
                return Ok(());
            }
            return Err(err);
        }
        Ok(())
    }

    async fn patch_finalizers(&self, resource: &mut K, finalizers: Vec<String>) -> Result<(), Error> {
        let name = name_of(resource).to_owned();
        let patch = json!({
            "metadata": {
                "finalizers": finalizers,
                "resourceVersion": resource.meta().resource_version.clone().unwrap_or_default(),
            }
        });
        let api = self.namespaced_api(resource);
        // Guarded by the version, so the update it causes is this one alone.
        let write = self.own_writes.begin(
            &ObjectKey::of(resource),
            resource.meta().resource_version.as_deref(),
        );
        match api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(patched) => {
                if let Some(write) = write {
                    write.done(patched.meta().resource_version.as_deref());
                }
                self.record(
                    &patched,
                    &Event::normal(
                        "FinalizerUpdate",
                        format!("Updated {} finalizers", go_quote(&name)),
                    ),
                );
                *resource = patched;
                Ok(())
            }
            Err(err) => {
                let err = Error::from(err);
                if !err.is_conflict() {
                    self.record(
                        resource,
                        &Event::warning(
                            "FinalizerUpdateFailed",
                            format!("Failed to update finalizers for {}: {}", go_quote(&name), err),
                        ),
                    );
                }
                Err(err)
            }
        }
    }

    fn namespaced_api(&self, resource: &K) -> Api<K> {
        scoped_api::<K>(self.client.clone(), resource.meta().namespace.as_deref())
    }

    /// Writes the desired status through the status subresource, retrying
    /// conflicts as client-go's `RetryOnConflict` does (5 tries, ~10 ms apart):
    /// the first try starts from `original` (the informer's copy, or what this
    /// reconcile's finalizer patch returned), later ones re-read the object
    /// from the API server.
    async fn update_status(
        &self,
        status: StatusHooks<K>,
        original: &K,
        desired: &K,
    ) -> Result<(), kube::Error> {
        const STEPS: u32 = 5;
        let api = self.namespaced_api(desired);
        let name = name_of(desired).to_owned();
        let mut attempt = 0;
        loop {
            let mut existing = if attempt == 0 {
                original.clone()
            } else {
                api.get(&name).await?
            };
            if (status.equal)(&existing, desired) {
                return Ok(());
            }
            (status.copy)(desired, &mut existing);
            let write = self.own_writes.begin(
                &ObjectKey::of(&existing),
                existing.meta().resource_version.as_deref(),
            );
            match api
                .replace_status(&name, &kube::api::PostParams::default(), &existing)
                .await
            {
                Ok(written) => {
                    if let Some(write) = write {
                        write.done(written.meta().resource_version.as_deref());
                    }
                    return Ok(());
                }
                Err(kube::Error::Api(s)) if s.code == 409 && attempt + 1 < STEPS => {
                    attempt += 1;
                    tokio::time::sleep(retry_delay(attempt)).await;
                }
                Err(err) => return Err(err),
            }
        }
    }
}

/// 10 ms with up to 10% jitter, client-go's `DefaultRetry` step.
fn retry_delay(attempt: u32) -> Duration {
    let jitter = u64::from(attempt.wrapping_mul(2_654_435_761) % 1000);
    Duration::from_millis(10) + Duration::from_micros(jitter)
}

fn name_of<K: Resource>(obj: &K) -> &str {
    obj.meta().name.as_deref().unwrap_or_default()
}

/// An API error's message as the API server wrote it (what client-go's errors
/// print), other errors as they display.
pub fn api_message(err: &kube::Error) -> String {
    match err {
        kube::Error::Api(status) if !status.message.is_empty() => status.message.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_names_follow_the_reconciler_type() {
        assert_eq!(
            queue_name("reconcilers::addressableservice::Reconciler"),
            "reconcilers.addressableservice.Reconciler"
        );
    }

    #[test]
    fn retry_delays_are_ten_milliseconds_with_jitter() {
        for attempt in 1..5 {
            let d = retry_delay(attempt);
            assert!(
                d >= Duration::from_millis(10) && d <= Duration::from_millis(11),
                "{d:?}"
            );
        }
    }
}
