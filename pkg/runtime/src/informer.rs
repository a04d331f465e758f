//! Shared informers: one kube-runtime [`watcher`](fn@watcher) per kind (and label selector)
//! feeding a cache that every controller of the process reads through a
//! [`Lister`], with event handlers fanned out to any number of controllers.
//!
//! Informers are not built directly: a controller constructor asks the
//! injection [`Context`](crate::injection::Context) for one, and the first
//! request creates it. `sharedmain` then starts exactly the informers that were
//! asked for and waits for their caches.
//!
//! ```no_run
//! # async fn demo(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! use k8s_openapi::api::core::v1::Service;
//! use kinject_runtime::informer::EventHandler;
//! use kinject_runtime::injection::Context;
//!
//! let ctx = Context::new(client);
//! let services = ctx.informer::<Service>();
//! services.add_event_handler(EventHandler::all(|svc: &Service| {
//!     println!("service {:?} changed", svc.metadata.name);
//! }));
//! let shutdown = tokio_util::sync::CancellationToken::new();
//! ctx.start_informers(&shutdown);
//! ctx.wait_for_cache_sync(std::time::Duration::from_secs(30)).await?;
//! let svc = services.lister().namespaced("default").get("kubernetes")?;
//! # Ok(()) }
//! ```
//!
//! Handlers run on the informer's task, in event order, and must not block:
//! they enqueue keys, they do not reconcile.
//!
//! # What a cache holds
//!
//! A constructor says, per kind, what its reconciler reads, and the cache
//! holds that much:
//!
//! - `ctx.informer::<Service>()`: whole objects, decoded once (the default);
//! - `ctx.compact_informer::<Service>()`: whole objects as compact JSON,
//!   decoded on each read ([`CacheFormat::Json`]);
//! - `ctx.informer::<PartialObjectMeta<Service>>()`: the metadata alone (name,
//!   namespace, labels, annotations, owner references), listed and watched as
//!   kube-apiserver's `PartialObjectMetadata`, as client-go's metadata
//!   informers do. RBAC is the same as for the whole objects.
//!
//! A reconciler handed a metadata lister cannot read what its cache lacks:
//!
//! ```compile_fail,E0609
//! # fn demo(ctx: &kinject_runtime::injection::Context) -> Result<(), Box<dyn std::error::Error>> {
//! use k8s_openapi::api::core::v1::Service;
//! use kube::core::PartialObjectMeta;
//!
//! let services = ctx.informer::<PartialObjectMeta<Service>>().lister();
//! if let Some(svc) = services.namespaced("default").get("web")? {
//!     let ports = &svc.spec; // no field `spec`: the cache holds metadata alone
//! }
//! # Ok(()) }
//! ```

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::Resource as _;
use kube::core::Selector;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, watcher};
use parking_lot::{Mutex, RwLock};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

mod lenient;

use crate::apis::Object;
use crate::events::{Event, Recorder};
use crate::lister::Lister;
use crate::store::{Change, Store, StoreKey};
use crate::world::World;
use lenient::Lenient;

pub use crate::store::{CacheError, CacheFormat, IndexError, IndexFn};

/// Knative's default handler resync period.
pub const DEFAULT_RESYNC_PERIOD: Duration = Duration::from_secs(10 * 60 * 60);

/// The event reason on an object an informer cannot decode.
pub const UNDECODABLE_REASON: &str = "DecodeFailed";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InformerLabels {
    informer: String,
}

/// The informers' Prometheus counters, registered once per process and handed
/// to informers through the injection context
/// ([`ContextBuilder::extension`](crate::injection::ContextBuilder::extension)).
///
/// | family | type | meaning |
/// |---|---|---|
/// | `informer_undecodable_objects_total` | counter | objects from the API server that could not be decoded as the informer's kind, by `informer` |
#[derive(Clone, Debug, Default)]
pub struct InformerMetrics {
    undecodable: Family<InformerLabels, Counter>,
}

impl InformerMetrics {
    /// Registers the families in `registry`; call it once per registry.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = InformerMetrics::default();
        registry.register(
            "informer_undecodable_objects",
            "Objects from the API server that could not be decoded as the informer's kind",
            metrics.undecodable.clone(),
        );
        metrics
    }
}

/// Where an informer reports what it cannot cache, beyond its log: a Warning
/// event on the object and a counter.
#[derive(Clone, Default)]
pub(crate) struct Reporting {
    pub(crate) recorder: Option<Arc<dyn Recorder>>,
    pub(crate) metrics: Option<InformerMetrics>,
    /// The process's other informers, which list again with this one.
    pub(crate) world: Option<World>,
}

type Callback<K> = Arc<dyn Fn(&K) + Send + Sync>;
type UpdateCallback<K> = Arc<dyn Fn(&K, &K) + Send + Sync>;
type Filter<K> = Arc<dyn Fn(&K) -> bool + Send + Sync>;

/// Rewrites an object before it is cached; see [`InformerSettings::transform`].
///
/// Dropping kubectl's copy of every applied Pod, for a controller that reads
/// Pods and never updates them (one that did would delete the annotation on
/// the server, since an update sends the object whole):
///
/// ```
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::Pod;
/// use kinject_runtime::informer::{InformerSettings, Transform};
///
/// let drop_last_applied: Transform<Pod> = Arc::new(|pod: &mut Pod| {
///     if let Some(annotations) = pod.metadata.annotations.as_mut() {
///         annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
///     }
/// });
/// let settings = InformerSettings::<Pod> { transform: Some(drop_last_applied), ..Default::default() };
/// # let _ = settings;
/// ```
pub type Transform<K> = Arc<dyn Fn(&mut K) + Send + Sync>;

/// Callbacks for an informer's adds, updates, deletes and resyncs, optionally
/// filtered.
///
/// With a filter, an update is delivered as an update when both the old and the
/// new object pass, as an add when only the new one does, and as a delete when
/// only the old one does (client-go's `FilteringResourceEventHandler`).
///
/// A periodic resync re-delivers every cached object. Without an
/// [`on_resync`](Self::on_resync) callback it arrives as an update from the
/// object to itself, as in client-go. A controller's own handler,
/// [`Impl::enqueue_handler`](crate::controller::Impl::enqueue_handler), queues
/// resyncs behind changes; handlers that enqueue a related object skip them
/// ([`skip_resyncs`](Self::skip_resyncs)), since that object's own informer
/// resyncs it.
pub struct EventHandler<K> {
    filter: Option<Filter<K>>,
    on_add: Option<Callback<K>>,
    on_update: Option<UpdateCallback<K>>,
    on_delete: Option<Callback<K>>,
    on_resync: Option<Callback<K>>,
}

impl<K> fmt::Debug for EventHandler<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventHandler")
            .field("filtered", &self.filter.is_some())
            .field("on_add", &self.on_add.is_some())
            .field("on_update", &self.on_update.is_some())
            .field("on_delete", &self.on_delete.is_some())
            .field("on_resync", &self.on_resync.is_some())
            .finish()
    }
}

impl<K> Default for EventHandler<K> {
    fn default() -> Self {
        EventHandler {
            filter: None,
            on_add: None,
            on_update: None,
            on_delete: None,
            on_resync: None,
        }
    }
}

