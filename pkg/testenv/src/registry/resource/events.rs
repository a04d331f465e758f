//! core/v1 and events.k8s.io/v1 Events are one resource seen through two versions:
//! the field conversion between them.

use serde_json::{Value, json};

/// events.k8s.io/v1 field → core/v1 field (apis/events/v1 conversion).
pub(super) const EVENT_FIELDS: &[(&str, &str)] = &[
    ("note", "message"),
    ("regarding", "involvedObject"),
    ("related", "related"),
    ("reportingController", "reportingComponent"),
    ("reportingInstance", "reportingInstance"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
    ("eventTime", "eventTime"),
    ("series", "series"),
    ("action", "action"),
    ("reason", "reason"),
    ("type", "type"),
];

pub(super) fn convert_event(v: &Value, fields: &[(&str, &str)], api_version: &str) -> Value {
    let mut out = serde_json::Map::new();
    out.insert("apiVersion".into(), json!(api_version));
    out.insert("kind".into(), json!("Event"));
    if let Some(m) = v.get("metadata") {
        out.insert("metadata".into(), m.clone());
    }
    for (from, to) in fields {
        if let Some(x) = v.get(*from).filter(|x| !x.is_null()) {
            out.insert((*to).to_owned(), x.clone());
        }
    }
    Value::Object(out)
}
