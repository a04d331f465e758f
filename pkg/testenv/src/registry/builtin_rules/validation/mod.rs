//! Kind-specific validation of the built-in kinds controllers write most, with
//! kube-apiserver's field paths, cause types and messages: pods (`pod`), workloads
//! (`workloads`), ConfigMap and Secret keys, quotas and namespaces (`config`), RBAC
//! (`rbac`), and services here. Each submodule is a leaf; only this one dispatches.

mod config;
mod pod;
mod rbac;
mod workloads;

use kinject_types::validation::{is_dns1123_label, is_valid_port_name};
use serde_json::{Value, json};

use pod::pod_spec;
pub(crate) use pod::unparsable_quantity;

use crate::errors::{ErrorStatus, FieldError};
use crate::registry::resource::{Builtin, ResourceDef};

/// Validation on create and update; `old` is the stored object for updates. The kinds
/// without a `Builtin` of their own are told apart by group and kind.
pub(crate) fn check(def: &ResourceDef, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(kind) = def.builtin() else {
        return errs;
    };
    match kind {
        Builtin::Pod => check_pod(obj, old, &mut errs),
        Builtin::Deployment => check_deployment(obj, old, &mut errs),
        Builtin::ConfigMap | Builtin::Secret => {
            config::data_keys(kind == Builtin::ConfigMap, obj, &mut errs);
            if let Some(old) = old {
                immutable_data(kind, obj, old, &mut errs);
            }
        }
        Builtin::Service => check_service(obj, old, &mut errs),
        Builtin::Other => check_other(&def.group, &def.kind, obj, old, &mut errs),
        _ => {}
    }
    errs
}

/// The kinds served with no rules of their own elsewhere in testenv.
fn check_other(group: &str, kind: &str, obj: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    match (group, kind) {
        ("apps", "ReplicaSet") => workloads::replica_set(obj, old, errs),
        ("batch", "Job") => workloads::job(obj, old, errs),
        ("", "ResourceQuota") => config::resource_quota(obj, errs),
        ("rbac.authorization.k8s.io", "Role") => rbac::rules(obj, true, errs),
        ("rbac.authorization.k8s.io", "ClusterRole") => rbac::rules(obj, false, errs),
        ("rbac.authorization.k8s.io", "RoleBinding") => rbac::binding(obj, old, false, errs),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => rbac::binding(obj, old, true, errs),
        _ => {}
    }
}

