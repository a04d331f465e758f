//! apps/v1 Deployments and ReplicaSets, and batch/v1 Jobs: the selector their pods are
//! found by, the restart policy their pod templates may have, and what an update may
//! not change (`ValidateReplicaSetSpec`, `ValidateJobSpec` and their updates).

use serde_json::{Value, json};

use super::pod::pod_spec;
use crate::errors::FieldError;
use crate::selector::label_selector_matches;

/// Go's `%#v` of a string map, as field errors print template labels.
fn labels_render(m: &serde_json::Map<String, Value>) -> String {
    let inner: Vec<String> = m
        .iter()
        .map(|(k, v)| format!("{k:?}:{:?}", v.as_str().unwrap_or_default()))
        .collect();
    format!("map[string]string{{{}}}", inner.join(", "))
}

/// Go's `%#v` of a `metav1.LabelSelector`, the value an immutable-selector error shows.
fn selector_render(sel: &Value) -> String {
    let labels = sel
        .get("matchLabels")
        .and_then(Value::as_object)
        .map_or_else(|| "map[string]string(nil)".to_owned(), labels_render);
    let exprs = match sel.get("matchExpressions").and_then(Value::as_array) {
        None => "[]v1.LabelSelectorRequirement(nil)".to_owned(),
        Some(list) => {
            let items: Vec<String> = list
                .iter()
                .map(|e| {
                    let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
                    let values: Vec<String> = e
                        .get("values")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .map(|v| format!("{:?}", v.as_str().unwrap_or_default()))
                        .collect();
                    format!(
                        "v1.LabelSelectorRequirement{{Key:{:?}, Operator:{:?}, Values:[]string{{{}}}}}",
                        s("key"),
                        s("operator"),
                        values.join(", ")
                    )
                })
                .collect();
            format!("[]v1.LabelSelectorRequirement{{{}}}", items.join(", "))
        }
    };
    format!("v1.LabelSelector{{MatchLabels:{labels}, MatchExpressions:{exprs}}}")
}

/// The selector of a Deployment or ReplicaSet: not empty, matching the template's
/// labels, and (in apps/v1) never changed by an update.
pub(super) fn selector(spec: &Value, sel: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    let empty = sel
        .get("matchLabels")
        .and_then(Value::as_object)
        .is_none_or(|m| m.is_empty())
        && sel
            .get("matchExpressions")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
    if empty {
        // kube-apiserver says "deployment" for ReplicaSets too.
        errs.push(FieldError::invalid(
            "spec.selector",
            json!("empty"),
            "empty selector is invalid for deployment",
        ));
    }
    let labels = spec
        .pointer("/template/metadata/labels")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    if !empty && !label_selector_matches(sel, &labels) {
        errs.push(FieldError::invalid_raw(
            "spec.template.metadata.labels",
            labels_render(&labels),
            "`selector` does not match template `labels`",
        ));
    }
    immutable_selector(sel, old, errs);
}

fn immutable_selector(sel: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    if let Some(old_sel) = old.and_then(|o| o.pointer("/spec/selector"))
        && old_sel != sel
    {
        errs.push(FieldError::invalid_raw(
            "spec.selector",
            selector_render(sel),
            "field is immutable",
        ));
    }
}

/// Pods of a Deployment or ReplicaSet are restarted forever: defaulting makes an unset
/// policy `Always`, and anything else is refused.
pub(super) fn restart_always(spec: &Value, errs: &mut Vec<FieldError>) {
    let policy = spec
        .pointer("/template/spec/restartPolicy")
        .and_then(Value::as_str)
        .unwrap_or("Always");
    if policy != "Always" {
        errs.push(FieldError::not_supported(
            "spec.template.spec.restartPolicy",
            json!(policy),
            &["Always".into()],
        ));
    }
}

/// A ReplicaSet: as a Deployment's selector and template.
pub(super) fn replica_set(obj: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    match spec.get("selector").filter(|s| !s.is_null()) {
        None => errs.push(FieldError::required("spec.selector", "")),
        Some(sel) => selector(&spec, sel, old, errs),
    }
    pod_spec(spec.pointer("/template/spec"), "spec.template.spec", errs);
    restart_always(&spec, errs);
}

/// A Job: its pods may restart on failure or never, and its selector and template are
/// fixed once it exists (testenv does not model suspended Jobs' scheduling changes).
pub(super) fn job(obj: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    pod_spec(spec.pointer("/template/spec"), "spec.template.spec", errs);
    let path = "spec.template.spec.restartPolicy";
    match spec
        .pointer("/template/spec/restartPolicy")
        .and_then(Value::as_str)
    {
        // Defaulting turns an unset policy into `Always`, so both read as missing.
        None | Some("" | "Always") => errs.push(FieldError::required(
            path,
            "valid values: \"OnFailure\", \"Never\"",
        )),
        Some("OnFailure" | "Never") => {}
        Some(other) => errs.push(FieldError::not_supported(
            path,
            json!(other),
            &["OnFailure".into(), "Never".into()],
        )),
    }
    let Some(old) = old else {
        return;
    };
    if let Some(sel) = spec.get("selector") {
        immutable_selector(sel, Some(old), errs);
    }
    if spec.get("template") != old.pointer("/spec/template") {
        errs.push(FieldError::invalid_raw(
            "spec.template",
            "core.PodTemplateSpec{…}",
            "field is immutable",
        ));
    }
}
