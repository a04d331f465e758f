//! A table row: the world before the reconcile, the key, and the writes,
//! events and outcome it must produce.

use std::fmt;
use std::time::{Duration, SystemTime};

use futures::future::BoxFuture;
use kinject_runtime::controller::Impl;
use kinject_runtime::injection::Context;
use kinject_testenv::{Reactor, TestEnv};
use serde::Serialize;
use serde_json::Value;

/// An object as a row's input or expectation.
pub fn obj<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or_else(|e| Value::String(format!("unserializable object: {e}")))
}

/// An expected patch: namespace, name and the exact bytes. `{resourceVersion}` in
/// the bytes stands for the resourceVersion the API server gave the key's object
/// when the row was set up (a real server assigns it, so a row cannot know it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PatchAction {
    /// Namespace of the patched object.
    pub namespace: String,
    /// Name of the patched object.
    pub name: String,
    /// The patch body, byte for byte.
    pub patch: String,
}

impl PatchAction {
    /// A patch of `namespace/name` with body `patch`.
    pub fn new(namespace: &str, name: &str, patch: &str) -> Self {
        PatchAction {
            namespace: namespace.into(),
            name: name.into(),
            patch: patch.into(),
        }
    }
}

/// An expected delete: the resource plural, namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct DeleteAction {
    /// The resource plural (`pods`).
    pub resource: String,
    /// Namespace of the deleted object.
    pub namespace: String,
    /// Name of the deleted object.
    pub name: String,
}

impl DeleteAction {
    /// A delete of `resource` `namespace/name`.
    pub fn new(resource: &str, namespace: &str, name: &str) -> Self {
        DeleteAction {
            resource: resource.into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

/// What a post-condition can look at after the reconcile.
#[derive(Debug)]
pub struct RowOutcome<'a> {
    /// The row's API server, with every write applied.
    pub env: &'a TestEnv,
    /// The context the controller was built with.
    pub ctx: &'a Context,
    /// The controller.
    pub controller: &'a Impl,
}

/// A check after the reconcile; it may wait (informers keep running).
pub type PostCondition =
    Box<dyn for<'a> Fn(&'a RowOutcome<'a>) -> BoxFuture<'a, Result<(), String>> + Send + Sync>;

/// One table row (Knative's `TableRow`).
#[derive(Default)]
pub struct TableRow {
    /// What the row shows; reported with any failure.
    pub name: &'static str,
    /// The world before the reconcile.
    pub objects: Vec<Value>,
    /// The key to reconcile (`ns/name`).
    pub key: &'static str,
    /// The reconcile must fail.
    pub want_err: bool,
    /// The reconcile must fail with exactly this error (implies `want_err`).
    pub want_error: Option<&'static str>,
    /// The reconcile must ask to come back after exactly this long
    /// (`Ok(Reconciled::requeue_after(..))`). A requeue is no failure: a row
    /// that does not expect one fails, naming the delay.
    pub want_requeue_after: Option<Duration>,
    /// The instant `ReconcileContext::now` reads in this row; `None` is the
    /// system clock. Set it for a reconciler that acts on a schedule.
    pub now: Option<SystemTime>,
    /// Objects created, in order, as sent.
    pub want_creates: Vec<Value>,
    /// Objects replaced (not through a subresource), in order.
    pub want_updates: Vec<Value>,
    /// Objects whose status was replaced, in order.
    pub want_status_updates: Vec<Value>,
    /// Patches, in order.
    pub want_patches: Vec<PatchAction>,
    /// Deletes, in any order.
    pub want_deletes: Vec<DeleteAction>,
    /// Delete-collections (resource and namespace; name empty), in any order.
    pub want_delete_collections: Vec<DeleteAction>,
    /// Events, in order.
    pub want_events: Vec<String>,
    /// Failures to induce (`Reactor::on("create", "pods")`).
    pub reactors: Vec<Reactor>,
    /// Run as a replica that leads nothing.
    pub not_leader: bool,
    /// Allow creates and patches outside the key's namespace. Rows of a
    /// cluster-scoped kind (a key without `/`) need not set it: their
    /// objects may write in any namespace.
    pub skip_namespace_validation: bool,
    /// Extra checks after the reconcile.
    pub post_conditions: Option<PostCondition>,
    /// The cluster's DNS domain in the row's context; `None` means
    /// `cluster.local`, whatever the machine running the test says.
    pub cluster_domain: Option<&'static str>,
}

impl fmt::Debug for TableRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TableRow")
            .field("name", &self.name)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}