impl<K: 'static> EventHandler<K> {
    /// A handler that does nothing until callbacks are added.
    pub fn new() -> Self {
        Self::default()
    }

    /// Calls `f` with the object on add, with the new object on update (a
    /// resync too, unless [`on_resync`](Self::on_resync) says otherwise), and
    /// with the last known state on delete (Knative's `HandleAll`).
    pub fn all(f: impl Fn(&K) + Send + Sync + 'static) -> Self {
        let f: Callback<K> = Arc::new(f);
        let on_update = f.clone();
        EventHandler {
            filter: None,
            on_add: Some(f.clone()),
            on_update: Some(Arc::new(move |_old: &K, new: &K| on_update(new))),
            on_delete: Some(f),
            on_resync: None,
        }
    }

    /// Sets the add callback.
    pub fn on_add(mut self, f: impl Fn(&K) + Send + Sync + 'static) -> Self {
        self.on_add = Some(Arc::new(f));
        self
    }

    /// Sets the update callback, called with the old and the new object.
    pub fn on_update(mut self, f: impl Fn(&K, &K) + Send + Sync + 'static) -> Self {
        self.on_update = Some(Arc::new(f));
        self
    }

    /// Sets the delete callback, called with the last known state.
    pub fn on_delete(mut self, f: impl Fn(&K) + Send + Sync + 'static) -> Self {
        self.on_delete = Some(Arc::new(f));
        self
    }

    /// Sets the resync callback, called with each cached object when the
    /// informer re-delivers its cache, instead of the update callback.
    pub fn on_resync(mut self, f: impl Fn(&K) + Send + Sync + 'static) -> Self {
        self.on_resync = Some(Arc::new(f));
        self
    }

    /// Ignores resyncs: for a handler that enqueues another object (an owner,
    /// an observer), which its own informer resyncs. Enqueuing it from every
    /// dependent's resync too would reconcile it again once it was processed,
    /// at 100,000 objects every key twice.
    pub fn skip_resyncs(self) -> Self {
        self.on_resync(|_| {})
    }

    /// Only objects passing `filter` reach the callbacks.
    pub fn with_filter(mut self, filter: impl Fn(&K) -> bool + Send + Sync + 'static) -> Self {
        self.filter = Some(Arc::new(filter));
        self
    }

    fn passes(&self, obj: &K) -> bool {
        self.filter.as_ref().is_none_or(|f| f(obj))
    }

    fn add(&self, obj: &K) {
        if let Some(f) = &self.on_add
            && self.passes(obj)
        {
            f(obj);
        }
    }

    fn update(&self, old: &K, new: &K) {
        match (self.passes(old), self.passes(new)) {
            (true, true) => {
                if let Some(f) = &self.on_update {
                    f(old, new);
                }
            }
            (false, true) => {
                if let Some(f) = &self.on_add {
                    f(new);
                }
            }
            (true, false) => {
                if let Some(f) = &self.on_delete {
                    f(old);
                }
            }
            (false, false) => {}
        }
    }

    fn delete(&self, obj: &K) {
        if let Some(f) = &self.on_delete
            && self.passes(obj)
        {
            f(obj);
        }
    }

    fn resync(&self, obj: &K) {
        if !self.passes(obj) {
            return;
        }
        match (&self.on_resync, &self.on_update) {
            (Some(f), _) => f(obj),
            (None, Some(f)) => f(obj, obj),
            (None, None) => {}
        }
    }

    fn dispatch(&self, change: &Change<K>) {
        match change {
            Change::Added(obj) => self.add(obj),
            Change::Updated { old, new } => self.update(old, new),
            Change::Deleted(obj) => self.delete(obj),
        }
    }
}

/// How the informers of one kind watch and cache; set per kind on the
/// injection context before constructors ask for informers.
pub struct InformerSettings<K> {
    /// Keep `metadata.managedFields` in the cache (they are stripped by default:
    /// controllers rarely read them and they are a third of a typical object).
    pub keep_managed_fields: bool,
    /// Rewrites each object before it is cached and handed to handlers, e.g. to
    /// drop fields no controller reads.
    pub transform: Option<Transform<K>>,
    /// List with a streaming watch (`sendInitialEvents`, client-go's
    /// WatchList), so the first list never holds a whole list response in
    /// memory: the default. A server that refuses it (kube-apiserver before
    /// 1.34 without the WatchList feature gate answers 422) gets
    /// list-then-watch instead, said once at debug.
    pub streaming_lists: bool,
    /// Page size of the initial list (kube's default is 500).
    pub page_size: Option<u32>,
    /// How the cache holds objects: decoded once and shared (the default:
    /// reads cost no decoding, memory is the kind's typed size) or as compact
    /// JSON (a fraction of the memory for large kinds, decoded on every read).
    pub cache: CacheFormat,
}

impl<K> Default for InformerSettings<K> {
    fn default() -> Self {
        InformerSettings {
            keep_managed_fields: false,
            transform: None,
            streaming_lists: true,
            page_size: None,
            cache: CacheFormat::default(),
        }
    }
}

impl<K> Clone for InformerSettings<K> {
    fn clone(&self) -> Self {
        InformerSettings {
            keep_managed_fields: self.keep_managed_fields,
            transform: self.transform.clone(),
            streaming_lists: self.streaming_lists,
            page_size: self.page_size,
            cache: self.cache,
        }
    }
}

impl<K> fmt::Debug for InformerSettings<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InformerSettings")
            .field("keep_managed_fields", &self.keep_managed_fields)
            .field("transform", &self.transform.is_some())
            .field("streaming_lists", &self.streaming_lists)
            .field("page_size", &self.page_size)
            .field("cache", &self.cache)
            .finish()
    }
}

struct Shared<K> {
    description: String,
    api: Api<K>,
    config: watcher::Config,
    settings: InformerSettings<K>,
    resync_period: Duration,
    store: Arc<RwLock<Store<K>>>,
    handlers: RwLock<Vec<Arc<EventHandler<K>>>>,
    synced: watch::Sender<bool>,
    started: AtomicBool,
    last_error: Mutex<Option<String>>,
    undecodable: AtomicU64,
    reporting: Reporting,
    /// Set when a watch event replaced a cached object by another of the same
    /// name (another uid) without a delete between them: deletes were lost.
    history_changed: AtomicBool,
    /// The resource version of each object reported as undecodable, so one
    /// version gets one event however often it is listed again.
    reported: Mutex<Reported>,
}

#[derive(Default)]
struct Reported {
    versions: HashMap<StoreKey, String>,
    /// Keys reported during the list in progress; the others left the server.
    relisted: Option<HashSet<StoreKey>>,
}

/// A shared informer for kind `K`: the cache, its lister and its event handlers.
/// Cheap to clone; clones share everything.
pub struct Informer<K> {
    shared: Arc<Shared<K>>,
}

impl<K> Clone for Informer<K> {
    fn clone(&self) -> Self {
        Informer {
            shared: self.shared.clone(),
        }
    }
}

impl<K> fmt::Debug for Informer<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Informer")
            .field("watches", &self.shared.description)
            .finish()
    }
}

impl<K: Object> Informer<K> {
    /// An informer over `api`, filtered by `selector` when given. Use
    /// [`Context::informer`](crate::injection::Context::informer) instead, so
    /// that controllers share one informer per kind.
    pub(crate) fn new(
        api: Api<K>,
        namespace: Option<&str>,
        selector: Option<&Selector>,
        name: Option<&str>,
        settings: InformerSettings<K>,
        resync_period: Duration,
        reporting: Reporting,
    ) -> Self {
        let mut config = watcher::Config::default();
        let mut description = describe_kind::<K>();
        if let Some(name) = name {
            // A field selector on the name: the API server authorizes the
            // list and watch against a Role's resourceNames.
            config = config.fields(&format!("metadata.name={name}"));
            description.push_str(&format!(" {name}"));
        }
        if let Some(namespace) = namespace {
            description.push_str(&format!(" in {namespace}"));
        }
        if let Some(selector) = selector.filter(|s| !s.selects_all()) {
            config = config.labels_from(selector);
            description.push_str(&format!(" (labels: {selector})"));
        }
        if let Some(size) = settings.page_size {
            config = config.page_size(size);
        }
        let cache = settings.cache;
        // Two informers of one kind in different forms are told apart in
        // logs and metrics.
        if K::metadata_api() {
            description.push_str(" [metadata]");
        } else if cache == CacheFormat::Json {
            description.push_str(" [compact]");
        }
        // At zero from the start, so a dashboard or alert sees every informer
        // before its first undecodable object, not only after.
        if let Some(metrics) = &reporting.metrics {
            let _present = metrics.undecodable.get_or_create(&InformerLabels {
                informer: description.clone(),
            });
        }
        let world = reporting.world.clone();
        let informer = Informer {
            shared: Arc::new(Shared {
                description,
                api,
                config,
                settings,
                resync_period,
                store: Arc::new(RwLock::new(Store::new(cache))),
                handlers: RwLock::new(Vec::new()),
                synced: watch::Sender::new(false),
                started: AtomicBool::new(false),
                last_error: Mutex::new(None),
                undecodable: AtomicU64::new(0),
                reporting,
                history_changed: AtomicBool::new(false),
                reported: Mutex::default(),
            }),
        };
        if let Some(world) = world {
            let shared = Arc::downgrade(&informer.shared);
            world.join(Box::new(move || match shared.upgrade() {
                Some(shared) => {
                    shared.synced.send_replace(false);
                    true
                }
                None => false,
            }));
        }
        informer
    }

