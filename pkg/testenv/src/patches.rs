//! JSON merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge patch.

use serde_json::{Map, Value};

use crate::errors::ErrorStatus;
use crate::go_format::go_json_type;

/// The patch types kube-apiserver accepts, by `Content-Type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PatchType {
    Json,
    Merge,
    Strategic,
    Apply,
}

impl PatchType {
    pub(crate) fn from_content_type(ct: &str) -> Option<Self> {
        let base = ct.split(';').next().unwrap_or_default().trim();
        match base {
            "application/json-patch+json" => Some(Self::Json),
            "application/merge-patch+json" => Some(Self::Merge),
            "application/strategic-merge-patch+json" => Some(Self::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => Some(Self::Apply),
            _ => None,
        }
    }
}

/// Why a patch could not be applied.
#[derive(Debug)]
pub(crate) enum PatchError {
    /// The patch document itself is malformed (400).
    Decode(String),
    /// The patch is well-formed but cannot be applied (422; kube-apiserver does not pass
    /// the patch library's reason on).
    Apply,
    /// More operations than kube-apiserver takes in one JSON patch (413).
    TooManyOperations(usize),
    /// A strategic merge patch that does not fit the object: strategicpatch returns plain
    /// Go errors here, which kube-apiserver answers as a reason-less 500.
    Internal(String),
}

impl From<PatchError> for ErrorStatus {
    /// kube-apiserver's answer for a patch that failed.
    fn from(e: PatchError) -> Self {
        match e {
            PatchError::Decode(why) => Self::bad_request(why),
            PatchError::Apply => Self::unprocessable(),
            PatchError::Internal(why) => Self::new(500, "", why),
            PatchError::TooManyOperations(n) => too_many_operations(n),
        }
    }
}

/// kube-apiserver refuses JSON patches with more operations (413).
const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

fn too_many_operations(n: usize) -> ErrorStatus {
    ErrorStatus::new(
        413,
        "RequestEntityTooLarge",
        format!(
            "Request entity too large: The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {n}"
        ),
    )
}

/// Applies a JSON patch. `strict_decode` is kube-apiserver's first, typed decode of the
/// operations, done unless `fieldValidation=Ignore`; its errors say `error decoding
/// patch`. Either way, evanphx/json-patch then only needs an array of objects: an
/// operation it cannot make sense of fails when applied, as a 422.
/// Go's `UnmarshalTypeError` for a patch of the wrong shape: the handler's
/// wording when it decodes strictly, the patch library's otherwise.
fn cannot_unmarshal(v: &Value, go_type: &str, strict_decode: bool) -> PatchError {
    let prefix = if strict_decode {
        "error decoding patch: "
    } else {
        ""
    };
    PatchError::Decode(format!(
        "{prefix}json: cannot unmarshal {} into Go value of type {go_type}",
        go_json_type(v)
    ))
}

pub(crate) fn json_patch(doc: &Value, patch: &[u8], strict_decode: bool) -> Result<Value, PatchError> {
    let raw: Value = serde_json::from_slice(patch).map_err(|e| {
        PatchError::Decode(if strict_decode {
            format!("error decoding patch: {e}")
        } else {
            e.to_string()
        })
    })?;
    let items = match &raw {
        Value::Array(items) => items,
        Value::Null => return Ok(doc.clone()),
        other if strict_decode => return Err(cannot_unmarshal(other, "[]handlers.jsonPatchOp", true)),
        other => return Err(cannot_unmarshal(other, "jsonpatch.Patch", false)),
    };
    for item in items {
        match item {
            Value::Null => {}
            Value::Object(op) if strict_decode => {
                for field in ["op", "path", "from"] {
                    if let Some(v) = op.get(field).filter(|v| !v.is_string() && !v.is_null()) {
                        return Err(PatchError::Decode(format!(
                            "error decoding patch: json: cannot unmarshal {} into Go struct field jsonPatchOp.{field} of type string",
                            go_json_type(v)
                        )));
                    }
                }
            }
            Value::Object(_) => {}
            other if strict_decode => return Err(cannot_unmarshal(other, "handlers.jsonPatchOp", true)),
            other => return Err(cannot_unmarshal(other, "jsonpatch.Operation", false)),
        }
    }
    if items.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(PatchError::TooManyOperations(items.len()));
    }
    let ops: json_patch::Patch = serde_json::from_value(raw).map_err(|_| PatchError::Apply)?;
    let mut out = doc.clone();
    for op in ops.0 {
        // kube-apiserver's JSON patch (evanphx/json-patch) lets `test` of a missing
        // path against `null` pass; kube-runtime's finalizer helper relies on that.
        if let json_patch::PatchOperation::Test(t) = &op
            && t.value.is_null()
            && out.pointer(t.path.as_str()).is_none()
        {
            continue;
        }
        json_patch::patch(&mut out, std::slice::from_ref(&op)).map_err(|_| PatchError::Apply)?;
    }
    Ok(out)
}

