//! [`TestEnv`], its [`Builder`], and the state every layer shares, behind one
//! lock that is never held across an await.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::Value;

use crate::errors::ErrorStatus;
use crate::hooks::{Action, Hooks, Reactor};
use crate::names::{NameGenerator, UidGenerator};
use crate::registry::options::WriteOpts;
use crate::registry::{self, Registry};
use crate::store::{ObjKey, Store};
use crate::timestamps;

/// Errors of the public API.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server answered with a failure `Status`, as it would over HTTP.
    #[error("{0}")]
    Api(#[from] ErrorStatus),
    /// The object handed to a direct-access method is unusable.
    #[error("invalid object: {0}")]
    InvalidObject(String),
    /// Binding the listener failed.
    #[error("failed to listen on {addr}: {source}; pick another port, or an address of this machine")]
    Bind {
        /// The address asked for.
        addr: std::net::SocketAddr,
        /// Why the listener could not be bound.
        #[source]
        source: std::io::Error,
    },
    /// Writing a kubeconfig failed.
    #[error("failed to write kubeconfig to {path}: {source}")]
    WriteKubeconfig {
        /// Where it was to be written.
        path: std::path::PathBuf,
        /// Why writing failed.
        #[source]
        source: std::io::Error,
    },
}

/// The default bound of the watch history in bytes of objects (see
/// [`Builder::watch_history_bytes`]).
pub const DEFAULT_WATCH_HISTORY_BYTES: usize = 64 << 20;

/// The default bound of what one watch buffers for its client, in bytes of
/// encoded events (see [`Builder::watch_buffer_bytes`]): room for two events
/// of the largest object etcd takes (1.5 MiB).
pub const DEFAULT_WATCH_BUFFER_BYTES: usize = 4 << 20;

/// The default byte budget of the action log (see [`Builder::action_log_bytes`]).
pub const DEFAULT_ACTION_LOG_BYTES: usize = 32 << 20;

/// What a [`TestEnv`] holds in memory besides its objects, in bytes: the
/// parts that grow with traffic, each bounded by a [`Builder`] setting.
/// Sizes are estimates (a body's length, an object's strings and a node's
/// worth per JSON value), within a small factor of the heap they keep.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct HeldBytes {
    /// The requests in the action log ([`Builder::action_log_bytes`]).
    pub action_log: usize,
    /// The objects of the watch history ([`Builder::watch_history_bytes`]).
    pub watch_history: usize,
    /// The encoded events open watches hold for their clients, all watches
    /// together ([`Builder::watch_buffer_bytes`] each).
    pub watch_buffers: usize,
}

/// Tunables, set through [`TestEnv::builder`].
#[derive(Clone, Debug)]
pub(crate) struct Config {
    pub(crate) bookmark_interval: Duration,
    pub(crate) history: usize,
    pub(crate) history_bytes: usize,
    pub(crate) action_log_bytes: usize,
    pub(crate) watch_buffer_bytes: usize,
    pub(crate) default_watch_timeout: Duration,
    pub(crate) port: u16,
    pub(crate) address: std::net::IpAddr,
}

pub(crate) struct Inner {
    pub(crate) registry: Mutex<Registry>,
    pub(crate) hooks: Mutex<Hooks>,
    pub(crate) config: Config,
    pub(crate) latency: Mutex<Duration>,
    /// Bumped by `close_watches`; every open watch ends when it changes.
    pub(crate) close_watches: tokio::sync::watch::Sender<u64>,
    /// How many upcoming watch requests get `410 Gone`.
    pub(crate) expire_watches: AtomicU64,
    /// Where Services' ports listen on this machine, for admission webhook calls.
    pub(crate) service_routes: Mutex<Vec<ServiceRoute>>,
    /// The messages of the requests refused as unauthorized, in order.
    pub(crate) denials: Mutex<Vec<String>>,
    /// The bytes every open watch buffers for its client, together.
    pub(crate) watch_buffers: Arc<AtomicUsize>,
}