    /// The informer's cache, read-only.
    pub fn lister(&self) -> Lister<K> {
        Lister::new(self.shared.store.clone())
    }

    /// What this informer watches, for logs and errors
    /// (`AddressableService.samples.knative.dev/v1alpha1`).
    pub fn description(&self) -> &str {
        &self.shared.description
    }

    /// Adds an event handler. Added after the cache has synced, it first receives
    /// an add for every cached object, as client-go does.
    pub fn add_event_handler(&self, handler: EventHandler<K>) {
        let handler = Arc::new(handler);
        let mut handlers = self.shared.handlers.write();
        handlers.push(handler.clone());
        if self.has_synced() {
            let (objects, errors) = self.shared.store.read().all();
            self.report_cache_errors(errors);
            for obj in objects {
                handler.add(&obj);
            }
        }
    }

    /// Adds a custom index, computed for every cached object; look it up with
    /// [`Lister::by_index`].
    pub fn add_index(
        &self,
        name: &str,
        func: impl Fn(&K) -> Vec<String> + Send + Sync + 'static,
    ) -> Result<(), CacheError> {
        self.shared.store.write().add_index(name, Arc::new(func))
    }

    /// True once the first list has been cached, and the cache is of the
    /// API server's current history: not while every informer lists again,
    /// nor while the process checks the server is the cluster it was after
    /// it could not be reached: a server that came back empty is told apart
    /// by the uid of namespace `kube-system`.
    pub fn has_synced(&self) -> bool {
        *self.shared.synced.borrow() && !self.verifying()
    }

    fn verifying(&self) -> bool {
        self.shared.reporting.world.as_ref().is_some_and(World::verifying)
    }

    /// Waits until [`has_synced`](Self::has_synced).
    pub async fn wait_for_sync(&self) {
        let mut rx = self.shared.synced.subscribe();
        loop {
            // The sender lives as long as `self`, so this only returns once synced.
            let _ = rx.wait_for(|synced| *synced).await;
            match &self.shared.reporting.world {
                Some(world) if world.verifying() => world.verified().await,
                _ => return,
            }
            if self.has_synced() {
                return;
            }
        }
    }

    /// The last watch or list error, if the informer is failing.
    pub fn last_error(&self) -> Option<String> {
        if self.verifying() {
            return Some(
                "checking that the API server is the cluster it was, after it could not be reached"
                    .to_owned(),
            );
        }
        self.shared.last_error.lock().clone()
    }

    /// Runs the watch until `shutdown`; does nothing if already running.
    pub(crate) fn spawn(&self, shutdown: &CancellationToken) -> Option<tokio::task::JoinHandle<()>> {
        if self.shared.started.swap(true, Ordering::SeqCst) {
            return None;
        }
        let this = self.clone();
        let shutdown = shutdown.clone();
        // In the span of whoever starts it: the component that owns the
        // informer names the logger of its lines.
        Some(tokio::spawn(tracing::Instrument::in_current_span(async move {
            this.run(shutdown).await
        })))
    }

    async fn run(self, shutdown: CancellationToken) {
        let shared = &self.shared;
        tracing::debug!(informer = %shared.description, "starting informer");
        // Each object is decoded on its own, once, from its text (see
        // `lenient`), so one object the kind cannot hold (say, a replica
        // count beyond i32 that a CRD without bounds let in) is skipped and
        // reported instead of failing the whole list, as a typed watch (and
        // client-go) would, forever.
        let client = shared.api.clone().into_client();
        let lenient: Api<Lenient<K>> = match shared.api.namespace() {
            Some(namespace) => Api::namespaced_with(client, namespace, &()),
            None => Api::all_with(client, &()),
        };
        // Set while the resource answers 404: the retries then wait at most
        // a few seconds, so a CRD that comes back is listed soon after.
        let missing = Arc::new(AtomicBool::new(false));
        let watch = |missing: &Arc<AtomicBool>, streaming: bool| {
            let config = if streaming {
                shared.config.clone().streaming_lists()
            } else {
                shared.config.clone()
            };
            Box::pin(watcher(lenient.clone(), config).backoff(RetryBackoff::new(missing.clone())))
        };
        let mut events = watch(&missing, shared.settings.streaming_lists);
        // A zero period means no resync, as in client-go (tokio's interval
        // would panic on it).
        let mut resync = (!shared.resync_period.is_zero()).then(|| {
            let period = shared.resync_period;
            let mut interval = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            interval
        });
        let mut watching = Watching {
            streaming: shared.settings.streaming_lists,
            versions: Versions::default(),
            missing,
            listed_once: false,
        };
        let world = shared.reporting.world.clone();
        let mut world_changes = world.as_ref().map(World::resets);
        // Tells the process's other informers to list again; this one does
        // already, so it skips the change it made.
        let tell_the_others = |changes: &mut Option<watch::Receiver<u64>>| {
            if let (Some(world), Some(changes)) = (&world, changes.as_mut()) {
                world.reset();
                changes.borrow_and_update();
            }
        };
        loop {
            tokio::select! {
                // A stop wins over a watch error that arrives with it (the
                // API server going away at the same moment is no failure).
                biased;
                () = shutdown.cancelled() => break,
                Some(_) = async { Some(resync.as_mut()?.tick().await) } => self.resync(),
                Some(Ok(())) = async { Some(world_changes.as_mut()?.changed().await) } => {
                    tracing::info!(informer = %shared.description,
                        "another informer found the API server's history changed; listing again");
                    *shared.last_error.lock() =
                        Some("listing again: another informer of this process found the API server's history changed".to_owned());
                    shared.synced.send_replace(false);
                    watching.versions = Versions::default();
                    events = watch(&watching.missing, watching.streaming);
                }
                event = events.next() => match self.on_event(&mut watching, event) {
                    Next::Continue => {}
                    Next::Stop => break,
                    // Served before and gone now: maybe the server restarted
                    // empty, so the others look too.
                    Next::ResourceGone => tell_the_others(&mut world_changes),
                    Next::Relist => events = watch(&watching.missing, watching.streaming),
                    Next::ListAgain(why) => {
                        tracing::warn!(informer = %shared.description, error = %why,
                            "the API server's history is not the cache's; listing again from scratch");
                        *shared.last_error.lock() = Some(why);
                        shared.synced.send_replace(false);
                        watching.versions = Versions::default();
                        events = watch(&watching.missing, watching.streaming);
                        tell_the_others(&mut world_changes);
                    }
                },
            }
        }
        tracing::debug!(informer = %shared.description, "informer stopped");
    }

