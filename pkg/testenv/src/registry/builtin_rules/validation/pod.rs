//! The pod spec, in Pods and in the templates of workloads (`ValidatePodSpec` as far
//! as controllers commonly meet it): containers with unique valid names and an image,
//! unique port names, and a known restart policy.

use kinject_types::validation::{is_dns1123_label, is_valid_port_name};
use serde_json::{Value, json};

use crate::errors::{FieldError, FieldErrorKind};

fn duplicate(field: String, value: &str) -> FieldError {
    FieldError::invalid(field, json!(value), "").with_kind(FieldErrorKind::Duplicate)
}

/// A container's ports: valid names, each used once in the container, and a port.
fn ports(c: &Value, at: &str, errs: &mut Vec<FieldError>) {
    let mut names: Vec<&str> = Vec::new();
    let list = c
        .get("ports")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for (i, p) in list.iter().enumerate() {
        let at = format!("{at}.ports[{i}]");
        let name = p.get("name").and_then(Value::as_str).unwrap_or_default();
        if !name.is_empty() {
            let msgs = is_valid_port_name(name);
            if !msgs.is_empty() {
                for m in msgs {
                    errs.push(FieldError::invalid(format!("{at}.name"), json!(name), m));
                }
            } else if names.contains(&name) {
                errs.push(duplicate(format!("{at}.name"), name));
            } else {
                names.push(name);
            }
        }
        match p.get("containerPort").and_then(Value::as_i64).unwrap_or(0) {
            0 => errs.push(FieldError::required(format!("{at}.containerPort"), "")),
            n if !(1..=65535).contains(&n) => errs.push(FieldError::invalid(
                format!("{at}.containerPort"),
                json!(n),
                "must be between 1 and 65535, inclusive",
            )),
            _ => {}
        }
    }
}

/// One list of containers; `seen` carries the names across lists, which must differ.
fn containers(spec: &Value, list: &str, path: &str, seen: &mut Vec<String>, errs: &mut Vec<FieldError>) {
    let items = spec
        .get(list)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if list == "containers" && items.is_empty() {
        errs.push(FieldError::required(format!("{path}.{list}"), ""));
    }
    for (i, c) in items.iter().enumerate() {
        let at = format!("{path}.{list}[{i}]");
        match c.get("name").and_then(Value::as_str).unwrap_or_default() {
            "" => errs.push(FieldError::required(format!("{at}.name"), "")),
            n => {
                for e in is_dns1123_label(n) {
                    errs.push(FieldError::invalid(format!("{at}.name"), json!(n), e));
                }
                if seen.iter().any(|s| s == n) {
                    errs.push(duplicate(format!("{at}.name"), n));
                } else {
                    seen.push(n.to_owned());
                }
            }
        }
        if c.get("image").and_then(Value::as_str).is_none_or(str::is_empty) {
            errs.push(FieldError::required(format!("{at}.image"), ""));
        }
        ports(c, &at, errs);
    }
}

/// A pod spec at `path` (`spec`, or `spec.template.spec` in a workload).
pub(super) fn pod_spec(spec: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) {
    let Some(spec) = spec else {
        errs.push(FieldError::required(format!("{path}.containers"), ""));
        return;
    };
    let mut seen = Vec::new();
    containers(spec, "containers", path, &mut seen, errs);
    containers(spec, "initContainers", path, &mut seen, errs);
    // Defaulting makes an unset policy `Always`.
    match spec.get("restartPolicy").and_then(Value::as_str) {
        None | Some("Always" | "OnFailure" | "Never") => {}
        Some("") => errs.push(FieldError::required(format!("{path}.restartPolicy"), "")),
        Some(other) => errs.push(FieldError::not_supported(
            format!("{path}.restartPolicy"),
            json!(other),
            &["Always".into(), "OnFailure".into(), "Never".into()],
        )),
    }
}
