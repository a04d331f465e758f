//! JSON values as the CEL values a rule reads, typed by their schema as
//! kube-apiserver types them: an integer in a `number` field is a double,
//! `date-time` strings are timestamps, `duration` strings durations, `byte`
//! strings bytes; the fields of an object are named as CEL names them
//! (`foo-bar` is `foo__dash__bar`), the keys of a map are left as written;
//! an embedded resource always has `apiVersion`, `kind` and `metadata`.
//!
//! kube-cel does this inside its validator, which converts the whole value
//! again at every node of the schema it walks, whether a rule sits there or
//! not, and escapes field names in its own way (`a_b` as `a__b`). Rules run
//! on every write to testenv, so they are evaluated here, node by node,
//! converting each value once; this is the conversion that needs.

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine as _;
use kube_cel::cel::Value as Cel;
use kube_cel::cel::objects::{Key, Map};
use serde_json::Value;

use crate::names::escape;

/// `value` as a rule whose node has `schema` reads it (`None`: no schema,
/// inside unknown fields kept as they are).
pub(crate) fn to_cel(value: &Value, schema: Option<&Value>) -> Cel {
    let get = |key: &str| schema.and_then(|s| s.get(key));
    match value {
        Value::Null => Cel::Null,
        Value::Bool(flag) => Cel::Bool(*flag),
        Value::Number(number) => {
            if get("type").and_then(Value::as_str) == Some("number") {
                Cel::Float(number.as_f64().unwrap_or(f64::NAN))
            } else if let Some(int) = number.as_i64() {
                Cel::Int(int)
            } else if let Some(uint) = number.as_u64() {
                Cel::UInt(uint)
            } else {
                Cel::Float(number.as_f64().unwrap_or(f64::NAN))
            }
        }
        Value::String(text) => string(text, get("format").and_then(Value::as_str)),
        Value::Array(items) => {
            let item_schema = get("items");
            Cel::List(Arc::new(
                items.iter().map(|item| to_cel(item, item_schema)).collect(),
            ))
        }
        Value::Object(fields) => {
            let properties = get("properties").and_then(Value::as_object);
            let values = get("additionalProperties").filter(|a| a.is_object());
            let is_map =
                get("additionalProperties").is_some_and(|a| a.is_object() || a == &Value::Bool(true));
            let mut map = HashMap::with_capacity(fields.len() + 3);
            for (name, field) in fields {
                let field_schema = properties.and_then(|p| p.get(name)).or(values);
                let key = if is_map { name.clone() } else { escape(name) };
                map.insert(Key::String(Arc::new(key)), to_cel(field, field_schema));
            }
            if get("x-kubernetes-embedded-resource").and_then(Value::as_bool) == Some(true) {
                for (name, empty) in [
                    ("apiVersion", Cel::String(Arc::new(String::new()))),
                    ("kind", Cel::String(Arc::new(String::new()))),
                    (
                        "metadata",
                        Cel::Map(Map {
                            map: Arc::new(HashMap::new()),
                        }),
                    ),
                ] {
                    map.entry(Key::String(Arc::new(name.to_owned()))).or_insert(empty);
                }
            }
            Cel::Map(Map { map: Arc::new(map) })
        }
    }
}

/// A whole object as a rule at the root reads it: its fields, with only the
/// `name` and `generateName` of its metadata, as kube-apiserver gives them.
pub(crate) fn root_to_cel(object: &Value, schema: &Value) -> Cel {
    let Value::Object(fields) = object else {
        return to_cel(object, Some(schema));
    };
    let properties = schema.get("properties").and_then(Value::as_object);
    let mut map = HashMap::with_capacity(fields.len());
    for (name, field) in fields {
        let value = if name == "metadata" {
            let mut kept = HashMap::new();
            for key in ["name", "generateName"] {
                if let Some(Value::String(text)) = field.get(key) {
                    kept.insert(
                        Key::String(Arc::new(key.to_owned())),
                        Cel::String(Arc::new(text.clone())),
                    );
                }
            }
            Cel::Map(Map { map: Arc::new(kept) })
        } else {
            to_cel(field, properties.and_then(|p| p.get(name)))
        };
        map.insert(Key::String(Arc::new(escape(name))), value);
    }
    Cel::Map(Map { map: Arc::new(map) })
}