    /// Handles what the watch stream gave: an event for the cache, or an
    /// error, and what the run loop does next. A reset is the cache no
    /// longer matching the server's history: then the informer lists
    /// afresh, unsynced until done, instead of resuming a watch that would
    /// never delete what the server lost.
    fn on_event(
        &self,
        watching: &mut Watching,
        event: Option<Result<watcher::Event<Lenient<K>>, watcher::Error>>,
    ) -> Next {
        let shared = &self.shared;
        match event {
            // A watch that resumed on a server with another history
            // (restarted empty, restored from a backup) and already past our
            // version.
            Some(Ok(event)) => {
                if let Some(world) = &shared.reporting.world
                    && world.answers()
                {
                    tracing::info!(informer = %shared.description,
                        "the API server{} answers again; checking it is the same cluster before any controller writes",
                        world.at());
                }
                if let Some(back) = watching.versions.went_back(&event) {
                    return Next::ListAgain(back.to_string());
                }
                if matches!(event, watcher::Event::InitDone) {
                    watching.missing.store(false, Ordering::SeqCst);
                    watching.listed_once = true;
                }
                self.apply_lenient_event(event);
                if shared.history_changed.swap(false, Ordering::SeqCst) {
                    return Next::ListAgain(
                        "an object was replaced by another of the same name without a delete: \
                         the API server's history changed"
                            .to_owned(),
                    );
                }
                Next::Continue
            }
            // The server's resource versions went back: the watcher would
            // retry its old version forever.
            Some(Err(err)) if is_server_reset(&err) => Next::ListAgain(err.to_string()),
            Some(Err(err)) if is_not_found(&err) => {
                let first = !watching.missing.swap(true, Ordering::SeqCst);
                if first {
                    tracing::warn!(informer = %shared.description, error = %err,
                        "the resource is not served (its CRD deleted?); emptying the cache until it is listed again");
                    self.forget_everything();
                    watching.versions = Versions::default();
                }
                *shared.last_error.lock() = Some(in_words(&err));
                if first && watching.listed_once {
                    Next::ResourceGone
                } else {
                    Next::Continue
                }
            }
            // The version the watch resumes from is gone (compacted, or from
            // before the resource went away): kube's watcher would list
            // again only after its backoff; a fresh one lists at once.
            // A server without streaming lists refuses the watch that asks
            // for one: list, then watch, from now on.
            Some(Err(err)) if watching.streaming && matches!(status_code(&err), Some(400 | 422)) => {
                tracing::debug!(informer = %shared.description, error = %err,
                    "the API server does not stream lists (sendInitialEvents); listing, then watching");
                watching.streaming = false;
                Next::Relist
            }
            Some(Err(err)) if status_code(&err) == Some(410) => {
                if watching.missing.load(Ordering::SeqCst) {
                    tracing::info!(informer = %shared.description,
                        "resource version expired after the resource was gone; listing again");
                } else {
                    tracing::debug!(informer = %shared.description, error = %err,
                        "resource version expired; listing again");
                }
                Next::Relist
            }
            Some(Err(err)) => {
                self.report_watch_error(&err);
                *shared.last_error.lock() = Some(in_words(&err));
                Next::Continue
            }
            None => Next::Stop,
        }
    }

    /// One line for a failed list or watch that will be retried. Only a
    /// refusal is about permissions (naming RBAC for a dropped connection
    /// would point the reader the wrong way), and a server that cannot be
    /// reached is said once for the whole process: every informer meets it
    /// at the same moment.
    fn report_watch_error(&self, err: &watcher::Error) {
        let shared = &self.shared;
        match status_code(err) {
            Some(401 | 403) => tracing::warn!(informer = %shared.description, error = %err,
                "the API server refused to list or watch; retrying with backoff (check the RBAC rules for list and watch)"),
            Some(_) => tracing::warn!(informer = %shared.description, error = %err,
                "list or watch failed; retrying with backoff"),
            None => match &shared.reporting.world {
                Some(world) if !world.lose() => {
                    tracing::debug!(informer = %shared.description, error = %err,
                        "the API server is still unreachable; retrying with backoff");
                }
                Some(world) => tracing::warn!(error = %err,
                    "lost the connection to the API server{}; every informer retries with backoff, \
                     at most 30 s apart, and says nothing more until it answers", world.at()),
                None => tracing::warn!(informer = %shared.description, error = %err,
                    "lost the connection to the API server; retrying with backoff"),
            },
        }
    }

    /// The resource is gone: every cached object leaves the cache as a
    /// delete (so controllers stop acting on them) and the informer is
    /// unsynced until a list succeeds again.
    fn forget_everything(&self) {
        let shared = &self.shared;
        shared.synced.send_replace(false);
        let (changes, errors) = {
            let mut store = shared.store.write();
            store.begin_relist();
            store.finish_relist()
        };
        self.report_cache_errors(errors);
        self.dispatch(&changes);
    }

    fn prepare(&self, mut obj: K) -> K {
        if !self.shared.settings.keep_managed_fields {
            obj.meta_mut().managed_fields = None;
        }
        if let Some(transform) = &self.shared.settings.transform {
            transform(&mut obj);
        }
        obj
    }

    /// Applies one watcher event to the cache and hands the resulting changes to
    /// the handlers, exactly as the running watch does. Tests and benchmarks use
    /// it to drive an informer without an API server.
    pub fn apply_event(&self, event: watcher::Event<K>) {
        let shared = &self.shared;
        let mut changes = Vec::new();
        let mut errors = Vec::new();
        let mut list_done = false;
        let watching = matches!(event, watcher::Event::Apply(_));
        match event {
            watcher::Event::Init => shared.store.write().begin_relist(),
            watcher::Event::InitApply(obj) | watcher::Event::Apply(obj) => {
                let obj = self.prepare(obj);
                match shared.store.write().upsert(obj) {
                    Ok(change) => {
                        // Outside a list, another uid under a cached name means
                        // a delete never came (a list replaces objects freely).
                        if watching
                            && let Some(Change::Updated { old, new }) = &change
                            && old.meta().uid.is_some()
                            && old.meta().uid != new.meta().uid
                        {
                            shared.history_changed.store(true, Ordering::SeqCst);
                        }
                        changes.extend(change);
                    }
                    Err(e) => errors.push(e),
                }
            }
            watcher::Event::Delete(obj) => {
                let obj = self.prepare(obj);
                changes.extend(shared.store.write().remove(obj));
            }
            watcher::Event::InitDone => {
                (changes, errors) = shared.store.write().finish_relist();
                list_done = true;
            }
        }
        self.report_cache_errors(errors);
        self.dispatch(&changes);
        if list_done {
            *shared.last_error.lock() = None;
            // A completed list makes the cache usable (again, after a reset).
            shared.synced.send_replace(true);
        }
    }

    /// Applies a watch event whose objects were decoded one by one: one that
    /// did not decode is left out of the cache (its
    /// last good version leaves it too) and reported, and comes back with its
    /// next change.
    fn apply_lenient_event(&self, event: watcher::Event<Lenient<K>>) {
        let typed = match event {
            watcher::Event::Init => {
                self.shared.reported.lock().relisted = Some(HashSet::new());
                watcher::Event::Init
            }
            watcher::Event::InitDone => {
                let mut reported = self.shared.reported.lock();
                if let Some(relisted) = reported.relisted.take() {
                    reported.versions.retain(|key, _| relisted.contains(key));
                }
                watcher::Event::InitDone
            }
            watcher::Event::InitApply(obj) => match self.decode(obj) {
                Ok(obj) => watcher::Event::InitApply(obj),
                // Unseen in the relist, a cached version is dropped when it ends.
                Err(_) => return,
            },
            watcher::Event::Apply(obj) => match self.decode(obj) {
                Ok(obj) => watcher::Event::Apply(obj),
                Err(key) => return self.forget(&key),
            },
            watcher::Event::Delete(obj) => {
                let key = store_key(obj.meta());
                self.shared.reported.lock().versions.remove(&key);
                match obj {
                    Lenient::Decoded(obj) => watcher::Event::Delete(obj),
                    Lenient::Undecodable { .. } => return self.forget(&key),
                }
            }
        };
        self.apply_event(typed);
    }