/// `(namespace, name, port)` of a Service, and the local address serving it.
pub(crate) type ServiceRoute = ((String, String, u16), std::net::SocketAddr);

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Inner {
    /// The lock is never held across an await and nothing panics while holding it, so a
    /// poisoned lock still holds consistent data.
    pub(crate) fn registry(&self) -> MutexGuard<'_, Registry> {
        self.registry
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn denials(&self) -> MutexGuard<'_, Vec<String>> {
        self.denials
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn hooks(&self) -> MutexGuard<'_, Hooks> {
        self.hooks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Runs a write, then lets the optional controllers react to it before anyone else
    /// sees the store.
    /// Where Services listen now ([`TestEnv::route_service`]).
    pub(crate) fn routes(&self) -> Vec<ServiceRoute> {
        self.service_routes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn write<T>(
        &self,
        f: impl FnOnce(&mut Registry) -> Result<T, ErrorStatus>,
    ) -> Result<T, ErrorStatus> {
        let mut registry = self.registry();
        let r = f(&mut registry);
        if r.is_ok() {
            registry.settle();
        }
        r
    }

    /// Whether this watch request must be answered with `410 Gone`
    /// ([`TestEnv::expire_next_watch`]).
    pub(crate) fn take_forced_expiry(&self) -> bool {
        self.expire_watches
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }
}

/// Configures a [`TestEnv`].
#[derive(Debug, Clone)]
pub struct Builder {
    config: Config,
    names: NameGenerator,
    uids: UidGenerator,
    latency: Duration,
    namespaces: Vec<String>,
    controllers: registry::controllers::Controllers,
    converters: std::collections::BTreeMap<String, Arc<dyn crate::Converter>>,
}

impl Builder {
    /// How often an idle watch that asked for bookmarks gets one (default 1 s; kube-apiserver
    /// sends them about once a minute).
    #[must_use]
    pub fn bookmark_interval(mut self, d: Duration) -> Self {
        self.config.bookmark_interval = d;
        self
    }

    /// How many writes the watch history keeps (default 10,000). Watches and `continue`
    /// tokens from before the window get `410 Gone`, as after an etcd compaction.
    #[must_use]
    pub fn watch_history(mut self, events: usize) -> Self {
        self.config.history = events;
        self
    }

    /// How many bytes of objects the watch history keeps, besides its count
    /// (default [`DEFAULT_WATCH_HISTORY_BYTES`], 64 MiB), the writes kept for
    /// `continue` tokens and every resource's watch window together: a few
    /// updates of a large object then cost a bounded amount of memory, the
    /// oldest event leaves first whatever its resource, and older watches and
    /// `continue` tokens get `410 Gone` as after a compaction. The newest
    /// event is always kept.
    #[must_use]
    pub fn watch_history_bytes(mut self, bytes: usize) -> Self {
        self.config.history_bytes = bytes;
        self
    }

    /// How many bytes of encoded events one watch may hold for its client
    /// (default [`DEFAULT_WATCH_BUFFER_BYTES`], 4 MiB), besides its 1,000
    /// events. A live event that finds no room for 100 ms closes the watch
    /// and drops what its client had not taken, as kube-apiserver closes a
    /// watcher that does not keep up; a client such as kube's `watcher`
    /// watches again from the last revision it saw, or lists again on
    /// `410 Gone`. An event larger than the bound goes through an empty buffer.
    #[must_use]
    pub fn watch_buffer_bytes(mut self, bytes: usize) -> Self {
        self.config.watch_buffer_bytes = bytes;
        self
    }

    /// How many bytes of requests the action log ([`TestEnv::actions`]) keeps
    /// (default [`DEFAULT_ACTION_LOG_BYTES`], 32 MiB, bodies included): past
    /// it the oldest requests leave the log, and [`TestEnv::dropped_actions`]
    /// counts them. `0` records none, for a server nobody asserts on.
    /// Counters ([`TestEnv::request_count`]) and reactors see every request
    /// either way.
    ///
    /// A table test's few requests fit many times over; the bound is for a
    /// server that takes requests for as long as it runs (a local cluster,
    /// a benchmark), whose log would otherwise keep every body it was sent.
    #[must_use]
    pub fn action_log_bytes(mut self, bytes: usize) -> Self {
        self.config.action_log_bytes = bytes;
        self
    }

    /// The watch timeout when a request sets no `timeoutSeconds` (default 30 min).
    #[must_use]
    pub fn default_watch_timeout(mut self, d: Duration) -> Self {
        self.config.default_watch_timeout = d;
        self
    }

    /// How `generateName` is completed (default: random 5-char suffix).
    #[must_use]
    pub fn name_generator(mut self, g: NameGenerator) -> Self {
        self.names = g;
        self
    }

    /// How new objects get their uid (default: random, as kube-apiserver).
    /// [`UidGenerator::deterministic`] makes them predictable with [`uid_for`](crate::uid_for),
    /// for seeded objects without one too.
    #[must_use]
    pub fn uid_generator(mut self, g: UidGenerator) -> Self {
        self.uids = g;
        self
    }

    /// Latency added before every request is handled.
    #[must_use]
    pub fn latency(mut self, d: Duration) -> Self {
        self.latency = d;
        self
    }

    /// The port [`TestEnv::serve`] binds (default 0: any free port).
    #[must_use]
    pub fn port(mut self, port: u16) -> Self {
        self.config.port = port;
        self
    }

    /// The address [`TestEnv::serve`] binds (default 127.0.0.1, this machine
    /// only); `0.0.0.0` or `::` serve other machines too, and the kubeconfig
    /// then names the loopback address.
    #[must_use]
    pub fn address(mut self, address: std::net::IpAddr) -> Self {
        self.config.address = address;
        self
    }

    /// Runs a garbage collector after every write, as kube-controller-manager's would:
    /// dependents whose owners are all gone are deleted, and the `orphan` and
    /// `foregroundDeletion` finalizers are processed. Off by default: a bare
    /// kube-apiserver leaves dependents in place and those finalizers pending.
    #[must_use]
    pub fn garbage_collection(mut self, on: bool) -> Self {
        self.controllers.garbage_collector = on;
        self
    }

    /// Runs a namespace controller after every write: a Terminating namespace has its
    /// contents deleted and disappears once they are gone. Off by default: a bare
    /// kube-apiserver leaves it Terminating.
    ///
    /// As in a cluster, where the namespace controller runs apart from the API
    /// server, an emptied namespace goes on a tick of its own ([`NAMESPACE_TICK`]),
    /// not inside the delete: it stays Terminating for 0.5–1 s, and a create into
    /// it meanwhile gets 403 `NamespaceTerminating`. The tick runs on the Tokio
    /// runtime the server is built in; built outside one, the namespace goes
    /// inside the write that emptied it.
    #[must_use]
    pub fn namespace_deletion(mut self, on: bool) -> Self {
        self.controllers.namespaces = on;
        self
    }

    /// Extra namespaces that exist from the start.
    #[must_use]
    pub fn namespace(mut self, ns: &str) -> Self {
        self.namespaces.push(ns.to_owned());
        self
    }

    /// Converts the objects of the CRD named `crd` (`widgets.tutorial.example.com`)
    /// between its versions with `converter` when the CRD converts through a
    /// webhook, as the webhook would: they are stored in the storage version
    /// and every request in another version is converted (see
    /// [`Converter`](crate::Converter)).
    #[must_use]
    pub fn converter(mut self, crd: &str, converter: Arc<dyn crate::Converter>) -> Self {
        self.converters.insert(crd.to_owned(), converter);
        self
    }

    /// The server, with the built-in kinds and the namespaces asked for.
    pub fn build(self) -> TestEnv {
        let registry = Registry {
            store: Store::new(self.config.history, self.config.history_bytes),
            resources: registry::resource::builtins().into_iter().map(Arc::new).collect(),
            names: self.names,
            uids: self.uids,
            controllers: self.controllers,
            converters: self.converters,
        };
        let (close_watches, _) = tokio::sync::watch::channel(0);
        let env = TestEnv {
            inner: Arc::new(Inner {
                registry: Mutex::new(registry),
                hooks: Mutex::new(Hooks::new(self.config.action_log_bytes)),
                config: self.config,
                latency: Mutex::new(self.latency),
                close_watches,
                expire_watches: AtomicU64::new(0),
                service_routes: Mutex::new(Vec::new()),
                denials: Mutex::new(Vec::new()),
                watch_buffers: Arc::new(AtomicUsize::new(0)),
            }),
        };
        let system = ["default", "kube-system", "kube-public", "kube-node-lease"];
        for ns in system
            .iter()
            .copied()
            .chain(self.namespaces.iter().map(String::as_str))
        {
            // Creating a well-formed namespace in a fresh store cannot fail; an invalid
            // extra name is reported when it is used.
            let _ = env.create_object(serde_json::json!({
                "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}
            }));
        }
        env.inner.registry().store.start();
        if env.inner.registry().controllers.namespaces
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            env.inner.registry().controllers.namespaces_on_a_tick = true;
            runtime.spawn(finalize_namespaces_on_a_tick(Arc::downgrade(&env.inner)));
        }
        env
    }
}