pub(crate) fn merge_patch(doc: &Value, patch: &[u8]) -> Result<Value, PatchError> {
    let p: Value = serde_json::from_slice(patch).map_err(|e| PatchError::Decode(e.to_string()))?;
    if !p.is_object() {
        return Err(PatchError::Decode(
            "json: cannot unmarshal non-object into Go value of type map[string]interface {}".into(),
        ));
    }
    let mut out = doc.clone();
    json_patch::merge(&mut out, &p);
    Ok(out)
}

/// How a list field merges under strategic merge patch: what its type's
/// `patchStrategy` and `patchMergeKey` say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ListStrategy {
    /// Elements are matched by this key and merged.
    Key(&'static str),
    /// A list of scalars merged as a set.
    Set,
}

/// The strategy of the list at a dotted field path (no indices); `None` replaces
/// the list whole.
pub(crate) type ListStrategies<'a> = &'a dyn Fn(&str) -> Option<ListStrategy>;

/// Applies a strategic merge patch, merging lists as `lists` says.
pub(crate) fn strategic_merge_patch(
    lists: ListStrategies<'_>,
    doc: &Value,
    patch: &[u8],
) -> Result<Value, PatchError> {
    let p: Value = serde_json::from_slice(patch).map_err(|e| PatchError::Decode(e.to_string()))?;
    let Value::Object(pm) = p else {
        return Err(PatchError::Decode(
            "json: cannot unmarshal non-object into Go value of type map[string]interface {}".into(),
        ));
    };
    let mut out = doc.clone();
    match &mut out {
        Value::Object(m) => merge_map(lists, m, &pm, "")?,
        other => *other = Value::Object(strip_directives(&pm)),
    }
    Ok(out)
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn strip_directives(m: &Map<String, Value>) -> Map<String, Value> {
    m.iter()
        .filter(|(k, _)| !k.starts_with('$'))
        .map(|(k, v)| {
            let v = match v {
                Value::Object(inner) => Value::Object(strip_directives(inner)),
                other => other.clone(),
            };
            (k.clone(), v)
        })
        .collect()
}

fn merge_map(
    lists: ListStrategies<'_>,
    orig: &mut Map<String, Value>,
    patch: &Map<String, Value>,
    path: &str,
) -> Result<(), PatchError> {
    match patch.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            *orig = strip_directives(patch);
            return Ok(());
        }
        Some("delete") => {
            orig.clear();
            return Ok(());
        }
        Some(other) => {
            return Err(PatchError::Internal(format!("Unknown patch type: {other}")));
        }
        None => {}
    }
    let mut order: Vec<(String, Vec<Value>)> = Vec::new();
    for (key, pv) in patch {
        if let Some(field) = key.strip_prefix("$setElementOrder/") {
            if let Some(list) = pv.as_array() {
                order.push((field.to_owned(), list.clone()));
            }
            continue;
        }
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Some(remove)) = (orig.get_mut(field), pv.as_array()) {
                list.retain(|v| !remove.contains(v));
            }
            continue;
        }
        if key == "$retainKeys" || key.starts_with('$') {
            continue;
        }
        let child_path = join(path, key);
        if pv.is_null() {
            orig.remove(key);
            continue;
        }
        match (orig.get_mut(key), pv) {
            (Some(Value::Object(om)), Value::Object(inner)) => {
                merge_map(lists, om, inner, &child_path)?;
            }
            (Some(Value::Array(ol)), Value::Array(pl)) => {
                merge_list(lists, ol, pl, &child_path)?;
            }
            (_, Value::Object(inner)) => {
                let mut fresh = Map::new();
                merge_map(lists, &mut fresh, inner, &child_path)?;
                orig.insert(key.clone(), Value::Object(fresh));
            }
            (_, Value::Array(pl)) => {
                let mut fresh = Vec::new();
                merge_list(lists, &mut fresh, pl, &child_path)?;
                orig.insert(key.clone(), Value::Array(fresh));
            }
            (_, other) => {
                orig.insert(key.clone(), other.clone());
            }
        }
    }
    if let Some(keep) = patch.get("$retainKeys").and_then(Value::as_array) {
        orig.retain(|k, _| keep.iter().any(|r| r.as_str() == Some(k)));
    }
    for (field, wanted) in order {
        let strategy = lists(&join(path, &field));
        if let Some(Value::Array(list)) = orig.get_mut(&field) {
            reorder(list, &wanted, strategy);
        }
    }
    Ok(())
}

