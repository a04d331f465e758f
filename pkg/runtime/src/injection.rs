//! Injection: the one value every controller constructor receives.
//!
//! A [`Context`] carries the kube `Client` (and its config), an optional
//! namespace scope, the handler resync period and typed extensions (values any
//! constructor can share, such as a tracker or a config store). Informers are
//! created on demand, the first time a constructor asks for one, and shared by
//! everyone who asks for the same kind (and label selector). `sharedmain` then
//! starts exactly those informers and waits for their caches.
//!
//! Unlike Knative's Go, nothing registers itself at start-up: there is no
//! global registry, and a test builds its own `Context` (for example over
//! `testenv`). The process's controllers are a plain list of [`Constructor`]s,
//! declared once with [`controllers!`](crate::controllers).
//!
//! ```no_run
//! # async fn demo(client: kube::Client) -> Result<(), kinject_runtime::injection::CacheSyncError> {
//! use k8s_openapi::api::core::v1::Pod;
//! use kinject_runtime::injection::Context;
//! use tokio_util::sync::CancellationToken;
//!
//! let ctx = Context::builder(client).namespace("knative-samples").build();
//! let pods = ctx.informer::<Pod>();             // created now
//! assert!(ctx.informer::<Pod>().lister().is_empty());  // the same informer
//! let shutdown = CancellationToken::new();
//! ctx.start_informers(&shutdown);
//! ctx.wait_for_cache_sync(std::time::Duration::from_secs(30)).await?;
//! # Ok(()) }
//! ```

use std::any::{Any, TypeId, type_name};
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

mod constructor;

pub use constructor::Constructor;

use futures::future::BoxFuture;
use kube::Client;
use kube::core::Selector;
use parking_lot::{Mutex, RwLock};
use thiserror::Error;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::apis::Object;
use crate::client::{ApiScope, ClientSource, scoped_api};
pub use crate::clock::Clock;
use crate::events::{KubeRecorder, Recorder, SharedRecorder};
use crate::informer::{
    CacheFormat, DEFAULT_RESYNC_PERIOD, Informer, InformerMetrics, InformerSettings, Reporting,
};
use crate::network;
use crate::rbac::{Permissions, Verb};
use crate::world::World;

/// The injection context: a cheap, cloneable handle shared by every controller
/// of a process.
///
/// A context is a namespace scope over one process-wide core: the client,
/// watch client, config, resync period, informer settings and extensions,
/// the informers, and the permissions recorded. [`Context::in_namespace`]
/// derives a scope for another namespace from it, sharing all of that, so a
/// process builds its context once and every part of it (controllers,
/// the process's own ConfigMap watch) sees the same settings.
#[derive(Clone)]
pub struct Context {
    inner: Arc<Inner>,
    /// Where namespaced informers of this scope list and watch; `None` is
    /// every namespace.
    namespace: Option<Arc<str>>,
}

struct Inner {
    client: Client,
    /// What informers list and watch through; see [`ContextBuilder::watch_client`].
    watch_client: Option<Client>,
    config: Option<kube::Config>,
    resync_period: Duration,
    settings: HashMap<TypeId, Box<dyn Any + Send + Sync>>,
    informers: Mutex<Vec<Registration>>,
    extensions: RwLock<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
    cluster_domain: String,
    /// This replica's name, for events it writes.
    pod_name: Option<String>,
    /// The time reconcilers read.
    clock: Clock,
    /// The informers asked for while [`Context::recording`] runs.
    recording: Mutex<Option<Vec<Arc<dyn Startable>>>>,
    /// The recorder of every informer's events, built on first need: one
    /// event writer (and one spam filter) for the whole context.
    informer_recorder: std::sync::OnceLock<Arc<dyn Recorder>>,
    /// What the constructors asked of the API server, for the RBAC that grants it.
    permissions: Mutex<Permissions>,
    /// One history for all the informers: when one finds the server's
    /// changed, all list again.
    world: World,
}

struct Registration {
    type_id: TypeId,
    namespace: Option<Arc<str>>,
    selector: String,
    cache: CacheFormat,
    informer: Box<dyn Any + Send + Sync>,
    handle: Arc<dyn Startable>,
}