/// How often the namespace controller removes the Terminating namespaces that
/// were already empty at its previous tick.
pub const NAMESPACE_TICK: Duration = Duration::from_millis(500);

/// Removes emptied namespaces every [`NAMESPACE_TICK`] for as long as the server
/// lives.
async fn finalize_namespaces_on_a_tick(server: std::sync::Weak<Inner>) {
    loop {
        tokio::time::sleep(NAMESPACE_TICK).await;
        let Some(inner) = server.upgrade() else {
            return;
        };
        inner.registry().finalize_namespaces();
    }
}

/// One in-memory API server. Cheap to clone; clones share the server.
#[derive(Clone, Debug)]
pub struct TestEnv {
    pub(crate) inner: Arc<Inner>,
}

impl Default for TestEnv {
    fn default() -> Self {
        Self::new()
    }
}

impl TestEnv {
    /// A server with the built-in kinds and the namespaces `default`, `kube-system`,
    /// `kube-public` and `kube-node-lease`.
    pub fn new() -> Self {
        Self::builder().build()
    }

    /// A [`Builder`] for a server with namespaces, objects or generators of
    /// its own.
    pub fn builder() -> Builder {
        Builder {
            config: Config {
                bookmark_interval: Duration::from_secs(1),
                history: 10_000,
                history_bytes: DEFAULT_WATCH_HISTORY_BYTES,
                action_log_bytes: DEFAULT_ACTION_LOG_BYTES,
                watch_buffer_bytes: DEFAULT_WATCH_BUFFER_BYTES,
                default_watch_timeout: Duration::from_secs(1800),
                port: 0,
                address: std::net::Ipv4Addr::LOCALHOST.into(),
            },
            names: NameGenerator::Random,
            uids: UidGenerator::Random,
            latency: Duration::ZERO,
            namespaces: Vec::new(),
            controllers: registry::controllers::Controllers::default(),
            converters: std::collections::BTreeMap::new(),
        }
    }

