//! Server-side apply (`application/apply-patch+yaml`): structural merge of the applied
//! configuration, field ownership per Apply manager recorded in `managedFields`
//! (`FieldsV1`), removal of fields a manager stops applying, and conflicts between Apply
//! managers unless `force=true`.

use serde_json::{Map, Value, json};

use crate::errors::ErrorStatus;
use crate::registry::builtin_rules::merge_keys::{ListKind, list_kind};
use crate::registry::resource::{KindImpl, ResourceDef};
use crate::timestamps::now;

/// One step in a field path.
#[derive(Clone, Debug, PartialEq)]
enum Elem {
    Field(String),
    Key(Map<String, Value>),
    Val(Value),
}

type Path = Vec<Elem>;

/// The list kind at a path (field names only), from the CRD schema or the built-in table.
fn kind_at(def: &ResourceDef, fields: &[String]) -> ListKind {
    if fields.first().is_some_and(|f| f == "metadata") {
        // ObjectMeta is the same for every kind, custom ones included.
        return list_kind(crate::registry::resource::Builtin::ConfigMap, &fields.join("."));
    }
    match &def.imp {
        KindImpl::Builtin(b, _) => list_kind(*b, &fields.join(".")),
        KindImpl::Custom(schema) => {
            let mut s = &schema.root;
            for (i, f) in fields.iter().enumerate() {
                let next = s
                    .pointer(&format!("/properties/{f}"))
                    .or_else(|| s.get("additionalProperties").filter(|a| a.is_object()));
                let Some(n) = next else {
                    return ListKind::Atomic;
                };
                s = n;
                // A later field name belongs to the list's items.
                if i + 1 < fields.len() && s.get("type").and_then(Value::as_str) == Some("array") {
                    let Some(items) = s.get("items") else {
                        return ListKind::Atomic;
                    };
                    s = items;
                }
            }
            match s.get("x-kubernetes-list-type").and_then(Value::as_str) {
                Some("set") => ListKind::Set,
                Some("map") => ListKind::Map(
                    s.get("x-kubernetes-list-map-keys")
                        .and_then(Value::as_array)
                        .map(|ks| ks.iter().filter_map(|k| k.as_str().map(str::to_owned)).collect())
                        .unwrap_or_default(),
                ),
                _ => ListKind::Atomic,
            }
        }
    }
}

fn field_names(path: &Path) -> Vec<String> {
    path.iter()
        .filter_map(|e| match e {
            Elem::Field(f) => Some(f.clone()),
            _ => None,
        })
        .collect()
}

fn key_of(elem: &Value, keys: &[String]) -> Option<Map<String, Value>> {
    let mut m = Map::new();
    for k in keys {
        m.insert(k.clone(), elem.get(k)?.clone());
    }
    Some(m)
}

/// Fields a manager sets by applying `v`, skipping server-owned metadata.
fn fields_of(def: &ResourceDef, v: &Value, path: &mut Path, out: &mut Vec<Path>) {
    match v {
        Value::Object(m) if !m.is_empty() || path.is_empty() => {
            for (k, child) in m {
                if path.is_empty() && matches!(k.as_str(), "apiVersion" | "kind") {
                    continue;
                }
                if path.len() == 1
                    && path.first() == Some(&Elem::Field("metadata".into()))
                    && matches!(
                        k.as_str(),
                        "name"
                            | "namespace"
                            | "uid"
                            | "resourceVersion"
                            | "generation"
                            | "creationTimestamp"
                            | "managedFields"
                            | "deletionTimestamp"
                            | "deletionGracePeriodSeconds"
                    )
                {
                    continue;
                }
                path.push(Elem::Field(k.clone()));
                fields_of(def, child, path, out);
                path.pop();
            }
        }
        Value::Array(items) => match kind_at(def, &field_names(path)) {
            ListKind::Atomic => out.push(path.clone()),
            ListKind::Set => {
                for i in items {
                    path.push(Elem::Val(i.clone()));
                    out.push(path.clone());
                    path.pop();
                }
            }
            ListKind::Map(keys) => {
                for i in items {
                    let Some(k) = key_of(i, &keys) else {
                        continue;
                    };
                    path.push(Elem::Key(k));
                    out.push(path.clone());
                    fields_of(def, i, path, out);
                    path.pop();
                }
            }
        },
        _ => out.push(path.clone()),
    }
}

