//! Reading and editing an object's `metadata` in its JSON, and checking it.

pub(crate) mod validation;

use serde_json::{Map, Value};

/// A string field of the object's metadata, empty when absent.
pub(crate) fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Runs `f` on the object's metadata map, creating it when absent.
pub(crate) fn with_meta<R>(obj: &mut Value, f: impl FnOnce(&mut Map<String, Value>) -> R) -> R {
    let mut meta = match obj.get_mut("metadata").map(Value::take) {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    let r = f(&mut meta);
    if let Some(o) = obj.as_object_mut() {
        o.insert("metadata".into(), Value::Object(meta));
    }
    r
}

/// The object's finalizers, in order.
pub(crate) fn finalizers(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|f| f.as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

/// Whether the object is being deleted: it has a `deletionTimestamp`.
pub(crate) fn is_deleting(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
}

pub(crate) fn has_finalizer(obj: &Value, finalizer: &str) -> bool {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|a| a.iter().any(|f| f == finalizer))
}