/// The type-erased face of an informer that `start_informers` needs.
trait Startable: Send + Sync {
    fn spawn(&self, shutdown: &CancellationToken) -> Option<JoinHandle<()>>;
    fn has_synced(&self) -> bool;
    fn description(&self) -> String;
    fn last_error(&self) -> Option<String>;
    fn wait_for_sync(&self) -> BoxFuture<'static, ()>;
}

impl<K: Object> Startable for Informer<K> {
    fn spawn(&self, shutdown: &CancellationToken) -> Option<JoinHandle<()>> {
        Informer::spawn(self, shutdown)
    }
    fn has_synced(&self) -> bool {
        Informer::has_synced(self)
    }
    fn description(&self) -> String {
        Informer::description(self).to_owned()
    }
    fn last_error(&self) -> Option<String> {
        Informer::last_error(self)
    }
    fn wait_for_sync(&self) -> BoxFuture<'static, ()> {
        let this = self.clone();
        Box::pin(async move { this.wait_for_sync().await })
    }
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("namespace", &self.namespace)
            .field("resync_period", &self.inner.resync_period)
            .field("cluster_domain", &self.inner.cluster_domain)
            .field("informers", &self.informer_descriptions())
            .finish_non_exhaustive()
    }
}

/// Builds a [`Context`].
pub struct ContextBuilder {
    client: Client,
    watch_client: Option<Client>,
    config: Option<kube::Config>,
    namespace: Option<String>,
    resync_period: Duration,
    settings: HashMap<TypeId, Box<dyn Any + Send + Sync>>,
    extensions: HashMap<TypeId, Arc<dyn Any + Send + Sync>>,
    cluster_domain: Option<String>,
    pod_name: Option<String>,
    clock: Clock,
}

impl fmt::Debug for ContextBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ContextBuilder")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl ContextBuilder {
    /// The client config the `Client` was built from, for code that needs it
    /// (for example to build a second client).
    pub fn config(mut self, config: kube::Config) -> Self {
        self.config = Some(config);
        self
    }

    /// The client informers list and watch through (default: the context's
    /// client). Give one without kube's transient-failure retries
    /// (`kube::Config { default_retry: false, .. }`): kube's default client
    /// retries a watch answered 504 "Too large resource version" (the API
    /// server went back in time) for minutes, with the same version, before
    /// the informer can see it and list again. A watch needs no retry layer:
    /// kube-runtime's watcher retries with its own backoff.
    pub fn watch_client(mut self, client: Client) -> Self {
        self.watch_client = Some(client);
        self
    }

    /// Limits every namespaced informer to one namespace (Knative's
    /// `WithNamespaceScope`).
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// How often informers re-deliver their whole cache to handlers (default
    /// 10 h; zero means never).
    pub fn resync_period(mut self, period: Duration) -> Self {
        self.resync_period = period;
        self
    }

    /// How informers of kind `K` watch and cache (transform, managedFields,
    /// streaming lists, cache format).
    pub fn informer_settings<K: Object>(mut self, settings: InformerSettings<K>) -> Self {
        self.settings.insert(TypeId::of::<K>(), Box::new(settings));
        self
    }

    /// The cluster's DNS domain (`cluster.local`); without it, the context
    /// reads it from `/etc/resolv.conf` as [`network::detect_cluster_domain`]
    /// does. A process passes what `CLUSTER_DOMAIN` says.
    pub fn cluster_domain(mut self, domain: impl Into<String>) -> Self {
        self.cluster_domain = Some(domain.into());
        self
    }

    /// This replica's name (the pod's), which the events the context's
    /// informers and reconcilers write carry as their reporting instance.
    pub fn pod_name(mut self, name: Option<String>) -> Self {
        self.pod_name = name;
        self
    }

    /// The clock reconcilers read with
    /// [`ReconcileContext::now`](crate::reconciler::ReconcileContext::now)
    /// (default: the system's); a table test fixes it.
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Adds a typed extension; see [`Context::get`].
    pub fn extension<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.extensions.insert(TypeId::of::<T>(), Arc::new(value));
        self
    }

    /// The context.
    pub fn build(self) -> Context {
        let world = World::new(
            self.config.as_ref().map(|c| c.cluster_url.to_string()),
            Some(self.client.clone()),
        );
        // What the world reads of itself: the uid of one namespace.
        let mut permissions = Permissions::default();
        permissions.allow_named::<k8s_openapi::api::core::v1::Namespace>(
            None,
            crate::world::IDENTITY_NAMESPACE,
            &[Verb::Get],
        );
        Context {
            namespace: self.namespace.map(Arc::from),
            inner: Arc::new(Inner {
                client: self.client,
                watch_client: self.watch_client,
                config: self.config,
                resync_period: self.resync_period,
                settings: self.settings,
                informers: Mutex::new(Vec::new()),
                extensions: RwLock::new(self.extensions),
                cluster_domain: self.cluster_domain.unwrap_or_else(network::detect_cluster_domain),
                pod_name: self.pod_name,
                clock: self.clock,
                recording: Mutex::new(None),
                informer_recorder: std::sync::OnceLock::new(),
                permissions: Mutex::new(permissions),
                world,
            }),
        }
    }
}

