//! One world per process: the API server's history as all the informers of
//! one process know it.
//!
//! When one informer learns that the server's history is not its cache's (a
//! resource version the server never reached, an event older than one
//! delivered, an object replaced without a delete, a resource that 404s
//! after it was listed), it says so here and every informer of the process
//! lists again, unsynced until done. Controllers wait for their informers
//! before each reconcile, so none writes from a cache of the old world while
//! another already shows the new one. client-go and kube-runtime leave each
//! informer to find out alone, seconds apart.
//!
//! Resource versions alone cannot tell an API server that came back empty
//! from the one that went away once the new one's history has run past the
//! old one's: a watch then resumes in the new world as if nothing happened.
//! The world's identity can. The process reads the uid of namespace
//! `kube-system` (which every cluster has, and an empty server makes anew)
//! when its informers start; when the API server answers again after it
//! could not be reached, the informers count as unsynced (so no controller
//! writes and `/readiness` answers 500) until the uid is read again: the
//! same uid, and they go on from their caches; another, or none, and every
//! informer lists again. That costs one GET per outage and no watch, and
//! goes beyond client-go and kube-runtime, which trust the resumed watch.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use parking_lot::Mutex;
use tokio::sync::watch;

/// The namespace whose uid names the cluster.
pub(crate) const IDENTITY_NAMESPACE: &str = "kube-system";

/// Unsyncs one informer; `false` once it is gone.
pub(crate) type Unsync = Box<dyn Fn() -> bool + Send + Sync>;

/// The process's view of which API server history its caches hold; cloning
/// shares it.
#[derive(Clone)]
pub(crate) struct World {
    /// Bumped on every reset; each informer's task watches it and lists again.
    epoch: Arc<watch::Sender<u64>>,
    /// Unsyncs each informer of the process at once, in the resetting call,
    /// so no controller passes its sync check between the reset and the
    /// moment each informer's task sees it.
    unsync: Arc<Mutex<Vec<Unsync>>>,
    /// Where the API server is, for the line that says it cannot be reached.
    server: Option<Arc<str>>,
    /// Set by the first informer that cannot reach the API server, cleared
    /// by the first that reaches it again: a lost server is one warning for
    /// the process, not one per informer.
    unreachable: Arc<AtomicBool>,
    /// Reads the identity; `None` for a context built without one (tests
    /// of a single informer).
    client: Option<kube::Client>,
    /// The uid of [`IDENTITY_NAMESPACE`] as first read.
    identity: Arc<Mutex<Identity>>,
    /// True while the identity is read again after an outage.
    verifying: Arc<watch::Sender<bool>>,
}

/// What the process knows of the world's identity.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Identity {
    /// Not read yet.
    Unread,
    /// The uid of [`IDENTITY_NAMESPACE`].
    Uid(String),
    /// The namespace cannot be read (absent, or not allowed): resource
    /// versions are all there is to go by.
    Unknown,
}

impl fmt::Debug for World {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("World")
            .field("epoch", &*self.epoch.borrow())
            .field("identity", &*self.identity.lock())
            .finish_non_exhaustive()
    }
}

impl World {
    /// The world of a process whose API server is at `server`, its identity
    /// read through `client`.
    pub(crate) fn new(server: Option<String>, client: Option<kube::Client>) -> Self {
        World {
            epoch: Arc::new(watch::Sender::new(0)),
            unsync: Arc::default(),
            server: server.map(Arc::from),
            unreachable: Arc::default(),
            client,
            identity: Arc::new(Mutex::new(Identity::Unread)),
            verifying: Arc::new(watch::Sender::new(false)),
        }
    }

    /// " at <url>" when the server's address is known.
    pub(crate) fn at(&self) -> String {
        self.server
            .as_deref()
            .map_or_else(String::new, |url| format!(" at {}", url.trim_end_matches('/')))
    }