/// Merges the applied configuration into the live object.
fn merge(def: &ResourceDef, live: &mut Value, applied: &Value, path: &mut Vec<String>) {
    match (live, applied) {
        (Value::Object(l), Value::Object(a)) => {
            for (k, av) in a {
                path.push(k.clone());
                match l.get_mut(k) {
                    Some(lv) if !av.is_null() => merge(def, lv, av, path),
                    _ => {
                        l.insert(k.clone(), av.clone());
                    }
                }
                path.pop();
            }
        }
        (Value::Array(l), Value::Array(a)) => match kind_at(def, path) {
            ListKind::Atomic => *l = a.clone(),
            ListKind::Set => {
                for v in a {
                    if !l.contains(v) {
                        l.push(v.clone());
                    }
                }
            }
            ListKind::Map(keys) => {
                for v in a {
                    let k = key_of(v, &keys);
                    match l.iter_mut().find(|x| k.is_some() && key_of(x, &keys) == k) {
                        Some(x) => merge(def, x, v, path),
                        None => l.push(v.clone()),
                    }
                }
            }
        },
        (l, a) => *l = a.clone(),
    }
}

/// Equal as the API server compares applied values: numbers by value, so
/// `2147483647` from a JSON body and `2147483647.0` from a typed round trip
/// of the same manifest are one value, and co-owning it is no conflict.
fn same_value(a: Option<&Value>, b: Option<&Value>) -> bool {
    match (a, b) {
        (Some(Value::Number(x)), Some(Value::Number(y))) => x == y || x.as_f64() == y.as_f64(),
        (Some(Value::Array(xs)), Some(Value::Array(ys))) => {
            xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| same_value(Some(x), Some(y)))
        }
        (Some(Value::Object(xs)), Some(Value::Object(ys))) => {
            xs.len() == ys.len() && xs.iter().all(|(k, x)| same_value(Some(x), ys.get(k)))
        }
        (a, b) => a == b,
    }
}

fn get<'a>(v: &'a Value, path: &[Elem]) -> Option<&'a Value> {
    let mut cur = v;
    for e in path {
        cur = match e {
            Elem::Field(f) => cur.get(f)?,
            Elem::Key(k) => cur
                .as_array()?
                .iter()
                .find(|x| k.iter().all(|(kk, kv)| x.get(kk) == Some(kv)))?,
            Elem::Val(val) => cur.as_array()?.iter().find(|x| *x == val)?,
        };
    }
    Some(cur)
}

fn remove(v: &mut Value, path: &[Elem]) {
    let Some((last, parent)) = path.split_last() else {
        return;
    };
    let mut cur = v;
    for e in parent {
        let next = match e {
            Elem::Field(f) => cur.get_mut(f),
            Elem::Key(k) => cur.as_array_mut().and_then(|a| {
                a.iter_mut()
                    .find(|x| k.iter().all(|(kk, kv)| x.get(kk) == Some(kv)))
            }),
            Elem::Val(val) => cur.as_array_mut().and_then(|a| a.iter_mut().find(|x| *x == val)),
        };
        let Some(n) = next else {
            return;
        };
        cur = n;
    }
    match last {
        Elem::Field(f) => {
            if let Some(m) = cur.as_object_mut() {
                m.remove(f);
            }
        }
        Elem::Key(k) => {
            if let Some(a) = cur.as_array_mut() {
                a.retain(|x| !k.iter().all(|(kk, kv)| x.get(kk) == Some(kv)));
            }
        }
        Elem::Val(val) => {
            if let Some(a) = cur.as_array_mut() {
                a.retain(|x| x != val);
            }
        }
    }
}

