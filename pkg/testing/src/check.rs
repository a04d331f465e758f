//! What a reconcile did, compared with what its row wants: the outcome,
//! the writes by kind, and the events.

use std::collections::BTreeSet;
use std::time::Duration;

use kinject_testenv::Action;
use serde_json::Value;

use crate::row::{DeleteAction, PatchAction, TableRow};

const WRITE_VERBS: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];

pub(crate) fn check(
    row: &TableRow,
    outcome: &Outcome,
    actions: &[Action],
    resource_version: &str,
) -> Vec<String> {
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
pub(crate) enum Outcome {
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

pub(crate) fn check_events(row: &TableRow, got: Vec<String>, problems: &mut Vec<String>) {
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

pub(crate) fn describe(obj: &Value) -> String {
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