    fn def_for(&self, obj: &Value) -> Result<Arc<registry::resource::ResourceDef>, Error> {
        let av = obj.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
        let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
        self.inner
            .registry()
            .find_kind(av, kind)
            .ok_or_else(|| Error::InvalidObject(format!("no resource serves {av} {kind}")))
    }

    fn ns_of(obj: &Value) -> String {
        obj.pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("default")
            .to_owned()
    }

    /// The resource (plural) that serves `kind` in `api_version`, if any.
    pub fn resource_for_kind(&self, api_version: &str, kind: &str) -> Option<String> {
        self.inner
            .registry()
            .find_kind(api_version, kind)
            .map(|d| d.plural.clone())
    }

    /// Stores `obj` as given, status, generation, finalizers and deletionTimestamp
    /// included, without the rules a client's request is held to (an object being
    /// deleted without finalizers, say). Table tests use it to set up a world that
    /// requests could not reach, as client-go's object tracker does. The
    /// resourceVersion is assigned as for any write, and the watch sees an ADDED
    /// (or MODIFIED) event; `uid`, `creationTimestamp` and, for kinds with
    /// generations, `generation` are filled in when absent; a namespaced object
    /// without a namespace goes to `default`. Not recorded in the action log.
    pub fn seed_object(&self, mut obj: Value) -> Result<Value, Error> {
        let def = self.def_for(&obj)?;
        let ns = if def.namespaced {
            Self::ns_of(&obj)
        } else {
            String::new()
        };
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if name.is_empty() {
            return Err(Error::InvalidObject("a seeded object needs metadata.name".into()));
        }
        let meta = obj
            .as_object_mut()
            .ok_or_else(|| Error::InvalidObject("a seeded object must be a JSON object".into()))?
            .entry("metadata")
            .or_insert_with(|| Value::Object(Default::default()));
        let mut state = self.inner.registry();
        if let Some(meta) = meta.as_object_mut() {
            if def.namespaced {
                meta.insert("namespace".into(), Value::String(ns.clone()));
            }
            meta.remove("resourceVersion");
            if !meta.contains_key("uid") {
                let uid = state.uids.generate(&def.resource_name(), &ns, &name);
                meta.insert("uid".into(), Value::String(uid));
            }
            meta.entry("creationTimestamp")
                .or_insert_with(|| Value::String(timestamps::now()));
            if def.generation {
                meta.entry("generation").or_insert(Value::from(1));
            }
        }
        let stored = state.seed(&def, &ns, &name, obj);
        state.settle();
        Ok(stored)
    }

