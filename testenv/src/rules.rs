//! Kind-specific validation of built-in kinds that controllers commonly trip over: pods
//! need containers with names and images and are mostly immutable; deployments need a
//! selector that matches their template; services need valid ports.

use serde_json::{Value, json};

use crate::resource::Builtin;
use crate::status::FieldError;
use crate::validation::check_dns_label;

fn containers(spec: &Value, list: &str, path: &str, required: bool, errs: &mut Vec<FieldError>) {
    let items = spec
        .get(list)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if required && items.is_empty() {
        errs.push(FieldError::required(format!("{path}.{list}"), ""));
    }
    for (i, c) in items.iter().enumerate() {
        let at = format!("{path}.{list}[{i}]");
        match c.get("name").and_then(Value::as_str).unwrap_or_default() {
            "" => errs.push(FieldError::required(format!("{at}.name"), "")),
            n => {
                if let Err(e) = check_dns_label(n) {
                    errs.push(FieldError::invalid(format!("{at}.name"), json!(n), e));
                }
            }
        }
        if c.get("image").and_then(Value::as_str).is_none_or(str::is_empty) {
            errs.push(FieldError::required(format!("{at}.image"), ""));
        }
    }
}

fn pod_spec(spec: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) {
    let Some(spec) = spec else {
        errs.push(FieldError::required(format!("{path}.containers"), ""));
        return;
    };
    containers(spec, "containers", path, true, errs);
    containers(spec, "initContainers", path, false, errs);
}

fn labels_render(m: &serde_json::Map<String, Value>) -> String {
    let inner: Vec<String> = m
        .iter()
        .map(|(k, v)| format!("{k:?}:{:?}", v.as_str().unwrap_or_default()))
        .collect();
    format!("map[string]string{{{}}}", inner.join(", "))
}

/// Whether `labels` satisfy a LabelSelector object (`matchLabels` + `matchExpressions`).
fn selector_matches(sel: &Value, labels: &serde_json::Map<String, Value>) -> bool {
    let label = |k: &str| labels.get(k).and_then(Value::as_str);
    let by_labels = sel
        .get("matchLabels")
        .and_then(Value::as_object)
        .is_none_or(|m| m.iter().all(|(k, v)| label(k) == v.as_str()));
    let by_exprs = sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .is_none_or(|es| {
            es.iter().all(|e| {
                let key = e.get("key").and_then(Value::as_str).unwrap_or_default();
                let values: Vec<&str> = e
                    .get("values")
                    .and_then(Value::as_array)
                    .map(|vs| vs.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                match e.get("operator").and_then(Value::as_str) {
                    Some("In") => label(key).is_some_and(|v| values.contains(&v)),
                    Some("NotIn") => label(key).is_none_or(|v| !values.contains(&v)),
                    Some("Exists") => label(key).is_some(),
                    Some("DoesNotExist") => label(key).is_none(),
                    _ => false,
                }
            })
        });
    by_labels && by_exprs
}

/// Validation on create and update; `old` is the stored object for updates.
pub(crate) fn check(kind: Builtin, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    match kind {
        Builtin::Pod => {
            pod_spec(obj.get("spec"), "spec", &mut errs);
            if let Some(old) = old {
                let mutable_only = |v: &Value| {
                    let mut s = v.get("spec").cloned().unwrap_or(Value::Null);
                    if let Some(m) = s.as_object_mut() {
                        for k in [
                            "activeDeadlineSeconds",
                            "tolerations",
                            "terminationGracePeriodSeconds",
                        ] {
                            m.remove(k);
                        }
                        for list in ["containers", "initContainers"] {
                            if let Some(Value::Array(cs)) = m.get_mut(list) {
                                for c in cs {
                                    if let Some(cm) = c.as_object_mut() {
                                        cm.remove("image");
                                    }
                                }
                            }
                        }
                    }
                    s
                };
                if mutable_only(obj) != mutable_only(old) {
                    errs.push(FieldError::forbidden(
                        "spec",
                        "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
                    ));
                }
            }
        }
        Builtin::Deployment => {
            let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
            let selector = spec.get("selector").filter(|s| !s.is_null());
            match selector {
                None => errs.push(FieldError::required("spec.selector", "")),
                Some(sel) => {
                    let empty = sel
                        .get("matchLabels")
                        .and_then(Value::as_object)
                        .is_none_or(|m| m.is_empty())
                        && sel
                            .get("matchExpressions")
                            .and_then(Value::as_array)
                            .is_none_or(Vec::is_empty);
                    if empty {
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
                    if !empty && !selector_matches(sel, &labels) {
                        errs.push(FieldError::invalid_raw(
                            "spec.template.metadata.labels",
                            labels_render(&labels),
                            "`selector` does not match template `labels`",
                        ));
                    }
                    if let Some(old_sel) = old.and_then(|o| o.pointer("/spec/selector"))
                        && old_sel != sel
                    {
                        errs.push(FieldError::invalid(
                            "spec.selector",
                            json!("selector"),
                            "field is immutable",
                        ));
                    }
                }
            }
            pod_spec(spec.pointer("/template/spec"), "spec.template.spec", &mut errs);
            if spec
                .get("replicas")
                .and_then(Value::as_i64)
                .is_some_and(|r| r < 0)
            {
                errs.push(FieldError::invalid(
                    "spec.replicas",
                    spec["replicas"].clone(),
                    "must be greater than or equal to 0",
                ));
            }
        }
        Builtin::Service => {
            let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
            let ty = spec.get("type").and_then(Value::as_str).unwrap_or("ClusterIP");
            let ports = spec.get("ports").and_then(Value::as_array);
            let headless = spec.get("clusterIP").and_then(Value::as_str) == Some("None");
            if ty != "ExternalName" && !headless && ports.is_none_or(Vec::is_empty) {
                errs.push(FieldError::required("spec.ports", ""));
            }
            for (i, p) in ports.into_iter().flatten().enumerate() {
                let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
                if !(1..=65535).contains(&port) {
                    errs.push(FieldError::invalid(
                        format!("spec.ports[{i}].port"),
                        json!(port),
                        "must be between 1 and 65535, inclusive",
                    ));
                }
                if ports.is_some_and(|ps| ps.len() > 1)
                    && p.get("name").and_then(Value::as_str).is_none_or(str::is_empty)
                {
                    errs.push(FieldError::required(format!("spec.ports[{i}].name"), ""));
                }
            }
        }
        _ => {}
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployment_selector_must_match() {
        let d = json!({"spec": {"selector": {"matchLabels": {"app": "a"}},
            "template": {"metadata": {"labels": {"app": "b"}},
                         "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
        let errs = check(Builtin::Deployment, &d, None);
        assert_eq!(errs.len(), 1);
        assert_eq!(
            errs[0].to_string(),
            "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"b\"}: `selector` does not match template `labels`"
        );
    }
}
