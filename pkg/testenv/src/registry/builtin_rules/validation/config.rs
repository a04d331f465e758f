//! ConfigMap and Secret keys (files in the volumes they are mounted as) and
//! ResourceQuota amounts (`ValidateConfigMap`, `ValidateSecret`,
//! `ValidateResourceQuotaSpec`).

use kinject_types::validation::is_config_map_key;
use serde_json::{Value, json};

use crate::errors::FieldError;

/// Every key of `data` (and of a ConfigMap's `binaryData`) must be a valid file name,
/// and a ConfigMap may not have one key in both.
pub(super) fn data_keys(config_map: bool, obj: &Value, errs: &mut Vec<FieldError>) {
    let keys = |field: &str| -> Vec<String> {
        obj.get(field)
            .and_then(Value::as_object)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    };
    let binary = if config_map {
        keys("binaryData")
    } else {
        Vec::new()
    };
    for key in keys("data") {
        for msg in is_config_map_key(&key) {
            errs.push(FieldError::invalid(format!("data[{key}]"), json!(key), msg));
        }
        if binary.contains(&key) {
            errs.push(FieldError::invalid(
                format!("data[{key}]"),
                json!(key),
                "duplicate of key present in binaryData",
            ));
        }
    }
    for key in binary {
        for msg in is_config_map_key(&key) {
            errs.push(FieldError::invalid(format!("binaryData[{key}]"), json!(key), msg));
        }
    }
}

/// Whether a quantity is below zero: its sign, as `resource.Quantity` parses it.
fn negative(q: &str) -> bool {
    q.trim_start().starts_with('-')
        && q.trim_start_matches('-')
            .chars()
            .any(|c| c.is_ascii_digit() && c != '0')
}

/// Quota amounts (`spec.hard`) may not be negative, and resources counted in whole
/// objects take whole numbers.
pub(super) fn resource_quota(obj: &Value, errs: &mut Vec<FieldError>) {
    let Some(hard) = obj.pointer("/spec/hard").and_then(Value::as_object) else {
        return;
    };
    for (name, q) in hard {
        let text = match q {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let at = format!("spec.hard[{name}]");
        if negative(&text) {
            errs.push(FieldError::invalid(
                &at,
                json!(text),
                "must be greater than or equal to 0",
            ));
        }
        if integer_resource(name) && !whole(&text) {
            errs.push(FieldError::invalid(&at, json!(text), "must be an integer"));
        }
    }
}

/// `IsIntegerResourceName`: counts of objects.
fn integer_resource(name: &str) -> bool {
    name.starts_with("count/")
        || matches!(
            name,
            "pods"
                | "services"
                | "replicationcontrollers"
                | "resourcequotas"
                | "secrets"
                | "configmaps"
                | "persistentvolumeclaims"
                | "services.nodeports"
                | "services.loadbalancers"
        )
}

/// Whether a quantity is a whole number: no fraction and no milli or smaller suffix.
fn whole(q: &str) -> bool {
    let q = q.trim();
    let digits_end = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(q.len());
    let (number, suffix) = q.split_at(digits_end);
    let fraction_zero = number
        .split_once('.')
        .is_none_or(|(_, f)| f.chars().all(|c| c == '0'));
    fraction_zero && !matches!(suffix, "m" | "u" | "n")
}
