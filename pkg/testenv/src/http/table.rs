//! Server-side printing (`Accept: application/json;as=Table`), which `kubectl get` uses.

use serde_json::{Value, json};

use crate::go_format::{go_float_text, go_json};
use crate::jsonpath::{Found, View};
use crate::registry::resource::{Builtin, Column, ResourceDef};

/// An object as `PartialObjectMetadata`: its metadata alone.
pub(crate) fn partial(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

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

/// apimachinery's `ObjectMeta` documentation of `name`, which kube-apiserver's CRD
/// tables give their Name column.
const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";

/// kube's `duration.HumanDuration` of the time since a timestamp.
pub(crate) fn age(ts: &str) -> String {
    ts.parse::<jiff::Timestamp>()
        .map_or_else(|_| "<unknown>".into(), since)
}

fn since(t: jiff::Timestamp) -> String {
    let nanos = jiff::Timestamp::now().as_nanosecond() - t.as_nanosecond();
    // Go's time.Since saturates at the bounds of a Duration.
    human_duration(i64::try_from(nanos).unwrap_or(if nanos < 0 { i64::MIN } else { i64::MAX }))
}

/// apimachinery's `duration.HumanDuration`.
fn human_duration(nanos: i64) -> String {
    let secs = nanos / 1_000_000_000;
    if secs < -1 {
        return "<invalid>".into();
    }
    if secs < 0 {
        return "0s".into();
    }
    let (m, h) = (nanos / 60_000_000_000, nanos / 3_600_000_000_000);
    let d = h / 24;
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
    } else if h < 24 * 365 * 2 {
        format!("{d}d")
    } else if h < 24 * 365 * 8 {
        with(d / 365, "y", d % 365, "d")
    } else {
        format!("{}y", d / 365)
    }
}

/// A `date` column's cell for a string, as kube-apiserver's CRD table convertor makes
/// it: Go's RFC 3339 parse, `<invalid>` when that fails, `<unknown>` for the zero time.
fn date_cell(text: &str) -> String {
    if text.is_empty() || text == "null" {
        return "<unknown>".into();
    }
    match parse_rfc3339(text) {
        None => "<invalid>".into(),
        // Go's zero time.Time, January 1 of year 1, UTC.
        Some(t) if t.as_nanosecond() == -62_135_596_800_000_000_000 => "<unknown>".into(),
        Some(t) => since(t),
    }
}

/// Go's `time.Parse(time.RFC3339, …)`: it takes a comma for the decimal point, reads at
/// most nine fractional digits, and wants an upper-case `T` and `Z`.
fn parse_rfc3339(text: &str) -> Option<jiff::Timestamp> {
    let b = text.as_bytes();
    let digits = |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    if b.len() < 20
        || !(digits(0..4)
            && digits(5..7)
            && digits(8..10)
            && digits(11..13)
            && digits(14..16)
            && digits(17..19))
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
        || b[17] >= b'6'
    {
        return None;
    }
    let mut rest = &text[19..];
    let mut fraction = String::new();
    if let Some(f) = rest.strip_prefix(['.', ',']) {
        let n = f.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return None;
        }
        fraction = format!(".{}", &f[..n.min(9)]);
        rest = &f[n..];
    }
    let ob = rest.as_bytes();
    let offset_ok = rest == "Z"
        || (ob.len() == 6
            && matches!(ob[0], b'+' | b'-')
            && ob[3] == b':'
            && ob[1..3].iter().chain(&ob[4..6]).all(u8::is_ascii_digit)
            && (ob[1], ob[2]) < (b'2', b'4')
            && ob[4] < b'6');
    if !offset_ok {
        return None;
    }
    format!("{}{fraction}{rest}", &text[..19]).parse().ok()
}

/// A printer column's cell, as kube-apiserver's CRD table convertor fills it.
fn custom_cell(column: &Column, obj: &Value) -> Value {
    let Some(found) = column.path.first(obj) else {
        return Value::Null;
    };
    if column.ty == "string" {
        return json!(text_of(&found));
    }
    match (column.ty.as_str(), found.view()) {
        ("integer", View::I64(i)) => json!(i),
        ("integer", View::F64(f)) => json!(go_int64(f)),
        ("number", View::I64(i)) => float_cell(i as f64),
        ("number", View::F64(f)) => float_cell(f),
        ("boolean", View::Bool(b)) => json!(b),
        ("date", View::Str(t)) => json!(date_cell(t)),
        _ => Value::Null,
    }
}