fn elem_key(e: &Elem) -> String {
    match e {
        Elem::Field(f) => format!("f:{f}"),
        Elem::Key(k) => format!("k:{}", Value::Object(k.clone())),
        Elem::Val(v) => format!("v:{v}"),
    }
}

/// Encodes paths as `FieldsV1`.
fn to_fields_v1(paths: &[Path]) -> Value {
    let mut root = Map::new();
    for p in paths {
        let mut cur = &mut root;
        for (i, e) in p.iter().enumerate() {
            let entry = cur
                .entry(elem_key(e))
                .or_insert_with(|| Value::Object(Map::new()));
            if !entry.is_object() {
                *entry = Value::Object(Map::new());
            }
            let Value::Object(m) = entry else {
                break;
            };
            if i + 1 == p.len() && matches!(e, Elem::Key(_)) {
                m.insert(".".into(), json!({}));
            }
            cur = m;
        }
    }
    Value::Object(root)
}

/// Decodes `FieldsV1` into the owned leaf paths.
fn from_fields_v1(v: &Value, prefix: &mut Path, out: &mut Vec<Path>) {
    let Some(m) = v.as_object() else {
        return;
    };
    if (m.is_empty() || m.contains_key(".")) && !prefix.is_empty() {
        out.push(prefix.clone());
    }
    for (k, child) in m {
        let elem = if let Some(f) = k.strip_prefix("f:") {
            Elem::Field(f.to_owned())
        } else if let Some(j) = k.strip_prefix("k:") {
            match serde_json::from_str::<Value>(j) {
                Ok(Value::Object(km)) => Elem::Key(km),
                _ => continue,
            }
        } else if let Some(j) = k.strip_prefix("v:") {
            match serde_json::from_str::<Value>(j) {
                Ok(val) => Elem::Val(val),
                Err(_) => continue,
            }
        } else {
            continue;
        };
        prefix.push(elem);
        from_fields_v1(child, prefix, out);
        prefix.pop();
    }
}

/// The operation a `managedFields` entry records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Operation {
    Apply,
    Update,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Self::Apply => "Apply",
            Self::Update => "Update",
        }
    }
}

/// The `managedFields` entry of `manager`'s `operation`, owning `fields`.
fn entry(
    def: &ResourceDef,
    manager: &str,
    operation: Operation,
    fields: &[Path],
    status_only: bool,
) -> Value {
    let mut entry = json!({
        "manager": manager,
        "operation": operation.as_str(),
        "apiVersion": def.api_version(),
        "time": now(),
        "fieldsType": "FieldsV1",
        "fieldsV1": to_fields_v1(fields),
    });
    if status_only {
        entry["subresource"] = json!("status");
    }
    entry
}

/// Whether `entry` records `manager`'s `operation` on `subresource` (`""` for the
/// main resource).
fn is_entry_of(entry: &Value, manager: &str, operation: Operation, subresource: &str) -> bool {
    let field = |k: &str| entry.get(k).and_then(Value::as_str);
    field("manager") == Some(manager)
        && field("operation") == Some(operation.as_str())
        && field("subresource").unwrap_or_default() == subresource
}

/// Parses an apply body: JSON, or YAML as `kubectl apply --server-side` may send.
pub(crate) fn parse_body(body: &[u8]) -> Result<Value, ErrorStatus> {
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        return Ok(v);
    }
    let text = std::str::from_utf8(body)
        .map_err(|e| ErrorStatus::bad_request(format!("error decoding YAML: {e}")))?;
    serde_saphyr::from_str::<Value>(text)
        .map_err(|e| ErrorStatus::bad_request(format!("error decoding YAML: {e}")))
}

/// The result of applying: the merged object and its new `managedFields`.
pub(crate) struct Applied {
    pub(crate) object: Value,
    pub(crate) managed_fields: Value,
}