/// Some of a context's informers, as [`Context::recording`] saw them asked for.
#[derive(Clone, Default)]
pub struct InformerSet {
    informers: Vec<Arc<dyn Startable>>,
}

impl fmt::Debug for InformerSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.informers.iter().map(|i| i.description()))
            .finish()
    }
}

impl crate::controller::SyncGate for InformerSet {
    fn synced(&self) -> bool {
        self.informers.iter().all(|i| i.has_synced())
    }
    fn wait(&self) -> BoxFuture<'static, ()> {
        let set = self.clone();
        Box::pin(async move { set.wait_for_sync().await })
    }
    fn describe_unsynced(&self) -> String {
        describe_unsynced(&self.unsynced())
    }
}

impl InformerSet {
    /// Waits until every informer of the set has synced (no time limit: a kind
    /// that is not served yet may be installed later).
    pub async fn wait_for_sync(&self) {
        futures::future::join_all(self.informers.iter().map(|i| i.wait_for_sync())).await;
    }

    /// Waits until every informer of the set has synced, or fails after
    /// `timeout` naming the ones that have not.
    pub async fn wait_for_sync_within(&self, timeout: Duration) -> Result<(), CacheSyncError> {
        match tokio::time::timeout(timeout, self.wait_for_sync()).await {
            Ok(()) => Ok(()),
            Err(_) => Err(CacheSyncError {
                timeout,
                unsynced: self.unsynced(),
            }),
        }
    }

    /// The informers of the set not in sync, each with its last watch error.
    pub fn unsynced(&self) -> Vec<(String, Option<String>)> {
        self.informers
            .iter()
            .filter(|i| !i.has_synced())
            .map(|i| (i.description(), i.last_error()))
            .collect()
    }
}