    /// Creates an object as `POST` would (same RV, uid, generation, events). `apiVersion`
    /// and `kind` choose the resource; a namespaced object without a namespace goes to
    /// `default`. Not recorded in the action log.
    pub fn create_object(&self, obj: Value) -> Result<Value, Error> {
        let def = self.def_for(&obj)?;
        let ns = Self::ns_of(&obj);
        let mut state = self.inner.registry();
        let w = state.create(
            &def,
            def.namespaced.then_some(ns.as_str()),
            obj,
            &WriteOpts::default(),
        )?;
        state.settle();
        Ok(w.object)
    }

    /// Creates every object of a multi-document YAML manifest, in order, as
    /// `kubectl create -f` would; documents that hold only comments are skipped.
    /// Returns the created objects. `source` names the manifest in errors.
    pub fn create_from_yaml(&self, source: &str, yaml: &str) -> Result<Vec<Value>, Error> {
        let mut created = Vec::new();
        for (number, obj) in crate::manifests::yaml_documents(source, yaml).map_err(Error::InvalidObject)? {
            created.push(self.create_object(obj).map_err(|e| match e {
                Error::InvalidObject(why) => {
                    Error::InvalidObject(format!("{source}, document {number}: {why}"))
                }
                other => other,
            })?);
        }
        Ok(created)
    }

    /// Replaces an object as `PUT` would (an empty `resourceVersion` means "whatever is
    /// current", for setup convenience).
    pub fn update_object(&self, obj: Value) -> Result<Value, Error> {
        self.put(obj, false)
    }

    /// Replaces an object's status as `PUT .../status` would.
    pub fn update_status(&self, obj: Value) -> Result<Value, Error> {
        self.put(obj, true)
    }