/// A value as client-go's JSONPath prints it: containers as Go's JSON, the rest as
/// Go's `fmt` prints it.
fn text_of(found: &Found<'_>) -> String {
    match (found, found.view()) {
        (_, View::Nil) => "<no value>".into(),
        (Found::Json(v), View::Map | View::Slice) => go_json(v),
        (_, View::Map | View::Slice) => String::new(),
        (_, View::Str(s)) => s.to_owned(),
        (_, View::I64(i) | View::GoInt(i)) => i.to_string(),
        (_, View::F64(f)) => go_float_text(f),
        (_, View::Bool(b)) => b.to_string(),
        (_, View::U8(u)) => u.to_string(),
    }
}

/// 2^63, the first float64 an int64 cannot hold.
const INT64_LIMIT: f64 = 9_223_372_036_854_775_808.0;

/// Go's `int64(f)` on amd64, which gives the smallest int64 for what it cannot hold.
fn go_int64(f: f64) -> i64 {
    if (-INT64_LIMIT..INT64_LIMIT).contains(&f) {
        f.trunc() as i64
    } else {
        i64::MIN
    }
}

/// A float64 cell, written as Go's JSON writes it where serde_json can: a whole number
/// without a fraction.
fn float_cell(f: f64) -> Value {
    if f.fract() == 0.0 && (-INT64_LIMIT..INT64_LIMIT).contains(&f) && !(f == 0.0 && f.is_sign_negative()) {
        json!(f as i64)
    } else {
        json!(f)
    }
}

/// A row's columns and their cells: the name, then the kind's columns (a CRD's
/// printer columns, or kube-apiserver's for a built-in kind) and its age.
fn columns_and_cells(def: &ResourceDef, obj: &Value) -> (Vec<Value>, Vec<Value>) {
    let mut cols = vec![col("Name", "string")];
    let mut cells = vec![json!(s(obj, "/metadata/name"))];
    let Some(kind) = def.builtin() else {
        cols[0]["description"] = json!(NAME_DESCRIPTION);
        for c in &def.columns {
            cols.push(json!({
                "name": c.name,
                "type": c.ty,
                "format": c.format,
                "description": c.description,
                "priority": c.priority,
            }));
            cells.push(custom_cell(c, obj));
        }
        return (cols, cells);
    };
    for (n, v) in builtin_columns(kind, def, obj) {
        cols.push(col(n, if v.is_number() { "integer" } else { "string" }));
        cells.push(v);
    }
    let created = s(obj, "/metadata/creationTimestamp");
    let created_at = kind == Builtin::Crd
        || (def.group == "rbac.authorization.k8s.io"
            && matches!(def.plural.as_str(), "roles" | "clusterroles"));
    let (n, cell) = if created_at {
        ("Created At", json!(created))
    } else {
        ("Age", json!(age(&created)))
    };
    cols.push(col(n, "date"));
    cells.push(cell);
    (cols, cells)
}

/// kube-apiserver's printer columns of a built-in kind, between Name and Age.
fn builtin_columns(kind: Builtin, def: &ResourceDef, obj: &Value) -> Vec<(&'static str, Value)> {
    match kind {
        Builtin::Namespace => vec![("Status", json!(s(obj, "/status/phase")))],
        Builtin::ConfigMap => vec![("Data", json!(count(obj, "/data") + count(obj, "/binaryData")))],
        Builtin::Secret => vec![
            ("Type", json!(s(obj, "/type"))),
            ("Data", json!(count(obj, "/data"))),
        ],
        Builtin::Service => service_columns(obj),
        Builtin::Pod => pod_columns(obj),
        Builtin::Deployment => deployment_columns(obj),
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
    }
}

fn service_columns(obj: &Value) -> Vec<(&'static str, Value)> {
    let ports = obj
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .map(|ps| {
            ps.iter()
                .map(|p| format!("{}/{}", s(p, "/port"), s(p, "/protocol")))
                .collect::<Vec<_>>()
                .join(",")
        })
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "<none>".into());
    vec![
        ("Type", json!(s(obj, "/spec/type"))),
        ("Cluster-IP", json!(s(obj, "/spec/clusterIP"))),
        ("External-IP", json!("<none>")),
        ("Port(s)", json!(ports)),
    ]
}

