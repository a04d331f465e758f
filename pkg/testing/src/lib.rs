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
//! created by the reconcile, gets [`uid_for`]`(resource, namespace, name)`, so
//! an expected status or owner reference can name it.
//!
//! Input objects cannot be soiled by a reconcile: the informer cache hands out
//! decoded copies, and the rows keep their own values.

mod check;
mod row;
mod seed;
mod table;

pub use kinject_testenv as testenv;
/// The uid a row's API server gives the object `name` in `namespace` of
/// `resource` (`"pods"`, `"addressableservices.samples.knative.dev"`), whether
/// the row seeds it without one or the reconcile creates it: expected objects
/// write server-set uids (owner references, uids a status records) with it.
pub use kinject_testenv::uid_for;

pub use row::{DeleteAction, PatchAction, PostCondition, RowOutcome, TableRow, obj};
pub use seed::context;
pub use table::{Constructor, Table, run_row};
