//! The pod spec, in Pods and in the templates of workloads (`ValidatePodSpec` as far
//! as controllers commonly meet it): containers with unique valid names and an image,
//! unique port names, resource amounts that are not negative with requests within
//! limits, and a known restart policy.

use kinject_types::validation::{is_dns1123_label, is_valid_port_name};
use serde_json::{Value, json};

use crate::errors::{FieldError, FieldErrorKind};
use crate::quantity::{self, Quantity};

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

/// A container's `resources.limits` and `requests` by name, parsed; decoding has
/// refused a quantity that does not parse.
fn amounts<'a>(c: &'a Value, list: &str) -> Vec<(&'a str, String, Quantity)> {
    c.pointer(&format!("/resources/{list}"))
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(name, v)| {
            let text = quantity::text(v)?;
            let q = quantity::parse(&text).ok()?;
            Some((name.as_str(), text, q))
        })
        .collect()
}

/// No amount below zero, and no request above its limit.
fn resources(c: &Value, at: &str, errs: &mut Vec<FieldError>) {
    let limits = amounts(c, "limits");
    let requests = amounts(c, "requests");
    let negative = |list: &str, name: &str, text: &str, q: &Quantity, errs: &mut Vec<FieldError>| {
        if q.is_negative() {
            errs.push(FieldError::invalid(
                format!("{at}.resources.{list}[{name}]"),
                json!(text),
                "must be greater than or equal to 0",
            ));
        }
    };
    for (name, text, q) in &limits {
        negative("limits", name, text, q, errs);
    }
    for (name, text, q) in &requests {
        negative("requests", name, text, q, errs);
        if let Some((_, limit, lq)) = limits.iter().find(|(n, ..)| n == name)
            && q.cmp_value(lq).is_gt()
        {
            errs.push(FieldError::invalid(
                format!("{at}.resources.requests"),
                json!(text),
                format!("must be less than or equal to {name} limit of {limit}"),
            ));
        }
    }
}

/// The first quantity in a container's resources, anywhere in `obj`, that does not
/// parse, with apimachinery's message: kube-apiserver's decoder refuses the object.
pub(crate) fn unparsable_quantity(obj: &Value) -> Option<&'static str> {
    match obj {
        Value::Object(m) => m.iter().find_map(|(k, v)| {
            let containers = matches!(
                k.as_str(),
                "containers" | "initContainers" | "ephemeralContainers"
            );
            let found = v.as_array().filter(|_| containers).and_then(|cs| {
                cs.iter().find_map(|c| {
                    ["limits", "requests"].iter().find_map(|list| {
                        c.pointer(&format!("/resources/{list}"))
                            .and_then(Value::as_object)?
                            .values()
                            .filter_map(quantity::text)
                            .find_map(|t| quantity::parse(&t).err())
                    })
                })
            });
            found.or_else(|| unparsable_quantity(v))
        }),
        Value::Array(a) => a.iter().find_map(unparsable_quantity),
        _ => None,
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
        resources(c, &at, errs);
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
