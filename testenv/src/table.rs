//! Server-side printing (`Accept: application/json;as=Table`), which `kubectl get` uses.

use serde_json::{Value, json};

use crate::api::partial;
use crate::resource::{Builtin, ResourceDef};

fn col(name: &str, ty: &str) -> Value {
    let format = if name == "Name" { "name" } else { "" };
    json!({"name": name, "type": ty, "format": format, "description": "", "priority": 0})
}

fn s(v: &Value, ptr: &str) -> String {
    match v.pointer(ptr) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

fn count(v: &Value, ptr: &str) -> usize {
    match v.pointer(ptr) {
        Some(Value::Object(m)) => m.len(),
        Some(Value::Array(a)) => a.len(),
        _ => 0,
    }
}

/// kube's `duration.HumanDuration` of the time since a timestamp.
pub(crate) fn age(ts: &str) -> String {
    let Ok(t) = ts.parse::<jiff::Timestamp>() else {
        return "<unknown>".into();
    };
    let secs = jiff::Timestamp::now().as_second() - t.as_second();
    if secs < -1 {
        return "<invalid>".into();
    }
    let secs = secs.max(0);
    let (m, h, d) = (secs / 60, secs / 3600, secs / 86400);
    let with = |a: i64, ua: &str, b: i64, ub: &str| {
        if b == 0 {
            format!("{a}{ua}")
        } else {
            format!("{a}{ua}{b}{ub}")
        }
    };
    if secs < 120 {
        format!("{secs}s")
    } else if m < 10 {
        with(m, "m", secs % 60, "s")
    } else if m < 180 {
        format!("{m}m")
    } else if h < 8 {
        with(h, "h", m % 60, "m")
    } else if h < 48 {
        format!("{h}h")
    } else if h < 24 * 8 {
        with(d, "d", h % 24, "h")
    } else if d < 365 * 2 {
        format!("{d}d")
    } else if d < 365 * 8 {
        with(d / 365, "y", d % 365, "d")
    } else {
        format!("{}y", d / 365)
    }
}

/// A small JSONPath subset (`.a.b`, `[n]`, `[?(@.k=="v")]`) for printer columns.
fn json_path(v: &Value, path: &str) -> Value {
    let mut cur = v.clone();
    let mut rest = path.trim().trim_start_matches('{').trim_end_matches('}');
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            cur = cur.get(&r[..end]).cloned().unwrap_or(Value::Null);
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let Some(end) = r.find(']') else {
                return Value::Null;
            };
            let inner = &r[..end];
            rest = &r[end + 1..];
            if let Some(filter) = inner.strip_prefix("?(@.").and_then(|f| f.strip_suffix(')')) {
                let Some((k, want)) = filter.split_once("==") else {
                    return Value::Null;
                };
                let want = want.trim_matches(['"', '\'']);
                cur = cur
                    .as_array()
                    .and_then(|a| a.iter().find(|e| s(e, &format!("/{}", k.trim())) == want))
                    .cloned()
                    .unwrap_or(Value::Null);
            } else if let Ok(i) = inner.parse::<usize>() {
                cur = cur.get(i).cloned().unwrap_or(Value::Null);
            } else {
                return Value::Null;
            }
        } else {
            return Value::Null;
        }
    }
    cur
}

