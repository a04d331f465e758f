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
//! a [`Context`] whose informers have synced. The reconcile runs once, directly
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

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::future::BoxFuture;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kinject_testenv::{Action, NameGenerator, Reactor, TestEnv, UidGenerator};
use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use kinject_runtime::clock::Clock;
use kinject_runtime::controller::{Impl, ObjectKey};
use kinject_runtime::events::FakeRecorder;
use kinject_runtime::injection::Context;
use kinject_runtime::leader::UniversalBucket;
use kinject_runtime::network::DEFAULT_CLUSTER_DOMAIN;
use kinject_runtime::reconciler::SharedRecorder;

pub use kinject_testenv as testenv;
/// The uid a row's API server gives the object `name` in `namespace` of
/// `resource` (`"pods"`, `"addressableservices.samples.knative.dev"`), whether
/// the row seeds it without one or the reconcile creates it: expected objects
/// write server-set uids (owner references, uids a status records) with it.
pub use kinject_testenv::uid_for;

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

/// Builds the controller under test from the row's context.
pub type Constructor<'a> = dyn Fn(&Context) -> Impl + 'a;

/// Rows plus what every row needs: the CRDs of the kinds involved.
pub struct Table {
    /// CRDs to install before each row.
    pub crds: Vec<CustomResourceDefinition>,
    /// The rows.
    pub rows: Vec<TableRow>,
}

impl fmt::Debug for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Table")
            .field("rows", &self.rows)
            .finish_non_exhaustive()
    }
}

impl Table {
    /// Runs every row and fails the test listing every row that did not hold.
    pub async fn run(self, constructor: &Constructor<'_>) {
        let mut failures = Vec::new();
        for row in &self.rows {
            if let Err(problems) = run_row(&self.crds, row, constructor).await {
                failures.push(format!("row {:?}:\n  {}", row.name, problems.join("\n  ")));
            }
        }
        assert!(
            failures.is_empty(),
            "{} of {} rows failed:\n{}",
            failures.len(),
            self.rows.len(),
            failures.join("\n")
        );
    }
}

/// Runs one row; `Err` lists what differed.
pub async fn run_row(
    crds: &[CustomResourceDefinition],
    row: &TableRow,
    constructor: &Constructor<'_>,
) -> Result<(), Vec<String>> {
    // The queue holds typed keys, so a malformed one never reaches a
    // reconciler: a row that names one is a mistake in the row.
    let key: ObjectKey = row.key.parse().map_err(|e| {
        vec![format!(
            "the row's key: {e}; a malformed key never reaches a reconciler, so no row can test one"
        )]
    })?;
    let env = TestEnv::builder()
        .name_generator(NameGenerator::Sequential(Arc::default()))
        .uid_generator(UidGenerator::deterministic())
        .build();
    let key_namespace = (!key.namespace.is_empty()).then_some(key.namespace.as_str());
    seed(&env, crds, &row.objects, key_namespace)
        .map_err(|e| vec![format!("setting up the row failed: {e}")])?;

    let recorder = Arc::new(FakeRecorder::new());
    let clock = row.now.map_or_else(Clock::system, Clock::fixed);
    let ctx = Context::builder(env.client())
        .extension(SharedRecorder(recorder.clone()))
        .cluster_domain(row.cluster_domain.unwrap_or(DEFAULT_CLUSTER_DOMAIN))
        .clock(clock)
        .build();
    let controller = constructor(&ctx);
    let shutdown = CancellationToken::new();
    ctx.start_informers(&shutdown);
    let synced = ctx.wait_for_cache_sync(Duration::from_secs(10)).await;
    let result = match synced {
        Err(e) => Err(vec![format!("informers did not sync: {e}")]),
        Ok(()) => {
            if !row.not_leader {
                controller.promote_initial(Arc::new(UniversalBucket));
            }
            for reactor in &row.reactors {
                env.react(reactor.clone());
            }
            let seeded_version = key_resource_version(&env, row);
            env.clear_actions();
            let outcome = controller.reconcile_once(&key).await;
            let actions = env.actions();
            let outcome = match outcome {
                Ok(action) => action.requeue_delay().map_or(Outcome::Done, Outcome::Requeue),
                Err(e) => Outcome::Failed(e.to_string()),
            };
            let mut problems = check(row, &outcome, &actions, &seeded_version);
            check_events(row, recorder.take(), &mut problems);
            if let Some(post) = &row.post_conditions {
                let outcome = RowOutcome {
                    env: &env,
                    ctx: &ctx,
                    controller: &controller,
                };
                if let Err(p) = post(&outcome).await {
                    problems.push(format!("post-condition: {p}"));
                }
            }
            if problems.is_empty() {
                Ok(())
            } else {
                Err(problems)
            }
        }
    };
    shutdown.cancel();
    result
}