/// Pods need containers with names and images, and an update may change little more
/// than their images.
fn check_pod(obj: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    pod_spec(obj.get("spec"), "spec", errs);
    let Some(old) = old else {
        return;
    };
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

/// A Deployment needs a selector that matches its template's labels and keeps it, a
/// valid pod template, and no negative replicas.
fn check_deployment(obj: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    match spec.get("selector").filter(|s| !s.is_null()) {
        None => errs.push(FieldError::required("spec.selector", "")),
        Some(sel) => workloads::selector(&spec, sel, old, errs),
    }
    pod_spec(spec.pointer("/template/spec"), "spec.template.spec", errs);
    workloads::restart_always(&spec, errs);
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

/// Services keep their cluster IPs and need valid ports.
fn check_service(obj: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    if let Some(old) = old {
        cluster_ips_kept(obj, old, errs);
    }
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    let ty = spec.get("type").and_then(Value::as_str).unwrap_or("ClusterIP");
    let ports = spec.get("ports").and_then(Value::as_array);
    let headless = spec.get("clusterIP").and_then(Value::as_str) == Some("None");
    if ty != "ExternalName" && !headless && ports.is_none_or(Vec::is_empty) {
        errs.push(FieldError::required("spec.ports", ""));
    }
    let several = ports.is_some_and(|ps| ps.len() > 1);
    for (i, p) in ports.into_iter().flatten().enumerate() {
        service_port(p, &format!("spec.ports[{i}]"), several, errs);
    }
}

const PORT_RANGE: &str = "must be between 1 and 65535, inclusive";

/// kube-apiserver's `validateServicePort`: every broken rule of a port is reported, in
/// its order (name, port, protocol, targetPort).
fn service_port(p: &Value, at: &str, require_name: bool, errs: &mut Vec<FieldError>) {
    let name = p.get("name").and_then(Value::as_str).unwrap_or_default();
    if require_name && name.is_empty() {
        errs.push(FieldError::required(format!("{at}.name"), ""));
    } else if !name.is_empty() {
        for e in is_dns1123_label(name) {
            errs.push(FieldError::invalid(format!("{at}.name"), json!(name), e));
        }
    }
    let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
    if !(1..=65535).contains(&port) {
        errs.push(FieldError::invalid(format!("{at}.port"), json!(port), PORT_RANGE));
    }
    // Defaulting, which kube-apiserver runs on every write, makes an empty protocol TCP
    // and an unset, zero or empty targetPort the port.
    match p.get("protocol").and_then(Value::as_str).unwrap_or_default() {
        "" | "TCP" | "UDP" | "SCTP" => {}
        other => errs.push(FieldError::not_supported(
            format!("{at}.protocol"),
            json!(other),
            &["SCTP".into(), "TCP".into(), "UDP".into()],
        )),
    }
    let target = p
        .get("targetPort")
        .filter(|t| **t != 0 && **t != "" && !t.is_null());
    match target {
        Some(Value::String(t)) => {
            for msg in is_valid_port_name(t) {
                errs.push(FieldError::invalid(format!("{at}.targetPort"), json!(t), msg));
            }
        }
        other => {
            let n = other.and_then(Value::as_i64).unwrap_or(port);
            if !(1..=65535).contains(&n) {
                errs.push(FieldError::invalid(
                    format!("{at}.targetPort"),
                    json!(n),
                    PORT_RANGE,
                ));
            }
        }
    }
}

/// A Secret's `type` never changes; an `immutable` ConfigMap or Secret keeps its data
/// and stays immutable.
fn immutable_data(kind: Builtin, obj: &Value, old: &Value, errs: &mut Vec<FieldError>) {
    if kind == Builtin::Secret {
        let ty = |v: &Value| {
            v.get("type")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
                .unwrap_or("Opaque")
                .to_owned()
        };
        if ty(obj) != ty(old) {
            errs.push(FieldError::invalid("type", json!(ty(obj)), "field is immutable"));
        }
    }
    let immutable = |v: &Value| v.get("immutable").and_then(Value::as_bool) == Some(true);
    if !immutable(old) {
        return;
    }
    const WHY: &str = "field is immutable when `immutable` is set";
    if !immutable(obj) {
        errs.push(FieldError::forbidden("immutable", WHY));
    }
    let maps: &[&str] = if kind == Builtin::Secret {
        &["data"]
    } else {
        &["data", "binaryData"]
    };
    for field in maps {
        let get = |v: &Value| v.get(*field).filter(|d| !d.is_null()).cloned();
        if get(obj) != get(old) {
            errs.push(FieldError::forbidden(*field, WHY));
        }
    }
}

fn cluster_ips(svc: &Value) -> Vec<String> {
    svc.pointer("/spec/clusterIPs")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|ip| ip.as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

fn service_type(svc: &Value) -> &str {
    svc.pointer("/spec/type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP")
}

fn headless(svc: &Value) -> bool {
    service_type(svc) == "ClusterIP" && cluster_ips(svc) == ["None"]
}

/// What the Service registry does to an update before validation: a cluster IP left
/// out is kept, and a changed `clusterIP` with `clusterIPs` untouched carries over.
pub(crate) fn prepare_service_update(obj: &mut Value, old: &Value) {
    let needs_ip = |v: &Value| service_type(v) != "ExternalName";
    if !(needs_ip(obj) && needs_ip(old)) {
        return;
    }
    let old_ip = old.pointer("/spec/clusterIP").cloned().unwrap_or(Value::Null);
    let old_ips = cluster_ips(old);
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if spec
        .get("clusterIP")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
        && !old_ip.is_null()
    {
        spec.insert("clusterIP".into(), old_ip.clone());
    }
    let ips_now = spec
        .get("clusterIPs")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    if !ips_now && !old_ips.is_empty() {
        spec.insert("clusterIPs".into(), json!(old_ips));
    }
    let ip = spec.get("clusterIP").cloned().unwrap_or(Value::Null);
    let same_ips = spec.get("clusterIPs").cloned().unwrap_or(Value::Null) == json!(old_ips);
    if ip != old_ip && same_ips {
        match ip.as_str().filter(|s| !s.is_empty()) {
            Some(s) => spec.insert("clusterIPs".into(), json!([s])),
            None => spec.remove("clusterIPs"),
        };
    }
}

/// Cluster IPs, once allocated, may be added to or released but not changed.
fn cluster_ips_kept(obj: &Value, old: &Value, errs: &mut Vec<FieldError>) {
    if service_type(obj) == "ExternalName" || service_type(old) == "ExternalName" {
        return;
    }
    if headless(obj) && headless(old) {
        return;
    }
    let (new, was) = (cluster_ips(obj), cluster_ips(old));
    let shown = format!(
        "[]string{{{}}}",
        new.iter()
            .map(|ip| format!("{ip:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let changed = |i: usize| {
        FieldError::invalid_raw(
            format!("spec.clusterIPs[{i}]"),
            shown.clone(),
            "may not change once set",
        )
    };
    if new.len() == was.len() {
        for (i, ip) in was.iter().enumerate() {
            if new.get(i) != Some(ip) {
                errs.push(changed(i));
            }
        }
    } else if !new.is_empty() && !was.is_empty() && new[0] != was[0] {
        errs.push(changed(0));
    }
}

/// events.k8s.io/v1 creation rules (the fields its Recorder-style clients must set).
pub(crate) fn check_event_v1(ev: &Value, name: &str) -> Result<(), ErrorStatus> {
    let mut errs = Vec::new();
    let missing = |f: &str| ev.get(f).and_then(Value::as_str).is_none_or(str::is_empty);
    if ev.get("eventTime").is_none_or(Value::is_null) {
        errs.push(FieldError::required("eventTime", ""));
    }
    let ty = ev.get("type").and_then(Value::as_str).unwrap_or_default();
    if ty != "Normal" && ty != "Warning" {
        errs.push(FieldError::invalid(
            "type",
            json!(""),
            format!("has invalid value: {ty}"),
        ));
    }
    for f in ["reason", "reportingController", "reportingInstance", "action"] {
        if missing(f) {
            errs.push(FieldError::required(f, ""));
        }
    }
    if ev
        .get("note")
        .and_then(Value::as_str)
        .is_some_and(|n| n.len() > 1024)
    {
        errs.push(
            FieldError::invalid("note", json!(""), "can have at most 1024 characters")
                .with_kind(crate::errors::FieldErrorKind::TooLong),
        );
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(ErrorStatus::invalid("events.k8s.io", "Event", name, errs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployment_selector_must_match() {
        let d = json!({"spec": {"selector": {"matchLabels": {"app": "a"}},
            "template": {"metadata": {"labels": {"app": "b"}},
                         "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
        let mut errs = Vec::new();
        check_deployment(&d, None, &mut errs);
        assert_eq!(errs.len(), 1);
        assert_eq!(
            errs[0].to_string(),
            "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"b\"}: `selector` does not match template `labels`"
        );
    }
}