    fn decode(&self, obj: Lenient<K>) -> Result<K, StoreKey> {
        let key = store_key(obj.meta());
        match obj {
            Lenient::Decoded(obj) => {
                self.shared.reported.lock().versions.remove(&key);
                Ok(obj)
            }
            Lenient::Undecodable { metadata, error } => {
                self.report_undecodable(&key, &reference_of::<K>(*metadata), &error);
                Err(key)
            }
        }
    }

    fn report_undecodable(&self, key: &StoreKey, reference: &ObjectReference, error: &serde_json::Error) {
        let shared = &self.shared;
        let skipped = shared.undecodable.fetch_add(1, Ordering::Relaxed) + 1;
        tracing::error!(
            informer = %shared.description,
            namespace = %key.namespace,
            name = %key.name,
            error = %error,
            skipped,
            "cannot decode the object; it is left out of the cache until it changes"
        );
        if let Some(metrics) = &shared.reporting.metrics {
            let labels = InformerLabels {
                informer: shared.description.clone(),
            };
            metrics.undecodable.get_or_create(&labels).inc();
        }
        let version = reference.resource_version.clone().unwrap_or_default();
        let first_report = {
            let mut reported = shared.reported.lock();
            if let Some(relisted) = reported.relisted.as_mut() {
                relisted.insert(key.clone());
            }
            reported.versions.insert(key.clone(), version.clone()) != Some(version)
        };
        if first_report && let Some(recorder) = &shared.reporting.recorder {
            let message = format!(
                "cannot read this object as {}, so controllers ignore it until it changes: {error}",
                shared.description
            );
            recorder.record(reference, &Event::warning(UNDECODABLE_REASON, message));
        }
    }

    /// Hands `changes` to every handler, in order.
    fn dispatch(&self, changes: &[Change<K>]) {
        if changes.is_empty() {
            return;
        }
        let handlers = self.shared.handlers.read().clone();
        for change in changes {
            for handler in &handlers {
                handler.dispatch(change);
            }
        }
    }

    fn forget(&self, key: &StoreKey) {
        let change = self.shared.store.write().forget(key);
        match change {
            Ok(change) => self.dispatch(change.as_slice()),
            Err(error) => self.report_cache_errors(vec![error]),
        }
    }

    /// How many objects from the API server could not be decoded as `K` (each
    /// delivery counts); they are logged and left out of the cache.
    pub fn undecodable_objects(&self) -> u64 {
        self.shared.undecodable.load(Ordering::Relaxed)
    }

    /// Re-delivers every cached object to the handlers' resync callbacks (an
    /// update from itself to itself where a handler has none), without
    /// calling the API server.
    ///
    /// Objects are decoded and delivered one at a time, walking the keys a
    /// batch at a time: decoding the whole cache first would hold every object
    /// in its typed form (several times its cached JSON) at once, and a
    /// process is sized for that peak.
    pub(crate) fn resync(&self) {
        const KEYS_PER_STEP: usize = 1024;
        let handlers = self.shared.handlers.read().clone();
        let mut last: Option<StoreKey> = None;
        loop {
            let keys = self.shared.store.read().keys_after(last.as_ref(), KEYS_PER_STEP);
            for key in &keys {
                let found = self.shared.store.read().get(&key.namespace, &key.name);
                match found {
                    Ok(Some(obj)) => {
                        for handler in &handlers {
                            handler.resync(&obj);
                        }
                    }
                    // Deleted since the keys were read: its delete was delivered.
                    Ok(None) => {}
                    Err(err) => self.report_cache_errors(vec![err]),
                }
            }
            if keys.len() < KEYS_PER_STEP {
                return;
            }
            last = keys.into_iter().last();
        }
    }

    fn report_cache_errors(&self, errors: Vec<CacheError>) {
        for err in errors {
            tracing::error!(informer = %self.shared.description, error = %err, "object skipped");
        }
    }
}

fn store_key(metadata: &ObjectMeta) -> StoreKey {
    StoreKey {
        namespace: metadata.namespace.as_deref().unwrap_or_default().into(),
        name: metadata.name.as_deref().unwrap_or_default().into(),
    }
}

/// The highest resource version a watch has delivered, to notice a server
/// whose history changed under it: within one list-then-watch, every watch
/// event is newer than everything before it. Resource versions are opaque in
/// the API conventions, so only versions that are integers (as every
/// kube-apiserver's etcd revisions are) are compared.
#[derive(Default)]
struct Versions {
    highest: u64,
}

/// A watch event older than what the watch had already delivered.
struct WentBack {
    seen: u64,
    highest: u64,
}

impl fmt::Display for WentBack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a watch event has resource version {} after {} was seen: the API server's history changed",
            self.seen, self.highest
        )
    }
}

impl Versions {
    fn went_back<R: kube::Resource>(&mut self, event: &watcher::Event<R>) -> Option<WentBack> {
        let version = |obj: &R| obj.meta().resource_version.as_deref()?.parse::<u64>().ok();
        match event {
            watcher::Event::Init => self.highest = 0,
            watcher::Event::InitDone => {}
            // A list holds objects of any age, in any order.
            watcher::Event::InitApply(obj) => self.highest = self.highest.max(version(obj).unwrap_or(0)),
            watcher::Event::Apply(obj) | watcher::Event::Delete(obj) => {
                let seen = version(obj)?;
                if seen < self.highest {
                    return Some(WentBack {
                        seen,
                        highest: self.highest,
                    });
                }
                self.highest = seen;
            }
        }
        None
    }
}

/// A reference to an object of `K`'s resource, for the event that reports
/// it cannot be decoded.
fn reference_of<K: Object>(metadata: ObjectMeta) -> ObjectReference {
    ObjectReference {
        api_version: Some(K::api_version(&()).into_owned()),
        kind: Some(K::kind(&()).into_owned()),
        namespace: metadata.namespace,
        name: metadata.name,
        uid: metadata.uid,
        resource_version: metadata.resource_version,
        field_path: None,
    }
}

/// kube-apiserver's answer to a resource version beyond its own ("Too large
/// resource version", 504): the server went back in time. The text is matched
/// because kube-runtime's watcher error carries the Status only as text for
/// some of its variants.
fn is_server_reset(err: &watcher::Error) -> bool {
    err.to_string().contains("Too large resource version")
}

/// What an informer's run loop keeps between events.
struct Watching {
    /// Whether lists stream (`sendInitialEvents`); cleared for good when the
    /// server refuses a streaming watch.
    streaming: bool,
    versions: Versions,
    /// Set while the resource answers 404 (its [`RetryBackoff`] reads it).
    missing: Arc<AtomicBool>,
    /// Whether a list has completed: a 404 after one means the resource went.
    listed_once: bool,
}

/// What the run loop does after an event.
enum Next {
    Continue,
    Stop,
    /// The cache is not the server's: list again, and tell the others.
    ListAgain(String),
    /// The resource answered 404 after it was listed; the cache is empty.
    ResourceGone,
    /// The watch cannot resume (410): list again now, without a backoff.
    Relist,
}

/// The API server answered 404 for the resource itself: its CRD is deleted
/// or not yet established (a relist after a reset finds it missing too).
fn is_not_found(err: &watcher::Error) -> bool {
    status_code(err) == Some(404)
}

/// Why a list or watch failed, in words, for `/readiness` and the
/// controllers waiting on the informer: kube's own text for a 404 quotes the
/// body it could not parse ("404 page not found: Failed to parse error
/// data"), which says nothing to the person reading it.
fn in_words(err: &watcher::Error) -> String {
    match api_status(err) {
        Some(status) if status.code == 404 => {
            "the resource is not served (404 Not Found): its CustomResourceDefinition is not installed, \
             or not established yet"
                .to_owned()
        }
        Some(status) if matches!(status.code, 401 | 403) => format!(
            "the API server refused to list or watch it ({} {}): {}; check the RBAC rules for list and watch",
            status.code, status.reason, status.message
        ),
        Some(status) => format!(
            "the API server answered {} {}: {}",
            status.code, status.reason, status.message
        ),
        None => format!("cannot reach the API server: {err}"),
    }
}