/// A fresh API server with `crds` installed, the namespaces of `objects`
/// created and `objects` stored exactly as given (status included; any kinds, as
/// JSON), and a context over it. Keep the `TestEnv` to inspect what the code
/// under test did. Pass a generated crate's
/// `testing::custom_resource_definitions()`.
pub fn context(
    crds: &[CustomResourceDefinition],
    objects: impl IntoIterator<Item = Value>,
) -> Result<(Context, TestEnv), Box<dyn std::error::Error + Send + Sync>> {
    let env = TestEnv::builder()
        .uid_generator(UidGenerator::deterministic())
        .build();
    let objects: Vec<Value> = objects.into_iter().collect();
    seed(&env, crds, &objects, None)?;
    let ctx = Context::builder(env.client())
        .cluster_domain(DEFAULT_CLUSTER_DOMAIN)
        .build();
    Ok((ctx, env))
}

/// Installs `crds`, creates the namespaces of `objects` (and `namespace`), and
/// stores `objects` as given.
fn seed(
    env: &TestEnv,
    crds: &[CustomResourceDefinition],
    objects: &[Value],
    namespace: Option<&str>,
) -> Result<(), String> {
    for crd in crds {
        env.install_crd(crd).map_err(|e| format!("installing CRD: {e}"))?;
    }
    let namespaces: BTreeSet<String> = objects
        .iter()
        .filter_map(|o| o.pointer("/metadata/namespace").and_then(Value::as_str))
        .chain(namespace)
        .map(str::to_owned)
        .collect();
    for ns in namespaces {
        if env.get_object("", "v1", "namespaces", None, &ns).is_none() {
            env.create_object(
                serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            )
            .map_err(|e| format!("creating namespace {ns}: {e}"))?;
        }
    }
    for obj in objects {
        env.seed_object(obj.clone())
            .map_err(|e| format!("storing {}: {e}", describe(obj)))?;
    }
    Ok(())
}

const WRITE_VERBS: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];