    fn put(&self, mut obj: Value, status: bool) -> Result<Value, Error> {
        let def = self.def_for(&obj)?;
        let ns = if def.namespaced {
            Self::ns_of(&obj)
        } else {
            String::new()
        };
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let mut state = self.inner.registry();
        let rv_missing = obj
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty);
        if rv_missing {
            let current = state
                .store
                .get(&def.key(), &ObjKey::new(&ns, &name))
                .and_then(|cur| cur.pointer("/metadata/resourceVersion").cloned());
            if let (Some(rv), Some(meta)) = (current, obj.get_mut("metadata").and_then(Value::as_object_mut))
            {
                meta.insert("resourceVersion".into(), rv);
            }
        }
        let w = state.update(&def, &ns, &name, obj, status, &WriteOpts::default())?;
        state.settle();
        Ok(w.object)
    }

    /// Deletes an object as `DELETE` would (finalizers keep it, with a deletionTimestamp).
    pub fn delete_object(
        &self,
        group: &str,
        version: &str,
        plural: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<(), Error> {
        let mut state = self.inner.registry();
        let def = state
            .find(group, version, plural)
            .ok_or_else(|| Error::Api(ErrorStatus::unknown_path()))?;
        state.delete(&def, namespace.unwrap_or_default(), name, &Default::default())?;
        state.settle();
        Ok(())
    }

    /// Installs a CRD (JSON, or a serialized `CustomResourceDefinition`) and serves its
    /// resources immediately, as `POST` of the CRD would.
    pub fn install_crd(&self, crd: impl serde::Serialize) -> Result<Value, Error> {
        let mut v = serde_json::to_value(crd).map_err(|e| Error::InvalidObject(e.to_string()))?;
        if !v.is_object() {
            return Err(Error::InvalidObject(
                "a CustomResourceDefinition must be a JSON object".into(),
            ));
        }
        if v.get("apiVersion").is_none() {
            v["apiVersion"] = Value::from("apiextensions.k8s.io/v1");
        }
        if v.get("kind").is_none() {
            v["kind"] = Value::from("CustomResourceDefinition");
        }
        self.create_object(v)
    }

    /// Reads an object (served in `version`), or `None`.
    pub fn get_object(
        &self,
        group: &str,
        version: &str,
        plural: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Value> {
        let state = self.inner.registry();
        let def = state.find(group, version, plural)?;
        state.get(&def, namespace.unwrap_or_default(), name).ok()
    }

    /// All objects of a resource (optionally one namespace), in key order.
    pub fn list_objects(
        &self,
        group: &str,
        version: &str,
        plural: &str,
        namespace: Option<&str>,
    ) -> Vec<Value> {
        let state = self.inner.registry();
        let Some(def) = state.find(group, version, plural) else {
            return Vec::new();
        };
        state
            .store
            .iter(&def.key())
            .filter(|(k, _)| namespace.is_none_or(|ns| k.namespace == ns))
            .map(|(_, o)| Registry::present(&def, o))
            .collect()
    }

    /// The requests received so far, in order (direct-access calls are not
    /// included): all of them while they fit the log's byte budget
    /// ([`Builder::action_log_bytes`]), else the newest that do.
    pub fn actions(&self) -> Vec<Action> {
        self.inner.hooks().log.actions()
    }

    /// How many requests since the last [`clear_actions`](Self::clear_actions)
    /// are missing from [`actions`](Self::actions) for want of room in the
    /// log; `0` means it holds every one.
    pub fn dropped_actions(&self) -> u64 {
        self.inner.hooks().log.dropped()
    }

    /// Forgets the requests recorded so far, so [`actions`](Self::actions)
    /// shows only what comes next.
    pub fn clear_actions(&self) {
        self.inner.hooks().log.clear();
    }

    /// The bytes held now by the parts of the server that grow with traffic.
    /// What a connection has taken from a watch's buffer but not yet written
    /// to its socket (about one event) is not counted.
    pub fn held_bytes(&self) -> HeldBytes {
        HeldBytes {
            action_log: self.inner.hooks().log.bytes(),
            watch_history: self.inner.registry().store.history_bytes(),
            watch_buffers: self.inner.watch_buffers.load(Ordering::Relaxed),
        }
    }

    /// Adds a reactor; reactors are asked in the order they were added, first match wins.
    pub fn react(&self, reactor: Reactor) {
        self.inner.hooks().reactors.push(reactor);
    }

    /// Removes every reactor: requests are served normally again.
    pub fn clear_reactors(&self) {
        self.inner.hooks().reactors.clear();
    }

    /// The messages of the requests refused so far for want of RBAC permission
    /// (`pods "x" is forbidden: User "…" cannot get resource "pods" …`), in order.
    pub fn denied_requests(&self) -> Vec<String> {
        self.inner.denials().clone()
    }

    /// Says where port `port` of Service `namespace/name` listens on this machine.
    ///
    /// kube-apiserver calls an admission webhook's `clientConfig.service` through the
    /// cluster network, which testenv has not; with a route, a webhook served by a test
    /// (or by the local cluster's webhook process) is called at `addr`, and its
    /// certificate is still checked against `<name>.<namespace>.svc`. A later route for
    /// the same port replaces the earlier one.
    ///
    /// ```
    /// let env = kinject_testenv::TestEnv::new();
    /// env.route_service("knative-samples", "webhook", 443, "127.0.0.1:8443".parse().unwrap());
    /// ```
    pub fn route_service(&self, namespace: &str, name: &str, port: u16, addr: std::net::SocketAddr) {
        let mut routes = self
            .inner
            .service_routes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = (namespace.to_owned(), name.to_owned(), port);
        routes.retain(|(k, _)| *k != key);
        routes.push((key, addr));
    }

    pub(crate) fn routes(&self) -> Vec<ServiceRoute> {
        self.inner.routes()
    }

    /// Latency added before each request is handled.
    pub fn set_latency(&self, d: Duration) {
        *self
            .inner
            .latency
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = d;
    }

    /// Ends every open watch stream (clients see a clean end of stream and re-watch).
    pub fn close_watches(&self) {
        self.inner.close_watches.send_modify(|n| *n += 1);
    }

    /// The next watch request gets `410 Gone` (an `ERROR` event carrying an `Expired`
    /// Status in a `200` stream, as the watch cache sends it).
    pub fn expire_next_watch(&self) {
        self.inner.expire_watches.fetch_add(1, Ordering::SeqCst);
    }

    /// Forgets the watch history: watches and `continue` tokens from any earlier
    /// `resourceVersion` get `410 Gone`.
    pub fn compact(&self) {
        self.inner.registry().store.compact();
    }

    /// Requests received with `verb` on `resource` (plural).
    pub fn request_count(&self, verb: &str, resource: &str) -> u64 {
        self.inner
            .hooks()
            .counts
            .get(&(verb.to_owned(), resource.to_owned()))
            .copied()
            .unwrap_or(0)
    }

    /// All counters: (verb, resource) → requests.
    pub fn request_counts(&self) -> BTreeMap<(String, String), u64> {
        self.inner.hooks().counts.clone()
    }

    /// The current (latest) resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.inner.registry().store.rv()
    }
}