/// The Status of an error the API server answered, wherever the watcher
/// met it.
fn api_status(err: &watcher::Error) -> Option<&kube::core::Status> {
    match err {
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status))
        | watcher::Error::WatchError(status) => Some(status),
        _ => None,
    }
}

/// The HTTP status code of an error the API server answered.
fn status_code(err: &watcher::Error) -> Option<u16> {
    api_status(err).map(|status| status.code)
}

/// kube-runtime's default retry timing (800 ms doubling to 30 s, with
/// jitter, reset after 2 minutes of quiet), except that while the resource
/// answers 404 no wait exceeds [`MISSING_RESOURCE_RETRY`]: a deleted CRD
/// that is installed again is listed within seconds, not after the half
/// minute the default backoff has grown to.
struct RetryBackoff {
    default: watcher::DefaultBackoff,
    missing: Arc<AtomicBool>,
}

/// The longest wait between lists of a resource that answers 404.
pub const MISSING_RESOURCE_RETRY: Duration = Duration::from_secs(1);

impl RetryBackoff {
    fn new(missing: Arc<AtomicBool>) -> Self {
        RetryBackoff {
            default: watcher::DefaultBackoff::default(),
            missing,
        }
    }
}

impl Iterator for RetryBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let wait = self.default.next()?;
        Some(if self.missing.load(Ordering::SeqCst) {
            wait.min(MISSING_RESOURCE_RETRY)
        } else {
            wait
        })
    }
}

impl kube::runtime::utils::Backoff for RetryBackoff {
    fn reset(&mut self) {
        self.default.reset();
    }
}