/// Applies `applied` for `manager` on top of `live` (`None` when creating).
pub(crate) fn apply(
    def: &ResourceDef,
    live: Option<&Value>,
    applied: &Value,
    manager: &str,
    force: bool,
    status_only: bool,
) -> Result<Applied, ErrorStatus> {
    let subresource = if status_only { "status" } else { "" };
    let mut mine = Vec::new();
    fields_of(def, applied, &mut Vec::new(), &mut mine);
    let in_scope = |p: &Path| {
        let status = p.first() == Some(&Elem::Field("status".into()));
        if status_only {
            status
        } else {
            !(def.status && status)
        }
    };
    mine.retain(in_scope);
    let entries: Vec<Value> = live
        .and_then(|l| l.pointer("/metadata/managedFields"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut previous = Vec::new();
    let mut others: Vec<(Value, Vec<Path>)> = Vec::new();
    for e in entries {
        let mut owned = Vec::new();
        if let Some(f) = e.get("fieldsV1") {
            from_fields_v1(f, &mut Vec::new(), &mut owned);
        }
        if is_entry_of(&e, manager, Operation::Apply, subresource) {
            previous = owned;
        } else {
            others.push((e, owned));
        }
    }
    let mut merged = live.cloned().unwrap_or_else(|| json!({}));
    if let Some(l) = live {
        let mut conflicts = Vec::new();
        for p in &mine {
            // A list element's identity only conflicts through its fields.
            if matches!(p.last(), Some(Elem::Key(_))) {
                continue;
            }
            let differs = !same_value(get(l, p), get(applied, p));
            for (e, owned) in &mut others {
                if owned.contains(p) && differs {
                    if force {
                        owned.retain(|o| o != p);
                    } else {
                        let who = e.get("manager").and_then(Value::as_str).unwrap_or_default();
                        conflicts.push((who.to_owned(), p.clone()));
                    }
                }
            }
        }
        if !conflicts.is_empty() {
            return Err(conflict(&conflicts));
        }
    }
    merge(def, &mut merged, applied, &mut Vec::new());
    // Fields this manager applied before and dropped now go, unless someone else owns them.
    let mut dropped: Vec<&Path> = previous
        .iter()
        .filter(|p| !mine.contains(p))
        .filter(|p| !others.iter().any(|(_, owned)| owned.contains(p)))
        .filter(|p| !mine.iter().any(|m| m.len() > p.len() && m.starts_with(p)))
        .collect();
    dropped.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for p in dropped {
        remove(&mut merged, p);
    }
    let mut managed: Vec<Value> = others
        .into_iter()
        .filter(|(_, owned)| !owned.is_empty())
        .map(|(mut e, owned)| {
            e["fieldsV1"] = to_fields_v1(&owned);
            e
        })
        .collect();
    if !mine.is_empty() {
        managed.push(entry(def, manager, Operation::Apply, &mine, status_only));
    }
    Ok(Applied {
        object: merged,
        managed_fields: Value::Array(managed),
    })
}

/// Field ownership for a write that is not an apply (create, update, non-apply patch):
/// the writer takes over every field it changed, other managers lose those fields, and
/// removed fields leave every set, as kube-apiserver's field manager records `Update`
/// operations. A write that changes no field leaves `managedFields` as they were.
pub(crate) fn track_update(
    def: &ResourceDef,
    old: Option<&Value>,
    new: &Value,
    manager: &str,
    status_only: bool,
) -> Option<Value> {
    let subresource = if status_only { "status" } else { "" };
    let in_scope = |p: &Path| {
        let status = p.first() == Some(&Elem::Field("status".into()));
        if status_only {
            status
        } else {
            !(def.status && status)
        }
    };
    let paths = |v: &Value| {
        let mut out = Vec::new();
        fields_of(def, v, &mut Vec::new(), &mut out);
        out.retain(in_scope);
        out
    };
    let now_fields = paths(new);
    let mut changed: Vec<Path> = match old {
        None => now_fields.clone(),
        Some(o) => now_fields
            .iter()
            .filter(|p| match p.last() {
                // An element changes hands when it appears, not when its fields change.
                Some(Elem::Key(_)) => get(o, p).is_none(),
                _ => get(o, p) != get(new, p),
            })
            .cloned()
            .collect(),
    };
    if let Some(o) = old {
        changed.extend(paths(o).into_iter().filter(|p| get(new, p).is_none()));
    }
    if changed.is_empty() {
        return None;
    }
    let entries: Vec<Value> = old
        .and_then(|l| l.pointer("/metadata/managedFields"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut mine: Vec<Path> = Vec::new();
    let mut managed = Vec::new();
    for mut e in entries {
        let mut owned = Vec::new();
        if let Some(f) = e.get("fieldsV1") {
            from_fields_v1(f, &mut Vec::new(), &mut owned);
        }
        if is_entry_of(&e, manager, Operation::Update, subresource) {
            mine = owned;
            continue;
        }
        owned.retain(|p| !changed.contains(p) && get(new, p).is_some());
        if !owned.is_empty() {
            e["fieldsV1"] = to_fields_v1(&owned);
            managed.push(e);
        }
    }
    for p in changed {
        if get(new, &p).is_some() && !mine.contains(&p) {
            mine.push(p);
        }
    }
    mine.retain(|p| get(new, p).is_some());
    if !mine.is_empty() {
        managed.push(entry(def, manager, Operation::Update, &mine, status_only));
    }
    Some(Value::Array(managed))
}

fn render(p: &Path) -> String {
    p.iter()
        .map(|e| match e {
            Elem::Field(f) => format!(".{f}"),
            Elem::Key(k) => {
                let parts: Vec<String> = k.iter().map(|(kk, kv)| format!("{kk}={kv}")).collect();
                format!("[{}]", parts.join(","))
            }
            Elem::Val(v) => format!("[={v}]"),
        })
        .collect()
}

fn conflict(conflicts: &[(String, Path)]) -> ErrorStatus {
    let n = conflicts.len();
    let lines: Vec<String> = conflicts
        .iter()
        .map(|(who, p)| format!("conflict with \"{who}\": {}", render(p)))
        .collect();
    let plural = if n == 1 { "conflict" } else { "conflicts" };
    let mut e = ErrorStatus::new(
        409,
        "Conflict",
        format!("Apply failed with {n} {plural}: {}", lines.join("\n")),
    );
    // apimachinery's NewApplyConflict names no resource: its details hold only the causes.
    for (who, p) in conflicts {
        e = e.with_cause(
            "FieldManagerConflict",
            &format!("conflict with \"{who}\""),
            &render(p),
        );
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_compared_by_value() {
        let int = json!({"maximum": 2_147_483_647, "items": [1, {"n": 2}]});
        let float = json!({"maximum": 2_147_483_647.0, "items": [1.0, {"n": 2.0}]});
        assert!(same_value(Some(&int), Some(&float)));
        assert!(!same_value(
            Some(&int),
            Some(&json!({"maximum": 1, "items": [1, {"n": 2}]}))
        ));
        assert!(!same_value(Some(&json!([1])), Some(&json!([1, 2]))));
        assert!(!same_value(Some(&json!({"a": 1})), None));
    }

    #[test]
    fn fields_v1_round_trip() {
        let paths = vec![
            vec![
                Elem::Field("metadata".into()),
                Elem::Field("finalizers".into()),
                Elem::Val(json!("a")),
            ],
            vec![Elem::Field("spec".into()), Elem::Field("x".into())],
        ];
        let v = to_fields_v1(&paths);
        assert_eq!(
            v,
            json!({"f:metadata": {"f:finalizers": {"v:\"a\"": {}}}, "f:spec": {"f:x": {}}})
        );
        let mut back = Vec::new();
        from_fields_v1(&v, &mut Vec::new(), &mut back);
        assert_eq!(back.len(), 2);
    }
}