fn string(text: &str, format: Option<&str>) -> Cel {
    let typed = match format {
        Some("date-time") => chrono::DateTime::parse_from_rfc3339(text)
            .ok()
            .map(Cel::Timestamp),
        Some("duration") => go_duration(text).map(Cel::Duration),
        Some("byte") => base64::engine::general_purpose::STANDARD
            .decode(text)
            .ok()
            .map(|bytes| Cel::Bytes(Arc::new(bytes))),
        _ => None,
    };
    typed.unwrap_or_else(|| Cel::String(Arc::new(text.to_owned())))
}

/// Go's `time.ParseDuration`: `1h30m`, `-2.5s`, `300ms`, `0`.
fn go_duration(text: &str) -> Option<chrono::Duration> {
    let (negative, mut rest) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    if rest == "0" {
        return Some(chrono::Duration::zero());
    }
    let mut nanos: f64 = 0.0;
    while !rest.is_empty() {
        let number_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let number: f64 = rest[..number_end].parse().ok()?;
        rest = &rest[number_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_end] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        nanos += number * scale;
        rest = &rest[unit_end..];
    }
    let nanos = if negative { -nanos } else { nanos };
    Some(chrono::Duration::nanoseconds(nanos as i64))
}

#[cfg(test)]
mod tests {
    use kube_cel::cel::Value as Cel;
    use kube_cel::cel::objects::Key;
    use serde_json::json;

    use super::{go_duration, to_cel};

    #[test]
    fn values_are_typed_by_their_schema_as_kube_apiserver_types_them() {
        let schema = json!({"type": "object", "properties": {
            "ratio": {"type": "number"},
            "at": {"type": "string", "format": "date-time"},
            "every": {"type": "string", "format": "duration"},
            "data": {"type": "string", "format": "byte"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        }});
        let value = json!({"ratio": 1, "at": "2026-01-02T03:04:05Z", "every": "1m30s", "data": "aGk=",
                           "labels": {"app.kubernetes.io/name": "x"}, "foo-bar": 1, "in": 2});
        let Cel::Map(map) = to_cel(&value, Some(&schema)) else {
            unreachable!("an object is a map");
        };
        let key = |name: &str| Key::String(std::sync::Arc::new(name.to_owned()));
        let get = |name: &str| map.map.get(&key(name)).cloned();
        assert_eq!(get("ratio"), Some(Cel::Float(1.0)));
        assert!(matches!(get("at"), Some(Cel::Timestamp(_))));
        assert_eq!(get("every"), Some(Cel::Duration(chrono::Duration::seconds(90))));
        assert_eq!(get("data"), Some(Cel::Bytes(b"hi".to_vec().into())));
        assert_eq!(get("foo__dash__bar"), Some(Cel::Int(1)));
        assert_eq!(get("__in__"), Some(Cel::Int(2)));
        let Some(Cel::Map(labels)) = get("labels") else {
            unreachable!("labels is a map");
        };
        assert!(labels.map.contains_key(&key("app.kubernetes.io/name")));
    }

    #[test]
    fn durations_read_as_go_writes_them() {
        assert_eq!(go_duration("1h30m"), Some(chrono::Duration::minutes(90)));
        assert_eq!(go_duration("-2.5s"), Some(chrono::Duration::milliseconds(-2500)));
        assert_eq!(go_duration("300ms"), Some(chrono::Duration::milliseconds(300)));
        assert_eq!(go_duration("0"), Some(chrono::Duration::zero()));
        assert_eq!(go_duration("5"), None);
        assert_eq!(go_duration("1d"), None);
    }
}