fn columns_and_cells(def: &ResourceDef, obj: &Value) -> (Vec<Value>, Vec<Value>) {
    let name = json!(s(obj, "/metadata/name"));
    let created = s(obj, "/metadata/creationTimestamp");
    let age_cell = json!(age(&created));
    let mut cols = vec![col("Name", "string")];
    let mut cells = vec![name];
    match def.builtin() {
        None => {
            if def.columns.is_empty() {
                cols.push(col("Age", "date"));
                cells.push(age_cell);
            }
            for (n, ty, path) in &def.columns {
                cols.push(col(n, ty));
                let v = json_path(obj, path);
                let cell = if ty == "date" {
                    json!(age(v.as_str().unwrap_or_default()))
                } else {
                    v
                };
                cells.push(cell);
            }
        }
        Some(b) => {
            let extra: Vec<(&str, Value)> = match b {
                Builtin::Namespace => vec![("Status", json!(s(obj, "/status/phase")))],
                Builtin::ConfigMap => vec![("Data", json!(count(obj, "/data") + count(obj, "/binaryData")))],
                Builtin::Secret => vec![
                    ("Type", json!(s(obj, "/type"))),
                    ("Data", json!(count(obj, "/data"))),
                ],
                Builtin::Service => vec![
                    ("Type", json!(s(obj, "/spec/type"))),
                    ("Cluster-IP", json!(s(obj, "/spec/clusterIP"))),
                    ("External-IP", json!("<none>")),
                    (
                        "Port(s)",
                        json!(
                            obj.pointer("/spec/ports")
                                .and_then(Value::as_array)
                                .map(|ps| ps
                                    .iter()
                                    .map(|p| format!("{}/{}", s(p, "/port"), s(p, "/protocol")))
                                    .collect::<Vec<_>>()
                                    .join(","))
                                .filter(|p| !p.is_empty())
                                .unwrap_or_else(|| "<none>".into())
                        ),
                    ),
                ],
                Builtin::Pod => {
                    let total = count(obj, "/spec/containers");
                    let ready = obj
                        .pointer("/status/containerStatuses")
                        .and_then(Value::as_array)
                        .map_or(0, |a| {
                            a.iter()
                                .filter(|c| c.get("ready").and_then(Value::as_bool) == Some(true))
                                .count()
                        });
                    vec![
                        ("Ready", json!(format!("{ready}/{total}"))),
                        ("Status", json!(s(obj, "/status/phase"))),
                        ("Restarts", json!(0)),
                    ]
                }
                Builtin::Deployment => vec![
                    (
                        "Ready",
                        json!(format!(
                            "{}/{}",
                            obj.pointer("/status/readyReplicas")
                                .and_then(Value::as_i64)
                                .unwrap_or(0),
                            obj.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(0)
                        )),
                    ),
                    (
                        "Up-to-date",
                        json!(
                            obj.pointer("/status/updatedReplicas")
                                .and_then(Value::as_i64)
                                .unwrap_or(0)
                        ),
                    ),
                    (
                        "Available",
                        json!(
                            obj.pointer("/status/availableReplicas")
                                .and_then(Value::as_i64)
                                .unwrap_or(0)
                        ),
                    ),
                ],
                Builtin::Lease => vec![("Holder", json!(s(obj, "/spec/holderIdentity")))],
                Builtin::PersistentVolumeClaim => claim_columns(obj),
                Builtin::Other => other_columns(def, obj),
                Builtin::Event => vec![
                    ("Type", json!(s(obj, "/type"))),
                    ("Reason", json!(s(obj, "/reason"))),
                    (
                        "Object",
                        json!(format!(
                            "{}/{}",
                            s(obj, "/involvedObject/kind").to_lowercase(),
                            s(obj, "/involvedObject/name")
                        )),
                    ),
                    ("Message", json!(s(obj, "/message"))),
                ],
                _ => vec![],
            };
            for (n, v) in extra {
                cols.push(col(n, if v.is_number() { "integer" } else { "string" }));
                cells.push(v);
            }
            let created_at = b == Builtin::Crd
                || (def.group == "rbac.authorization.k8s.io"
                    && matches!(def.plural.as_str(), "roles" | "clusterroles"));
            let (n, cell) = if created_at {
                ("Created At", json!(created))
            } else {
                ("Age", age_cell)
            };
            cols.push(col(n, "date"));
            cells.push(cell);
        }
    }
    (cols, cells)
}

/// A `meta.k8s.io/v1` Table of `objs`; rows carry PartialObjectMetadata, as kube-apiserver's
/// default `includeObject=Metadata`.
pub(crate) fn table(def: &ResourceDef, objs: &[Value], rv: Option<&str>) -> Value {
    let mut columns = None;
    let mut rows = Vec::new();
    for obj in objs {
        let (cols, cells) = columns_and_cells(def, obj);
        columns.get_or_insert(cols);
        rows.push(json!({"cells": cells, "object": partial(obj)}));
    }
    let columns = columns.unwrap_or_else(|| columns_and_cells(def, &json!({})).0);
    let mut meta = json!({});
    if let Some(rv) = rv {
        meta["resourceVersion"] = json!(rv);
    }
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": columns,
        "rows": rows,
    })
}