fn describe_kind<K: Object>() -> String {
    let group = K::group(&());
    if group.is_empty() {
        format!("{} {}", K::kind(&()), K::version(&()))
    } else {
        format!("{}.{}/{}", K::kind(&()), group, K::version(&()))
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta};

    use super::*;

    /// A client that is never called: these tests feed watcher events directly.
    fn offline_client() -> kube::Client {
        let service = tower::service_fn(|_req: http::Request<kube::client::Body>| async {
            Err::<http::Response<kube::client::Body>, _>(std::io::Error::other("offline"))
        });
        kube::Client::new(service, "default")
    }

    #[test]
    fn a_watch_event_older_than_what_came_before_means_another_history() {
        let obj = |rv: &str| {
            let mut obj = cm("a", rv, "web");
            obj.metadata.resource_version = Some(rv.into());
            obj
        };
        let init = || watcher::Event::<ConfigMap>::Init;
        let mut versions = Versions::default();
        assert!(versions.went_back(&init()).is_none());
        assert!(versions.went_back(&watcher::Event::InitApply(obj("7"))).is_none());
        assert!(
            versions.went_back(&watcher::Event::InitApply(obj("3"))).is_none(),
            "a list comes in any order"
        );
        assert!(
            versions
                .went_back(&watcher::Event::<ConfigMap>::InitDone)
                .is_none()
        );
        assert!(versions.went_back(&watcher::Event::Apply(obj("9"))).is_none());
        let back = versions.went_back(&watcher::Event::Delete(obj("8")));
        assert_eq!(back.map(|b| (b.seen, b.highest)), Some((8, 9)));
        assert!(
            versions
                .went_back(&watcher::Event::Apply(obj("opaque")))
                .is_none(),
            "versions that are not integers are not compared"
        );
        assert!(versions.went_back(&init()).is_none());
        assert!(
            versions.went_back(&watcher::Event::Apply(obj("2"))).is_none(),
            "a new list starts over"
        );
    }

    fn informer(settings: InformerSettings<ConfigMap>) -> Informer<ConfigMap> {
        Informer::new(
            Api::all(offline_client()),
            None,
            None,
            None,
            settings,
            DEFAULT_RESYNC_PERIOD,
            Reporting::default(),
        )
    }

    fn cm(name: &str, rv: &str, tier: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                namespace: Some("ns".into()),
                name: Some(name.into()),
                resource_version: Some(rv.into()),
                labels: Some([("tier".to_string(), tier.to_string())].into()),
                managed_fields: Some(vec![ManagedFieldsEntry {
                    manager: Some("kubectl".into()),
                    ..Default::default()
                }]),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// Records what a handler saw as "op:name@rv" strings.
    fn recorder(informer: &Informer<ConfigMap>, filter: Option<&'static str>) -> Arc<Mutex<Vec<String>>> {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let name = |c: &ConfigMap| {
            format!(
                "{}@{}",
                c.metadata.name.as_deref().unwrap_or_default(),
                c.metadata.resource_version.as_deref().unwrap_or_default()
            )
        };
        let (a, u, d) = (seen.clone(), seen.clone(), seen.clone());
        let mut handler = EventHandler::new()
            .on_add(move |c| a.lock().push(format!("add:{}", name(c))))
            .on_update(move |o, n| u.lock().push(format!("update:{}->{}", name(o), name(n))))
            .on_delete(move |c| d.lock().push(format!("delete:{}", name(c))));
        if let Some(tier) = filter {
            handler = handler.with_filter(move |c: &ConfigMap| {
                c.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("tier"))
                    .is_some_and(|t| t == tier)
            });
        }
        informer.add_event_handler(handler);
        seen
    }

    fn take(seen: &Mutex<Vec<String>>) -> Vec<String> {
        std::mem::take(&mut *seen.lock())
    }

    #[tokio::test]
    async fn initial_list_adds_and_marks_synced_then_watch_events_flow() {
        let inf = informer(InformerSettings::default());
        let seen = recorder(&inf, None);
        inf.apply_event(watcher::Event::Init);
        inf.apply_event(watcher::Event::InitApply(cm("a", "1", "web")));
        assert!(!inf.has_synced(), "synced only when the list is complete");
        inf.apply_event(watcher::Event::InitDone);
        assert!(inf.has_synced());
        inf.apply_event(watcher::Event::Apply(cm("a", "2", "web")));
        inf.apply_event(watcher::Event::Apply(cm("a", "2", "web")));
        inf.apply_event(watcher::Event::Delete(cm("a", "3", "web")));
        assert_eq!(take(&seen), ["add:a@1", "update:a@1->a@2", "delete:a@3"]);
    }

    #[tokio::test]
    async fn relist_after_expiry_emits_only_real_changes() {
        for cache in [CacheFormat::Decoded, CacheFormat::Json] {
            relist_emits_only_real_changes(cache);
        }
    }

    fn relist_emits_only_real_changes(cache: CacheFormat) {
        let inf = informer(InformerSettings {
            cache,
            ..Default::default()
        });
        let seen = recorder(&inf, None);
        for ev in [
            watcher::Event::Init,
            watcher::Event::InitApply(cm("same", "1", "web")),
            watcher::Event::InitApply(cm("changed", "1", "web")),
            watcher::Event::InitApply(cm("deleted", "1", "web")),
            watcher::Event::InitDone,
        ] {
            inf.apply_event(ev);
        }
        take(&seen);
        // A 410 made the watcher relist: nothing duplicated, nothing lost.
        for ev in [
            watcher::Event::Init,
            watcher::Event::InitApply(cm("same", "1", "web")),
            watcher::Event::InitApply(cm("changed", "5", "web")),
            watcher::Event::InitApply(cm("created", "6", "web")),
            watcher::Event::InitDone,
        ] {
            inf.apply_event(ev);
        }
        assert_eq!(
            take(&seen),
            ["update:changed@1->changed@5", "add:created@6", "delete:deleted@1"]
        );
        assert_eq!(inf.lister().len(), 3);
    }

    #[tokio::test]
    async fn a_lister_reads_the_object_the_handlers_saw_without_decoding_it() {
        let inf = informer(InformerSettings {
            cache: CacheFormat::Decoded,
            ..InformerSettings::default()
        });
        let handed = Arc::new(Mutex::new(Vec::new()));
        let addresses = handed.clone();
        inf.add_event_handler(EventHandler::all(move |c: &ConfigMap| {
            addresses.lock().push(std::ptr::from_ref(c).addr());
        }));
        let lister = inf.lister();
        inf.apply_event(watcher::Event::Apply(cm("a", "1", "web")));
        let first = lister.get_by_key("ns", "a").unwrap().unwrap();
        inf.apply_event(watcher::Event::Apply(cm("a", "2", "db")));
        let second = lister.get_by_key("ns", "a").unwrap().unwrap();
        assert_eq!(second.metadata.resource_version.as_deref(), Some("2"));
        assert_eq!(first.metadata.resource_version.as_deref(), Some("1"));
        assert_eq!(
            *handed.lock(),
            [Arc::as_ptr(&first).addr(), Arc::as_ptr(&second).addr()]
        );
        let again = lister.get_by_key("ns", "a").unwrap().unwrap();
        assert!(Arc::ptr_eq(&again, &second), "a second read is the same object");
    }

    #[tokio::test]
    async fn filtered_handlers_turn_updates_into_adds_and_deletes() {
        let inf = informer(InformerSettings::default());
        let seen = recorder(&inf, Some("web"));
        inf.apply_event(watcher::Event::Apply(cm("x", "1", "db")));
        inf.apply_event(watcher::Event::Apply(cm("x", "2", "web")));
        inf.apply_event(watcher::Event::Apply(cm("x", "3", "web")));
        inf.apply_event(watcher::Event::Apply(cm("x", "4", "db")));
        inf.apply_event(watcher::Event::Delete(cm("x", "5", "db")));
        assert_eq!(take(&seen), ["add:x@2", "update:x@2->x@3", "delete:x@3"]);
    }

    #[tokio::test]
    async fn many_handlers_each_see_every_change() {
        let inf = informer(InformerSettings::default());
        let first = recorder(&inf, None);
        let second = recorder(&inf, None);
        inf.apply_event(watcher::Event::Apply(cm("a", "1", "web")));
        inf.apply_event(watcher::Event::Delete(cm("a", "2", "web")));
        assert_eq!(take(&first), take(&second));
    }

    #[tokio::test]
    async fn late_handlers_get_the_cache_as_adds() {
        let inf = informer(InformerSettings::default());
        for ev in [
            watcher::Event::Init,
            watcher::Event::InitApply(cm("a", "1", "web")),
            watcher::Event::InitDone,
        ] {
            inf.apply_event(ev);
        }
        let late = recorder(&inf, None);
        assert_eq!(take(&late), ["add:a@1"]);
    }

    #[tokio::test]
    async fn resync_redelivers_the_cache_as_updates() {
        let inf = informer(InformerSettings::default());
        inf.apply_event(watcher::Event::Apply(cm("a", "1", "web")));
        inf.apply_event(watcher::Event::Apply(cm("b", "1", "db")));
        let seen = recorder(&inf, Some("web"));
        inf.resync();
        assert_eq!(take(&seen), ["update:a@1->a@1"]);
    }

    /// Never called: these tests look at what is queued.
    struct Unused;

    impl crate::controller::Reconciler for Unused {
        async fn reconcile(
            &self,
            _key: &crate::controller::ObjectKey,
        ) -> Result<crate::controller::Action, crate::controller::Error> {
            Ok(crate::controller::Action::await_change())
        }
    }

    /// Takes every key queued, as workers would, and answers them; each as
    /// the key and why it was queued.
    async fn drain(controller: &crate::controller::Impl) -> Vec<String> {
        let queue = controller.work_queue();
        let mut keys = Vec::new();
        while !queue.is_empty() {
            let request = queue.get().await.unwrap();
            queue.done(&request.key);
            keys.push(format!("{} {}", request.key, request.reason));
        }
        keys
    }

    /// At scale a resync's keys are reconciled before the next informer's
    /// resync arrives; a child's resync must not enqueue its owner again, or
    /// each key is reconciled twice (100,000 keys, 200,000 reconciles).
    #[tokio::test(start_paused = true)]
    async fn a_resync_reconciles_each_key_once() {
        use crate::controller::{ControllerOptions, Impl};
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

        let controller = Impl::new("owners", Arc::new(Unused), ControllerOptions::default());
        let owners = informer(InformerSettings::default());
        let children = informer(InformerSettings::default());
        owners.add_event_handler(controller.enqueue_handler());
        let enqueue = controller.clone();
        children.add_event_handler(
            EventHandler::all(move |cm: &ConfigMap| enqueue.enqueue_controller_of(cm)).skip_resyncs(),
        );
        children.add_event_handler(controller.tracker().handler());
        owners.apply_event(watcher::Event::Apply(cm("owner", "1", "web")));
        let mut child = cm("child", "2", "web");
        child.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "owner".into(),
            uid: "u".into(),
            controller: Some(true),
            ..Default::default()
        }]);
        children.apply_event(watcher::Event::Apply(child.clone()));
        controller
            .tracker()
            .track_reference(
                &crate::tracker::Reference::named("v1", "ConfigMap", "ns", "child"),
                &cm("owner", "1", "web"),
            )
            .unwrap();
        assert_eq!(
            drain(&controller).await,
            ["ns/owner changed"],
            "a real change enqueues the owner"
        );
        children.apply_event(watcher::Event::Apply(cm("child", "3", "db")));
        assert_eq!(
            drain(&controller).await,
            ["ns/owner related"],
            "a child's change enqueues it"
        );

        owners.resync();
        assert_eq!(drain(&controller).await, ["ns/owner resync"]);
        children.resync();
        assert_eq!(
            drain(&controller).await,
            Vec::<String>::new(),
            "reconciled twice in one resync"
        );
    }

    #[test]
    fn retries_of_a_missing_resource_wait_a_few_seconds_at_most() {
        let missing = Arc::new(AtomicBool::new(false));
        let mut backoff = RetryBackoff::new(missing.clone());
        let grown = (0..20).filter_map(|_| backoff.next()).max().unwrap();
        assert!(
            grown > MISSING_RESOURCE_RETRY,
            "the default grows to 30 s: {grown:?}"
        );
        missing.store(true, Ordering::SeqCst);
        for _ in 0..20 {
            assert!(backoff.next().unwrap() <= MISSING_RESOURCE_RETRY);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_zero_resync_period_means_no_resync() {
        let inf = Informer::new(
            Api::<ConfigMap>::all(offline_client()),
            None,
            None,
            None,
            InformerSettings::default(),
            Duration::ZERO,
            Reporting::default(),
        );
        let seen = recorder(&inf, None);
        inf.apply_event(watcher::Event::Apply(cm("a", "1", "web")));
        take(&seen);
        let shutdown = CancellationToken::new();
        let task = inf.spawn(&shutdown).unwrap();
        tokio::time::sleep(Duration::from_secs(24 * 3600)).await;
        shutdown.cancel();
        assert!(task.await.is_ok(), "the informer task ran to its end");
        assert_eq!(take(&seen), Vec::<String>::new(), "nothing was re-delivered");
    }

    /// Instances alive now of [`Counted`].
    static COUNTED_ALIVE: AtomicU64 = AtomicU64::new(0);

    /// Counts its live instances, so a test sees how many objects the
    /// informer holds decoded at once.
    #[derive(Debug)]
    struct Alive(());

    impl Alive {
        fn new() -> Self {
            COUNTED_ALIVE.fetch_add(1, Ordering::SeqCst);
            Alive(())
        }
    }

    impl Clone for Alive {
        fn clone(&self) -> Self {
            Alive::new()
        }
    }

    impl Drop for Alive {
        fn drop(&mut self) {
            COUNTED_ALIVE.fetch_sub(1, Ordering::SeqCst);
        }
    }

    #[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
    struct Counted {
        metadata: ObjectMeta,
        #[serde(skip, default = "Alive::new")]
        _alive: Alive,
    }

    impl kube::Resource for Counted {
        type DynamicType = ();
        type Scope = k8s_openapi::NamespaceResourceScope;

        fn kind(_: &()) -> std::borrow::Cow<'_, str> {
            "Counted".into()
        }
        fn group(_: &()) -> std::borrow::Cow<'_, str> {
            "".into()
        }
        fn version(_: &()) -> std::borrow::Cow<'_, str> {
            "v1".into()
        }
        fn plural(_: &()) -> std::borrow::Cow<'_, str> {
            "counteds".into()
        }
        fn meta(&self) -> &ObjectMeta {
            &self.metadata
        }
        fn meta_mut(&mut self) -> &mut ObjectMeta {
            &mut self.metadata
        }
    }

    /// A resync re-delivers the cache one object at a time: from JSON it
    /// decodes one object, hands it to the handlers and drops it before the
    /// next; decoded, it shares the cached objects and makes none.
    #[tokio::test]
    async fn a_resync_holds_one_decoded_object_at_a_time_not_the_whole_cache() {
        let objects = 3000;
        // (form, objects alive once the cache is filled, most alive during the resync)
        for (cache, filled, during) in [
            (CacheFormat::Json, 0, 1),
            (CacheFormat::Decoded, objects, objects),
        ] {
            let inf = Informer::<Counted>::new(
                Api::all(offline_client()),
                None,
                None,
                None,
                InformerSettings {
                    cache,
                    ..InformerSettings::default()
                },
                DEFAULT_RESYNC_PERIOD,
                Reporting::default(),
            );
            for i in 0..objects {
                inf.apply_event(watcher::Event::Apply(Counted {
                    metadata: ObjectMeta {
                        namespace: Some(format!("ns-{}", i % 7)),
                        name: Some(format!("c-{i:05}")),
                        resource_version: Some("1".into()),
                        ..ObjectMeta::default()
                    },
                    _alive: Alive::new(),
                }));
            }
            assert_eq!(
                COUNTED_ALIVE.load(Ordering::SeqCst),
                filled,
                "{cache:?}: objects the cache holds"
            );
            let delivered = Arc::new(AtomicU64::new(0));
            let most_alive = Arc::new(AtomicU64::new(0));
            let (count, most) = (delivered.clone(), most_alive.clone());
            inf.add_event_handler(
                EventHandler::default().on_update(move |_: &Counted, _: &Counted| {
                    count.fetch_add(1, Ordering::SeqCst);
                    most.fetch_max(COUNTED_ALIVE.load(Ordering::SeqCst), Ordering::SeqCst);
                }),
            );
            inf.resync();
            assert_eq!(
                delivered.load(Ordering::SeqCst),
                objects,
                "{cache:?}: every object once"
            );
            assert_eq!(most_alive.load(Ordering::SeqCst), during, "{cache:?}");
            drop(inf);
            assert_eq!(
                COUNTED_ALIVE.load(Ordering::SeqCst),
                0,
                "{cache:?}: the informer dropped its objects"
            );
        }
    }

    #[tokio::test]
    async fn a_controllers_handler_queues_resyncs_behind_changes_and_says_why() {
        use crate::controller::{ControllerOptions, Error, Impl, Reason, Reconciler, Request};
        use crate::key::ObjectKey;

        struct Noop;
        impl Reconciler for Noop {
            async fn reconcile(
                &self,
                _key: &crate::controller::ObjectKey,
            ) -> Result<crate::controller::Action, Error> {
                Ok(crate::controller::Action::await_change())
            }
        }
        let controller = Impl::new("configmaps", Noop, ControllerOptions::default());
        let inf = informer(InformerSettings::default());
        inf.apply_event(watcher::Event::Apply(cm("a", "1", "web")));
        inf.add_event_handler(controller.enqueue_handler());
        let queue = controller.work_queue();
        assert_eq!(queue.len(), 0, "{:?}", queue.snapshot());

        inf.resync();
        inf.apply_event(watcher::Event::Apply(cm("b", "1", "web")));
        let snapshot = queue.snapshot();
        assert_eq!(snapshot.slow, [ObjectKey::new("ns", "a")]);
        assert_eq!(snapshot.fast, [ObjectKey::new("ns", "b")]);
        let first = queue.get().await.unwrap();
        assert_eq!(first, Request::new(ObjectKey::new("ns", "b"), Reason::Changed));
        let second = queue.get().await.unwrap();
        assert_eq!(second, Request::new(ObjectKey::new("ns", "a"), Reason::Resync));
    }

    #[tokio::test]
    async fn a_resync_reaches_on_resync_or_else_the_update_callback_and_passes_the_filter() {
        let inf = informer(InformerSettings::default());
        inf.apply_event(watcher::Event::Apply(cm("a", "1", "web")));
        inf.apply_event(watcher::Event::Apply(cm("b", "1", "db")));
        let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let record = |tag: &'static str| {
            let seen = seen.clone();
            move |c: &ConfigMap| {
                seen.lock().push(format!(
                    "{tag} {}",
                    c.metadata.name.as_deref().unwrap_or_default()
                ))
            }
        };
        let (updated, resynced) = (record("update"), record("resync"));
        inf.add_event_handler(
            EventHandler::new().on_update(move |_: &ConfigMap, new: &ConfigMap| updated(new)),
        );
        inf.add_event_handler(
            EventHandler::all(record("all"))
                .on_resync(resynced)
                .with_filter(|c: &ConfigMap| c.metadata.name.as_deref() == Some("a")),
        );
        inf.add_event_handler(EventHandler::all(record("skipped")).skip_resyncs());

        inf.resync();
        let mut seen = seen.lock().clone();
        seen.sort();
        assert_eq!(seen, ["resync a", "update a", "update b"]);
    }

    #[tokio::test]
    async fn managed_fields_are_stripped_unless_kept_and_transforms_run() {
        let inf = informer(InformerSettings::default());
        inf.apply_event(watcher::Event::Apply(cm("a", "1", "web")));
        let cached = inf.lister().get_by_key("ns", "a").unwrap().unwrap();
        assert!(cached.metadata.managed_fields.is_none());

        let keep = informer(InformerSettings {
            keep_managed_fields: true,
            transform: Some(Arc::new(|c: &mut ConfigMap| {
                c.data = Some([("touched".to_string(), "yes".to_string())].into());
            })),
            ..Default::default()
        });
        keep.apply_event(watcher::Event::Apply(cm("a", "1", "web")));
        let cached = keep.lister().get_by_key("ns", "a").unwrap().unwrap();
        assert!(cached.metadata.managed_fields.is_some());
        assert_eq!(
            cached
                .data
                .as_ref()
                .and_then(|d| d.get("touched"))
                .map(String::as_str),
            Some("yes")
        );
    }

    #[tokio::test]
    async fn indexes_added_before_or_after_objects() {
        let inf = informer(InformerSettings::default());
        inf.apply_event(watcher::Event::Apply(cm("a", "1", "web")));
        inf.add_index("byTier", |c: &ConfigMap| {
            c.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("tier").cloned())
                .into_iter()
                .collect()
        })
        .unwrap();
        inf.apply_event(watcher::Event::Apply(cm("b", "1", "web")));
        inf.apply_event(watcher::Event::Apply(cm("c", "1", "db")));
        let web: Vec<_> = inf
            .lister()
            .by_index("byTier", "web")
            .unwrap()
            .iter()
            .map(|c| c.metadata.name.clone())
            .collect();
        assert_eq!(web, [Some("a".to_string()), Some("b".to_string())]);
    }
}