/// The resourceVersion of the row's object named by its key, if it has one.
fn key_resource_version(env: &TestEnv, row: &TableRow) -> String {
    let (namespace, name) = row.key.split_once('/').unwrap_or(("", row.key));
    row.objects
        .iter()
        .find(|o| {
            o.pointer("/metadata/name").and_then(Value::as_str) == Some(name)
                && o.pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    == namespace
        })
        .and_then(|o| {
            let api_version = o.get("apiVersion").and_then(Value::as_str)?;
            let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
            let kind = o.get("kind").and_then(Value::as_str)?;
            let plural = env.resource_for_kind(api_version, kind)?;
            env.get_object(
                group,
                version,
                &plural,
                (!namespace.is_empty()).then_some(namespace),
                name,
            )
        })
        .and_then(|stored| {
            stored
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_default()
}

fn check(row: &TableRow, outcome: &Outcome, actions: &[Action], resource_version: &str) -> Vec<String> {
    let mut problems = Vec::new();
    check_outcome(row, outcome, &mut problems);
    let writes = Writes::sort(row, actions, &mut problems);
    compare_objects("create", &row.want_creates, &writes.creates, &mut problems);
    compare_objects("update", &row.want_updates, &writes.updates, &mut problems);
    compare_objects(
        "status update",
        &row.want_status_updates,
        &writes.status_updates,
        &mut problems,
    );
    let want_patches: Vec<PatchAction> = row
        .want_patches
        .iter()
        .map(|p| PatchAction {
            patch: p.patch.replace("{resourceVersion}", resource_version),
            ..p.clone()
        })
        .collect();
    if writes.patches != want_patches {
        problems.push(format!(
            "patches differ:\n    want {want_patches:?}\n    got  {:?}",
            writes.patches
        ));
    }
    let want_deletes: BTreeSet<DeleteAction> = row.want_deletes.iter().cloned().collect();
    if writes.deletes != want_deletes {
        problems.push(format!(
            "deletes differ:\n    want {want_deletes:?}\n    got  {:?}",
            writes.deletes
        ));
    }
    let want_collections: BTreeSet<DeleteAction> = row.want_delete_collections.iter().cloned().collect();
    if writes.delete_collections != want_collections {
        problems.push(format!(
            "delete-collections differ:\n    want {want_collections:?}\n    got  {:?}",
            writes.delete_collections
        ));
    }
    problems
}

/// Whether the reconcile failed as the row wants.
/// How the row's reconcile ended.
enum Outcome {
    Done,
    /// Asked to come back after the delay: a success, not an error.
    Requeue(Duration),
    Failed(String),
}

fn check_outcome(row: &TableRow, outcome: &Outcome, problems: &mut Vec<String>) {
    let wants_error = row.want_err || row.want_error.is_some();
    let error = match outcome {
        Outcome::Failed(e) => Some(e),
        Outcome::Done | Outcome::Requeue(_) => None,
    };
    match (error, wants_error) {
        (None, true) => problems.push("wanted an error, the reconcile succeeded".to_owned()),
        (Some(e), false) => problems.push(format!("unexpected error: {e}")),
        (Some(e), true) => {
            if let Some(want) = row.want_error.filter(|want| want != e) {
                problems.push(format!("error differs:\n    want {want}\n    got  {e}"));
            }
        }
        (None, false) => {}
    }
    if wants_error {
        return;
    }
    let requeued = match outcome {
        Outcome::Requeue(delay) => Some(*delay),
        Outcome::Done | Outcome::Failed(_) => None,
    };
    if requeued != row.want_requeue_after {
        let said = |d: Option<Duration>| {
            d.map_or_else(|| "no requeue".to_owned(), |d| format!("requeue after {d:?}"))
        };
        problems.push(format!(
            "requeue differs (want_requeue_after):\n    want {}\n    got  {}",
            said(row.want_requeue_after),
            said(requeued)
        ));
    }
}

/// The writes a reconcile made (events aside), by kind of write.
#[derive(Default)]
struct Writes {
    creates: Vec<Value>,
    updates: Vec<Value>,
    status_updates: Vec<Value>,
    patches: Vec<PatchAction>,
    deletes: BTreeSet<DeleteAction>,
    delete_collections: BTreeSet<DeleteAction>,
}

impl Writes {
    /// Sorts `actions`' writes, noting in `problems` a create or patch
    /// outside the key's namespace (unless the row skips that check) and an
    /// update of an unexpected subresource.
    fn sort(row: &TableRow, actions: &[Action], problems: &mut Vec<String>) -> Writes {
        // A cluster-scoped owner (a key without a namespace) creates and
        // patches in any namespace: a Namespace's quota, a node's pods.
        let key_namespace = row.key.split_once('/').map(|(ns, _)| ns);
        let check_namespace = !row.skip_namespace_validation && key_namespace.is_some();
        let key_namespace = key_namespace.unwrap_or_default();
        let mut in_key_namespace = |what: &str, a: &Action| {
            if check_namespace && a.namespace != key_namespace {
                problems.push(format!(
                    "{what} in namespace {:?}, want {key_namespace:?}",
                    a.namespace
                ));
            }
        };
        let mut writes = Writes::default();
        let mut unexpected = Vec::new();
        for a in actions
            .iter()
            .filter(|a| WRITE_VERBS.contains(&a.verb.as_str()) && a.resource != "events")
        {
            match (a.verb.as_str(), a.subresource.as_str()) {
                ("create", _) => {
                    in_key_namespace("create", a);
                    writes.creates.push(a.body_json().unwrap_or(Value::Null));
                }
                ("update", "") => writes.updates.push(a.body_json().unwrap_or(Value::Null)),
                ("update", "status") => writes.status_updates.push(a.body_json().unwrap_or(Value::Null)),
                ("update", other) => unexpected.push(format!("unexpected update of subresource {other:?}")),
                ("patch", _) => {
                    in_key_namespace("patch", a);
                    writes.patches.push(PatchAction {
                        namespace: a.namespace.clone(),
                        name: a.name.clone(),
                        patch: a
                            .body
                            .as_ref()
                            .map(|b| String::from_utf8_lossy(b).into_owned())
                            .unwrap_or_default(),
                    });
                }
                ("delete", _) => {
                    writes
                        .deletes
                        .insert(DeleteAction::new(&a.resource, &a.namespace, &a.name));
                }
                ("deletecollection", _) => {
                    writes
                        .delete_collections
                        .insert(DeleteAction::new(&a.resource, &a.namespace, ""));
                }
                _ => {}
            }
        }
        problems.extend(unexpected);
        writes
    }
}

fn check_events(row: &TableRow, got: Vec<String>, problems: &mut Vec<String>) {
    if got != row.want_events {
        problems.push(format!(
            "events differ:\n    want {:?}\n    got  {:?}",
            row.want_events, got
        ));
    }
}

fn compare_objects(what: &str, want: &[Value], got: &[Value], problems: &mut Vec<String>) {
    if want.len() != got.len() {
        problems.push(format!(
            "want {} {what}s, got {}:\n    got {}{}",
            want.len(),
            got.len(),
            got.iter().map(describe).collect::<Vec<_>>().join(", "),
            pasteable(got.iter().map(|g| normalize(g, None)))
        ));
    }
    for (i, (w, g)) in want.iter().zip(got).enumerate() {
        let (w, g) = (normalize(w, Some(w)), normalize(g, Some(w)));
        if w != g {
            problems.push(format!(
                "{what} #{} differs:\n    want {}\n    got  {}{}",
                i + 1,
                serde_json::to_string(&w).unwrap_or_default(),
                serde_json::to_string(&g).unwrap_or_default(),
                pasteable([g.clone()])
            ));
        }
    }
}

/// What the reconcile wrote, as `serde_json::json!` expressions to paste
/// into the row when the write is the intended one (server-set fields left
/// out, as comparisons ignore them).
fn pasteable(objects: impl IntoIterator<Item = Value>) -> String {
    let mut text = String::new();
    for object in objects {
        let pretty = serde_json::to_string_pretty(&object).unwrap_or_default();
        text.push_str("\n    to expect it, paste into the row:\n    serde_json::json!(");
        text.push_str(&pretty.replace('\n', "\n    "));
        text.push_str("),");
    }
    text
}

/// Drops what comparisons ignore: transition times always, and server-filled
/// metadata when the expectation `want` does not set it.
fn normalize(value: &Value, want: Option<&Value>) -> Value {
    let mut v = value.clone();
    strip_transition_times(&mut v);
    if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
        for field in ["uid", "resourceVersion", "creationTimestamp", "generation"] {
            let wanted = want.is_some_and(|w| w.pointer(&format!("/metadata/{field}")).is_some());
            if !wanted {
                meta.remove(field);
            }
        }
    }
    v
}

fn strip_transition_times(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.remove("lastTransitionTime");
            map.values_mut().for_each(strip_transition_times);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_transition_times),
        _ => {}
    }
}

fn describe(obj: &Value) -> String {
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("object");
    let ns = obj
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let name = obj
        .pointer("/metadata/name")
        .or_else(|| obj.pointer("/metadata/generateName"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    format!("{kind} {ns}/{name}")
}