fn int_at(obj: &Value, ptr: &str) -> Value {
    json!(obj.pointer(ptr).and_then(Value::as_i64).unwrap_or(0))
}

/// kube-apiserver's printer columns for the common kinds that have no rules of their
/// own here, so that `kubectl get` shows what it shows against a cluster.
fn other_columns(def: &ResourceDef, obj: &Value) -> Vec<(&'static str, Value)> {
    match (def.group.as_str(), def.plural.as_str()) {
        ("apps", "replicasets") | ("", "replicationcontrollers") => vec![
            ("Desired", int_at(obj, "/spec/replicas")),
            ("Current", int_at(obj, "/status/replicas")),
            ("Ready", int_at(obj, "/status/readyReplicas")),
        ],
        ("apps", "statefulsets") => vec![(
            "Ready",
            json!(format!(
                "{}/{}",
                int_at(obj, "/status/readyReplicas"),
                int_at(obj, "/spec/replicas")
            )),
        )],
        ("apps", "daemonsets") => {
            let node_selector = obj
                .pointer("/spec/template/spec/nodeSelector")
                .and_then(Value::as_object)
                .filter(|m| !m.is_empty())
                .map_or_else(
                    || "<none>".to_owned(),
                    |m| {
                        let mut pairs: Vec<String> = m
                            .iter()
                            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                            .collect();
                        pairs.sort();
                        pairs.join(",")
                    },
                );
            vec![
                ("Desired", int_at(obj, "/status/desiredNumberScheduled")),
                ("Current", int_at(obj, "/status/currentNumberScheduled")),
                ("Ready", int_at(obj, "/status/numberReady")),
                ("Up-to-date", int_at(obj, "/status/updatedNumberScheduled")),
                ("Available", int_at(obj, "/status/numberAvailable")),
                ("Node Selector", json!(node_selector)),
            ]
        }
        ("batch", "cronjobs") => {
            let or_none = |v: String| if v.is_empty() { "<none>".to_owned() } else { v };
            let suspend = match obj.pointer("/spec/suspend").and_then(Value::as_bool) {
                Some(true) => "True",
                Some(false) => "False",
                None => "<unset>",
            };
            let last = s(obj, "/status/lastScheduleTime");
            vec![
                ("Schedule", json!(s(obj, "/spec/schedule"))),
                ("Timezone", json!(or_none(s(obj, "/spec/timeZone")))),
                ("Suspend", json!(suspend)),
                ("Active", json!(count(obj, "/status/active"))),
                (
                    "Last Schedule",
                    json!(if last.is_empty() {
                        "<none>".to_owned()
                    } else {
                        age(&last)
                    }),
                ),
            ]
        }
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => vec![(
            "Role",
            json!(format!("{}/{}", s(obj, "/roleRef/kind"), s(obj, "/roleRef/name"))),
        )],
        _ => Vec::new(),
    }
}

fn claim_columns(obj: &Value) -> Vec<(&'static str, Value)> {
    let modes = obj
        .pointer("/status/accessModes")
        .and_then(Value::as_array)
        .map(|ms| {
            ms.iter()
                .filter_map(Value::as_str)
                .map(|m| match m {
                    "ReadWriteOnce" => "RWO",
                    "ReadOnlyMany" => "ROX",
                    "ReadWriteMany" => "RWX",
                    "ReadWriteOncePod" => "RWOP",
                    other => other,
                })
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    let or_unset = |v: String| if v.is_empty() { "<unset>".to_owned() } else { v };
    vec![
        ("Status", json!(s(obj, "/status/phase"))),
        ("Volume", json!(s(obj, "/spec/volumeName"))),
        ("Capacity", json!(s(obj, "/status/capacity/storage"))),
        ("Access Modes", json!(modes)),
        ("StorageClass", json!(or_unset(s(obj, "/spec/storageClassName")))),
        (
            "VolumeAttributesClass",
            json!(or_unset(s(obj, "/spec/volumeAttributesClassName"))),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonpath_subset() {
        let v =
            json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}, "spec": {"a": [1, 2]}});
        assert_eq!(
            json_path(&v, ".status.conditions[?(@.type==\"Ready\")].status"),
            json!("True")
        );
        assert_eq!(json_path(&v, ".spec.a[1]"), json!(2));
    }
}