    /// Adds an informer to unsync on a reset.
    pub(crate) fn join(&self, unsync: Unsync) {
        self.unsync.lock().push(unsync);
    }

    /// Every informer lists again, unsynced from now until it has.
    pub(crate) fn reset(&self) {
        self.unsync.lock().retain(|unsync| unsync());
        self.epoch.send_modify(|epoch| *epoch += 1);
    }

    /// The resets, for an informer's task to follow.
    pub(crate) fn resets(&self) -> watch::Receiver<u64> {
        self.epoch.subscribe()
    }

    /// Notes that the API server cannot be reached; true for the first
    /// informer to find it so, which says it.
    pub(crate) fn lose(&self) -> bool {
        !self.unreachable.swap(true, Ordering::SeqCst)
    }

    /// Notes that the API server answers. After an outage every informer
    /// is unsynced until the identity is read again, before the event that
    /// showed it is applied; true for the one informer that ends the outage.
    pub(crate) fn answers(&self) -> bool {
        if !self.unreachable.load(Ordering::SeqCst) {
            return false;
        }
        // Before the flag clears, so an informer that sees it clear also
        // sees the verification under way.
        self.verifying.send_replace(true);
        if !self.unreachable.swap(false, Ordering::SeqCst) {
            return false;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                let world = self.clone();
                runtime.spawn(async move { world.verify().await });
            }
            Err(_) => {
                self.verifying.send_replace(false);
            }
        }
        true
    }

    /// True while the identity is read again after an outage.
    pub(crate) fn verifying(&self) -> bool {
        *self.verifying.borrow()
    }

    /// Waits until no verification is under way.
    pub(crate) async fn verified(&self) {
        let mut rx = self.verifying.subscribe();
        let _ = rx.wait_for(|verifying| !*verifying).await;
    }

    /// Reads the identity the first time (when the informers start).
    pub(crate) async fn record_identity(&self) {
        if *self.identity.lock() != Identity::Unread {
            return;
        }
        let read = self.read_identity().await;
        let mut identity = self.identity.lock();
        if *identity == Identity::Unread {
            tracing::debug!(identity = ?read, "the API server's identity, the uid of namespace {IDENTITY_NAMESPACE}");
            *identity = read;
        }
    }

    /// Reads the identity again after an outage: the same world, and the
    /// informers go on; another, or one that cannot be told, and every
    /// informer lists again.
    async fn verify(&self) {
        let now = self.read_identity().await;
        let before = self.identity.lock().clone();
        match (&before, &now) {
            (Identity::Uid(was), Identity::Uid(is)) if was == is => {
                tracing::debug!("the API server{} is the one it was", self.at());
            }
            (Identity::Uid(was), Identity::Uid(is)) => {
                tracing::warn!(
                    "the API server{} is another cluster now: namespace {IDENTITY_NAMESPACE} has uid {is}, \
                     not {was}; every informer lists again before any controller writes",
                    self.at()
                );
                *self.identity.lock() = now.clone();
                self.reset();
            }
            _ => {
                tracing::info!(
                    "the API server{} answers again and cannot be told from another (namespace \
                     {IDENTITY_NAMESPACE} cannot be read); every informer lists again",
                    self.at()
                );
                if before == Identity::Unread {
                    *self.identity.lock() = now.clone();
                }
                self.reset();
            }
        }
        self.verifying.send_replace(false);
    }

    async fn read_identity(&self) -> Identity {
        let Some(client) = &self.client else {
            return Identity::Unknown;
        };
        match Api::<Namespace>::all(client.clone())
            .get_opt(IDENTITY_NAMESPACE)
            .await
        {
            Ok(Some(namespace)) => namespace.metadata.uid.map_or(Identity::Unknown, Identity::Uid),
            Ok(None) => Identity::Unknown,
            Err(e) => {
                tracing::debug!(error = %e, "cannot read namespace {IDENTITY_NAMESPACE}");
                Identity::Unknown
            }
        }
    }
}