fn merge_list(
    lists: ListStrategies<'_>,
    orig: &mut Vec<Value>,
    patch: &[Value],
    path: &str,
) -> Result<(), PatchError> {
    match lists(path) {
        None => {
            *orig = patch
                .iter()
                .map(|v| match v {
                    Value::Object(m) => Value::Object(strip_directives(m)),
                    other => other.clone(),
                })
                .collect();
        }
        Some(ListStrategy::Set) => {
            for v in patch {
                if !orig.contains(v) {
                    orig.push(v.clone());
                }
            }
        }
        Some(ListStrategy::Key(key)) => {
            if patch
                .iter()
                .any(|p| p.get("$patch").and_then(Value::as_str) == Some("replace"))
            {
                *orig = patch
                    .iter()
                    .filter(|p| p.get("$patch").is_none())
                    .cloned()
                    .collect();
                return Ok(());
            }
            for p in patch {
                let Value::Object(pm) = p else {
                    return Err(PatchError::Internal(format!(
                        "map: {p} does not contain declared merge key: {key}"
                    )));
                };
                let Some(kv) = pm.get(key) else {
                    return Err(PatchError::Internal(format!(
                        "map: {p} does not contain declared merge key: {key}"
                    )));
                };
                let pos = orig.iter().position(|o| o.get(key) == Some(kv));
                let delete = pm.get("$patch").and_then(Value::as_str) == Some("delete");
                match (pos, delete) {
                    (Some(i), true) => {
                        orig.remove(i);
                    }
                    (None, true) => {}
                    (Some(i), false) => {
                        if let Some(Value::Object(om)) = orig.get_mut(i) {
                            merge_map(lists, om, pm, path)?;
                        }
                    }
                    (None, false) => {
                        let mut fresh = Map::new();
                        merge_map(lists, &mut fresh, pm, path)?;
                        orig.push(Value::Object(fresh));
                    }
                }
            }
        }
    }
    Ok(())
}

/// Applies `$setElementOrder`: listed elements first, in the given order; the rest after.
fn reorder(list: &mut Vec<Value>, wanted: &[Value], strategy: Option<ListStrategy>) {
    let ident = |v: &Value| -> Value {
        match strategy {
            Some(ListStrategy::Key(k)) => v.get(k).cloned().unwrap_or(Value::Null),
            _ => v.clone(),
        }
    };
    let mut rest = std::mem::take(list);
    for w in wanted {
        let id = ident(w);
        if let Some(i) = rest.iter().position(|v| ident(v) == id) {
            list.push(rest.remove(i));
        }
    }
    list.append(&mut rest);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod_lists(path: &str) -> Option<ListStrategy> {
        match path {
            "spec.containers" => Some(ListStrategy::Key("name")),
            "metadata.finalizers" => Some(ListStrategy::Set),
            _ => None,
        }
    }

    #[test]
    fn json_patch_test_of_missing_path_against_null_passes() {
        let doc = json!({"metadata": {"name": "x"}});
        let p = br#"[{"op":"test","path":"/metadata/finalizers","value":null},
                     {"op":"add","path":"/metadata/finalizers","value":["f"]}]"#;
        let out = json_patch(&doc, p, true).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["f"]));
        let bad = br#"[{"op":"test","path":"/metadata/name","value":"y"}]"#;
        assert!(matches!(json_patch(&doc, bad, true), Err(PatchError::Apply)));
    }

    #[test]
    fn strategic_merges_containers_by_name() {
        let doc = json!({"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]},
                         "metadata": {"finalizers": ["f1"]}});
        let patch = br#"{"spec":{"containers":[{"name":"b","image":"z"},{"name":"c","image":"w"}]},"metadata":{"finalizers":["f2"]}}"#;
        let out = strategic_merge_patch(&pod_lists, &doc, patch).unwrap();
        assert_eq!(out["spec"]["containers"][0]["image"], "x");
        assert_eq!(out["spec"]["containers"][1]["image"], "z");
        assert_eq!(out["spec"]["containers"][2]["name"], "c");
        assert_eq!(out["metadata"]["finalizers"], json!(["f1", "f2"]));
        let del = br#"{"spec":{"containers":[{"name":"a","$patch":"delete"}]},"$deleteFromPrimitiveList/metadata":null}"#;
        let out = strategic_merge_patch(&pod_lists, &out, del).unwrap();
        assert_eq!(out["spec"]["containers"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn strategic_delete_from_primitive_list_and_order() {
        let doc = json!({"metadata": {"finalizers": ["a", "b", "c"]}});
        let patch = br#"{"metadata":{"$deleteFromPrimitiveList/finalizers":["b"],"$setElementOrder/finalizers":["c","a"]}}"#;
        let out = strategic_merge_patch(&pod_lists, &doc, patch).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["c", "a"]));
    }
}
