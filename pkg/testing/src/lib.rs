//! Table tests in the style of Knative's `reconciler/testing`: each row is a
//! world of objects, a key, and the writes and events the reconcile must
//! produce.
//!
//! **Where it stands.** The framework's test-support layer: it depends on
//! `kinject-runtime` and on `kinject-testenv`, the in-memory API server, and
//! nothing above. Projects take it as a dev-dependency only, so no
//! production build (and no build of the runtime itself) carries the test
//! server.
//!
//! Every row gets a fresh [`kinject_testenv::TestEnv`] (a faithful in-memory API
//! server): the CRDs are installed, the row's namespaces created, its objects
//! stored exactly as given (status, generation, finalizers and deletion
//! timestamps included), and the controller built by the row's constructor over
//! a [`Context`](kinject_runtime::injection::Context) whose informers have synced. The reconcile runs once, directly
//! (not through the work queue), as the leader unless the row says otherwise.
//! The API server's action log then gives what the reconcile wrote:
//!
//! - creates, updates, status updates and patches are compared in order; bodies
//!   as JSON, ignoring `lastTransitionTime` and, unless the expected object sets
//!   them, the fields the API server fills in (`uid`, `resourceVersion`, `generation`,
//!   `creationTimestamp`, `managedFields`); patches byte for byte;
//! - deletes and delete-collections are compared as sets;
//! - events are compared in order as `"<Type> <Reason> <Message>"`.
//!
//! Created objects are compared as the reconciler sent them: an object created
//! with `generateName` has no name in the request; the server names it
//! `<generateName>00001`, `00002`, … (Knative's generate-name reactor), which
//! later reads see. Uids are deterministic: an object seeded without one, or
//! created by the reconcile, gets [`uid_for`]`::<Kind>(namespace, name)`, so
//! an expected status or owner reference can name it.
//!
//! Input objects cannot be soiled by a reconcile: the informer cache hands out
//! decoded copies, and the rows keep their own values.
//!
//! A table of two rows for a controller that gives every ConfigMap a copy:
//!
//! ```
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kinject_runtime::controller::{Action, Error, Impl, ObjectKey, Reconciler};
//! use kinject_runtime::lister::Lister;
//! use kinject_testing::{Table, TableRow};
//! use kube::api::{Api, ObjectMeta, PostParams};
//! use serde_json::json;
//!
//! struct Copier { configmaps: Lister<ConfigMap>, client: kube::Client }
//!
//! impl Reconciler for Copier {
//!     async fn reconcile(&self, key: &ObjectKey) -> Result<Action, Error> {
//!         let Some(original) = self.configmaps.get_by_key(&key.namespace, &key.name)? else {
//!             return Ok(Action::await_change()); // gone: nothing to copy
//!         };
//!         let (name, namespace) = (Some(format!("{}-copy", key.name)), Some(key.namespace.clone()));
//!         let metadata = ObjectMeta { name, namespace, ..ObjectMeta::default() };
//!         let copy = ConfigMap { metadata, data: original.data.clone(), ..ConfigMap::default() };
//!         let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &key.namespace);
//!         api.create(&PostParams::default(), &copy).await?;
//!         Ok(Action::await_change())
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let settings = json!({"apiVersion": "v1", "kind": "ConfigMap",
//!     "metadata": {"name": "settings", "namespace": "ns"}, "data": {"mode": "fast"}});
//! let rows = vec![
//!     TableRow { name: "missing", key: "ns/gone", ..TableRow::default() },
//!     TableRow { name: "copied", objects: vec![settings], key: "ns/settings",
//!         want_creates: vec![json!({"apiVersion": "v1", "kind": "ConfigMap",
//!             "metadata": {"name": "settings-copy", "namespace": "ns"}, "data": {"mode": "fast"}})],
//!         ..TableRow::default() },
//! ];
//! Table { crds: vec![], kinds: vec![], rows }.run(&|ctx| {
//!     let copier = Copier { configmaps: ctx.informer::<ConfigMap>().lister(), client: ctx.client() };
//!     Impl::new("copier", copier, Default::default())
//! }).await;
//! # }
//! ```
#![warn(missing_docs)]

mod check;
pub mod conversion;
mod row;
mod seed;
mod table;

pub use kinject_testenv as testenv;
/// The uid a row's API server gives the object of kind `K` named `name` in
/// `namespace` (`uid_for::<Job>("ns", "nightly")`), whether the row seeds it
/// without one or the reconcile creates it: expected objects write
/// server-set uids (owner references, uids a status records) with it.
pub use kinject_testenv::uid_for;

pub use row::{DeleteAction, PatchAction, PostCondition, RowOutcome, TableRow, obj};
pub use seed::context;
pub use table::{Constructor, Table, run_row};

// docs/reference.md's examples are this crate's doctests, so the page is
// compiled and run with the APIs it names (`cargo test -p kinject-testing --doc`).
#[cfg(doctest)]
mod reference_docs;