/// `Pod v1 (last error: …), ConfigMap v1`: informers not in sync, as errors,
/// logs and `/readiness` name them.
pub fn describe_unsynced(unsynced: &[(String, Option<String>)]) -> String {
    unsynced
        .iter()
        .map(|(informer, error)| match error {
            Some(error) => format!("{informer} (last error: {error})"),
            None => informer.clone(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Some informers did not finish their first list in time.
#[derive(Debug, Error)]
#[error(
    "informer caches did not sync within {timeout:?}: {}; check that the kinds are served (CRDs installed) \
     and that the service account may list and watch them",
    describe_unsynced(.unsynced)
)]
pub struct CacheSyncError {
    /// How long was waited.
    pub timeout: Duration,
    /// Each informer that did not sync, with its last watch error.
    pub unsynced: Vec<(String, Option<String>)>,
}

impl ClientSource for Context {
    fn kube_client(&self) -> Client {
        self.client()
    }
}

impl Context {
    /// A context over `client` with Knative's defaults: no namespace scope and a
    /// 10 h resync period.
    pub fn new(client: Client) -> Self {
        Self::builder(client).build()
    }

    /// A builder for a context over `client`.
    pub fn builder(client: Client) -> ContextBuilder {
        ContextBuilder {
            client,
            watch_client: None,
            config: None,
            namespace: None,
            resync_period: DEFAULT_RESYNC_PERIOD,
            settings: HashMap::new(),
            extensions: HashMap::new(),
            cluster_domain: None,
            pod_name: None,
            clock: Clock::system(),
        }
    }

    /// The same process context scoped to `namespace`: namespaced informers
    /// asked for through it list and watch only there. Client, watch client,
    /// config, resync period, informer settings, extensions, the informers
    /// themselves (started, waited for and reported with every other) and
    /// the permissions recorded are shared with `self` (Knative's
    /// `injection.WithNamespaceScope`).
    pub fn in_namespace(&self, namespace: impl Into<String>) -> Context {
        Context {
            inner: self.inner.clone(),
            namespace: Some(Arc::from(namespace.into())),
        }
    }

    /// The kube client.
    pub fn client(&self) -> Client {
        self.inner.client.clone()
    }

    /// The client config, when the context was built with one.
    pub fn config(&self) -> Option<&kube::Config> {
        self.inner.config.as_ref()
    }

    /// The namespace scope, if any.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// This replica's name, when the process gave one.
    pub fn pod_name(&self) -> Option<&str> {
        self.inner.pod_name.as_deref()
    }

    /// The clock reconcilers read.
    pub fn clock(&self) -> &Clock {
        &self.inner.clock
    }

    /// The handler resync period.
    pub fn resync_period(&self) -> Duration {
        self.inner.resync_period
    }

    /// The cluster's DNS domain, for the addresses of Services
    /// (`<name>.<namespace>.svc.<domain>`): what the builder was given, else
    /// `CLUSTER_DOMAIN`, the `search` line of `/etc/resolv.conf`, or
    /// `cluster.local`, read when the context was built.
    pub fn cluster_domain(&self) -> &str {
        &self.inner.cluster_domain
    }

    /// The shared informer for `K`, created on the first request. Its cache
    /// holds what `K` holds: for `PartialObjectMeta<Service>` it lists and
    /// watches the Services' metadata alone (kube-apiserver's
    /// `PartialObjectMetadata`, client-go's metadata informers), for
    /// `Service` the whole objects, decoded (unless the builder's
    /// [`InformerSettings`] ask otherwise).
    pub fn informer<K>(&self) -> Informer<K>
    where
        K: Object<Scope: ApiScope>,
    {
        self.informer_for(None, None, None)
    }

    /// The shared informer for the objects of `K` whose labels match `selector`
    /// (Knative's filtered informers); one per kind and selector.
    pub fn filtered_informer<K>(&self, selector: &Selector) -> Informer<K>
    where
        K: Object<Scope: ApiScope>,
    {
        self.informer_for(Some(selector), None, None)
    }

    /// The shared informer for `K` that holds each object compact
    /// ([`CacheFormat::Json`]): a fraction of the decoded form's memory, with
    /// each read decoding the object. For kinds with many large objects a
    /// controller reads rarely. Distinct from [`informer`](Self::informer)'s
    /// when that one decodes: a kind asked for in both forms is cached twice.
    pub fn compact_informer<K>(&self) -> Informer<K>
    where
        K: Object<Scope: ApiScope>,
    {
        self.informer_for(None, None, Some(CacheFormat::Json))
    }

    /// [`compact_informer`](Self::compact_informer) of the objects whose
    /// labels match `selector`.
    pub fn filtered_compact_informer<K>(&self, selector: &Selector) -> Informer<K>
    where
        K: Object<Scope: ApiScope>,
    {
        self.informer_for(Some(selector), None, Some(CacheFormat::Json))
    }

    /// The shared informer for the one object of `K` named `name` (in the
    /// context's namespace, for a namespaced kind): it lists and watches with
    /// the field selector `metadata.name=<name>`, so the process needs
    /// `list` and `watch` on that object alone, and the RBAC it records is a
    /// rule with `resourceNames`. For a Secret or ConfigMap a process owns.
    pub fn named_informer<K>(&self, name: &str) -> Informer<K>
    where
        K: Object<Scope: ApiScope>,
    {
        self.informer_for(None, Some(name), None)
    }

    /// The builder's settings for `K`, in the form the caller asked for.
    fn settings_for<K: Object>(&self, cache: Option<CacheFormat>) -> InformerSettings<K> {
        let mut settings = self
            .inner
            .settings
            .get(&TypeId::of::<K>())
            .and_then(|s| s.downcast_ref::<InformerSettings<K>>())
            .cloned()
            .unwrap_or_default();
        if let Some(cache) = cache {
            settings.cache = cache;
        }
        settings
    }

    fn informer_for<K>(
        &self,
        selector: Option<&Selector>,
        name: Option<&str>,
        cache: Option<CacheFormat>,
    ) -> Informer<K>
    where
        K: Object<Scope: ApiScope>,
    {
        let type_id = TypeId::of::<K>();
        // Cluster-scoped kinds are listed whole, whatever the scope asking.
        let namespace = if <K::Scope as ApiScope>::NAMESPACED {
            self.namespace.clone()
        } else {
            None
        };
        let mut selector_key = selector.map(ToString::to_string).unwrap_or_default();
        if let Some(name) = name {
            selector_key.push_str(&format!(" metadata.name={name}"));
        }
        let settings = self.settings_for::<K>(cache);
        let mut informers = self.inner.informers.lock();
        if let Some(existing) = informers.iter().find(|r| {
            r.type_id == type_id
                && r.namespace == namespace
                && r.selector == selector_key
                && r.cache == settings.cache
        }) && let Some(informer) = existing.informer.downcast_ref::<Informer<K>>()
        {
            self.record(&existing.handle);
            return informer.clone();
        }
        let cache = settings.cache;
        let watch_client = self.inner.watch_client.clone().unwrap_or_else(|| self.client());
        let api = scoped_api::<K>(watch_client, namespace.as_deref());
        let recorder = self
            .inner
            .informer_recorder
            .get_or_init(|| match self.get::<SharedRecorder>() {
                Some(shared) => shared.0.clone(),
                None => Arc::new(KubeRecorder::new(
                    self.client(),
                    "informer",
                    self.inner.pod_name.clone(),
                )),
            })
            .clone();
        let reporting = Reporting {
            recorder: Some(recorder),
            metrics: self.get::<InformerMetrics>().map(|m| (*m).clone()),
            world: Some(self.inner.world.clone()),
        };
        match name {
            Some(name) => self.inner.permissions.lock().allow_named::<K>(
                namespace.as_deref(),
                name,
                &[Verb::List, Verb::Watch],
            ),
            None => self.needs::<K>(&[Verb::List, Verb::Watch]),
        }
        // An informer reports objects it cannot decode as Warning events.
        self.needs::<k8s_openapi::api::core::v1::Event>(&[Verb::Create, Verb::Patch]);
        let informer = Informer::new(
            api,
            namespace.as_deref(),
            selector,
            name,
            settings,
            self.inner.resync_period,
            reporting,
        );
        tracing::debug!(informer = informer.description(), "registered informer");
        let handle: Arc<dyn Startable> = Arc::new(informer.clone());
        self.record(&handle);
        informers.push(Registration {
            type_id,
            namespace,
            selector: selector_key,
            cache,
            informer: Box::new(informer.clone()),
            handle,
        });
        informer
    }

    /// Declares that this context's controllers use `verbs` on kind `K` (in the
    /// context's namespace, or everywhere): what a reconciler writes itself, since
    /// informers and the generic reconciler declare their own needs. The RBAC
    /// the application's `rbac` command writes is made of these declarations.
    pub fn needs<K: kube::Resource<DynamicType = ()>>(&self, verbs: &[Verb]) {
        self.inner.permissions.lock().allow::<K>(self.namespace(), verbs);
    }

    /// Declares that this context's controllers use `verbs` on `subresource` of `K`.
    pub fn needs_subresource<K: kube::Resource<DynamicType = ()>>(&self, subresource: &str, verbs: &[Verb]) {
        self.inner
            .permissions
            .lock()
            .allow_subresource::<K>(self.namespace(), subresource, verbs);
    }

    /// Declares `verbs` on the one object of `K` named `name` (a rule with
    /// `resourceNames`), e.g. the update of a Secret the process keeps.
    pub fn needs_named<K: kube::Resource<DynamicType = ()>>(&self, name: &str, verbs: &[Verb]) {
        self.inner
            .permissions
            .lock()
            .allow_named::<K>(self.namespace(), name, verbs);
    }

    /// Everything declared so far (see [`needs`](Self::needs)).
    pub fn permissions(&self) -> Permissions {
        self.inner.permissions.lock().clone()
    }

    fn record(&self, handle: &Arc<dyn Startable>) {
        if let Some(asked) = self.inner.recording.lock().as_mut() {
            asked.push(handle.clone());
        }
    }

    /// Runs `build` and returns, with its result, the informers it asked for
    /// (new or shared): sharedmain starts each controller once the informers
    /// its constructor asked for have synced, so one whose kind is not served
    /// yet does not hold back the others.
    pub fn recording<T>(&self, build: impl FnOnce(&Context) -> T) -> (T, InformerSet) {
        *self.inner.recording.lock() = Some(Vec::new());
        let built = build(self);
        let informers = self.inner.recording.lock().take().unwrap_or_default();
        (built, InformerSet { informers })
    }

    /// What every registered informer watches, in registration order.
    pub fn informer_descriptions(&self) -> Vec<String> {
        self.inner
            .informers
            .lock()
            .iter()
            .map(|r| r.handle.description())
            .collect()
    }

    /// Starts every registered informer that is not running yet; they stop when
    /// `shutdown` is cancelled. Informers asked for later need another call.
    pub fn start_informers(&self, shutdown: &CancellationToken) -> Vec<JoinHandle<()>> {
        // Which cluster this is, read once, so an API server that comes back
        // as another can be told apart (see `crate::world`).
        let world = self.inner.world.clone();
        tokio::spawn(async move { world.record_identity().await });
        self.inner
            .informers
            .lock()
            .iter()
            .filter_map(|r| r.handle.spawn(shutdown))
            .collect()
    }

    /// Waits until every registered informer has cached its first list, or fails
    /// after `timeout` naming the ones that have not.
    pub async fn wait_for_cache_sync(&self, timeout: Duration) -> Result<(), CacheSyncError> {
        let every = InformerSet {
            informers: self
                .inner
                .informers
                .lock()
                .iter()
                .map(|r| r.handle.clone())
                .collect(),
        };
        every.wait_for_sync_within(timeout).await
    }

    /// The informers whose cache is not (or no longer) in sync with the API
    /// server, each with its last watch error: what `/readiness` reports.
    pub fn unsynced_informers(&self) -> Vec<(String, Option<String>)> {
        self.inner
            .informers
            .lock()
            .iter()
            .filter(|r| !r.handle.has_synced())
            .map(|r| (r.handle.description(), r.handle.last_error()))
            .collect()
    }

    /// Stores a typed extension, replacing any of the same type.
    pub fn insert<T: Send + Sync + 'static>(&self, value: T) {
        self.inner
            .extensions
            .write()
            .insert(TypeId::of::<T>(), Arc::new(value));
    }

    /// A typed extension, if one of type `T` was stored.
    pub fn get<T: Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        let ext = self.inner.extensions.read().get(&TypeId::of::<T>())?.clone();
        ext.downcast::<T>().ok()
    }

    /// A typed extension, or an error naming the missing type and how to add it.
    pub fn require<T: Send + Sync + 'static>(&self) -> Result<Arc<T>, MissingExtension> {
        self.get::<T>().ok_or(MissingExtension(type_name::<T>()))
    }
}

/// A constructor asked for an extension nobody stored.
#[derive(Debug, Error)]
#[error(
    "the injection context has no {0}; add it with ContextBuilder::extension or Context::insert before the constructors run"
)]
pub struct MissingExtension(&'static str);