fn pod_columns(obj: &Value) -> Vec<(&'static str, Value)> {
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

fn deployment_columns(obj: &Value) -> Vec<(&'static str, Value)> {
    let int = |ptr: &str| obj.pointer(ptr).and_then(Value::as_i64).unwrap_or(0);
    vec![
        (
            "Ready",
            json!(format!(
                "{}/{}",
                int("/status/readyReplicas"),
                int("/spec/replicas")
            )),
        ),
        ("Up-to-date", json!(int("/status/updatedReplicas"))),
        ("Available", json!(int("/status/availableReplicas"))),
    ]
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

    fn column(ty: &str, path: &str) -> Column {
        Column {
            name: "C".into(),
            ty: ty.into(),
            format: String::new(),
            description: String::new(),
            priority: 0,
            path: crate::jsonpath::JsonPath::parse(&format!("{{{path}}}")).expect("parses"),
        }
    }

    fn obj() -> Value {
        json!({
            "metadata": {"name": "x", "creationTimestamp": "2000-01-01T00:00:00Z"},
            "spec": {"i": 3, "f": 2.7, "whole": 2.0, "b": true, "s": "text", "nul": null,
                     "m": {"z": 1, "a": "<b>"}, "l": [1, "two"], "when": "bad",
                     "zero": "0001-01-01T00:00:00Z"},
            "status": {"active": [{"name": "first"}, {"name": "second"}]}
        })
    }

    fn cell(ty: &str, path: &str) -> Value {
        custom_cell(&column(ty, path), &obj())
    }

    #[test]
    fn cells_follow_the_column_type() {
        assert_eq!(cell("string", ".status.active[*].name"), json!("first"));
        assert_eq!(cell("string", ".spec.i"), json!("3"));
        assert_eq!(cell("string", ".spec.f"), json!("2.7"));
        assert_eq!(cell("string", ".spec.b"), json!("true"));
        assert_eq!(cell("string", ".spec.m"), json!(r#"{"a":"\u003cb\u003e","z":1}"#));
        assert_eq!(cell("string", ".spec.l"), json!(r#"[1,"two"]"#));
        assert_eq!(cell("string", ".spec.nul"), json!("<no value>"));
        assert_eq!(cell("string", ".spec.missing"), Value::Null);
        assert_eq!(cell("integer", ".spec.i"), json!(3));
        assert_eq!(cell("integer", ".spec.f"), json!(2));
        assert_eq!(cell("integer", ".spec.s"), Value::Null);
        assert_eq!(cell("integer", ".spec.nul"), Value::Null);
        assert_eq!(cell("number", ".spec.i"), json!(3));
        assert_eq!(cell("number", ".spec.f"), json!(2.7));
        assert_eq!(cell("number", ".spec.whole"), json!(2));
        assert_eq!(cell("boolean", ".spec.b"), json!(true));
        assert_eq!(cell("boolean", ".spec.s"), Value::Null);
        assert_eq!(cell("date", ".spec.when"), json!("<invalid>"));
        assert_eq!(cell("date", ".spec.zero"), json!("<unknown>"));
        assert_eq!(cell("date", ".spec.i"), Value::Null);
        let age = cell("date", ".metadata.creationTimestamp");
        let age = age.as_str().expect("a string");
        let years = age.strip_suffix('y').and_then(|y| y.parse::<u32>().ok());
        assert!(years.is_some_and(|y| y >= 8), "{age}");
        // A Go int literal is no int64, so an integer column shows nothing for it.
        assert_eq!(cell("integer", "5"), Value::Null);
        assert_eq!(cell("integer", "5.5"), json!(5));
    }

    #[test]
    fn rfc3339_as_go_reads_it() {
        for ok in [
            "2024-02-29T10:00:00Z",
            "2024-02-29T10:00:00.123456789123Z",
            "2024-02-29T10:00:00,5+02:00",
            "2024-02-29T10:00:00-23:59",
        ] {
            assert!(parse_rfc3339(ok).is_some(), "{ok}");
        }
        for bad in [
            "2023-02-29T10:00:00Z",
            "2024-02-29t10:00:00Z",
            "2024-02-29T10:00:00z",
            "2024-02-29T10:00Z",
            "2024-02-29T10:00:60Z",
            "2024-02-29T24:00:00Z",
            "2024-02-29T10:00:00+24:00",
            "2024-02-29T10:00:00.Z",
            "2024-02-29 10:00:00Z",
            "2024-2-29T10:00:00Z",
        ] {
            assert!(parse_rfc3339(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn human_durations() {
        let s = 1_000_000_000_i64;
        assert_eq!(human_duration(-2 * s), "<invalid>");
        assert_eq!(human_duration(-s / 2), "0s");
        assert_eq!(human_duration(-s), "0s");
        assert_eq!(human_duration(119 * s), "119s");
        assert_eq!(human_duration(125 * s), "2m5s");
        assert_eq!(human_duration(300 * s), "5m");
        assert_eq!(human_duration(179 * 60 * s), "179m");
        assert_eq!(human_duration(3 * 3600 * s + 60 * s), "3h1m");
        assert_eq!(human_duration(47 * 3600 * s), "47h");
        assert_eq!(human_duration(50 * 3600 * s), "2d2h");
        assert_eq!(human_duration(400 * 86400 * s), "400d");
        assert_eq!(human_duration(800 * 86400 * s), "2y70d");
        assert_eq!(human_duration(i64::MAX), "292y");
    }
}
