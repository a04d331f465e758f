//! The defaults kube-apiserver fills in on create, for the fields controllers commonly
//! compare against.

use serde_json::{Value, json};

use crate::registry::resource::{Builtin, ResourceDef};

/// Defaults kube-apiserver fills in on create (a subset: the fields controllers
/// commonly compare against).
pub(crate) fn default_on_create(kind: Builtin, obj: &mut Value) {
    match kind {
        Builtin::Namespace => {
            let name = obj.pointer("/metadata/name").cloned().unwrap_or(Value::Null);
            obj["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
            obj["spec"] = json!({"finalizers": ["kubernetes"]});
            obj["status"] = json!({"phase": "Active"});
        }
        Builtin::Secret if obj.get("type").is_none_or(Value::is_null) => {
            obj["type"] = json!("Opaque");
        }
        Builtin::Service => {
            default_service(obj);
            obj["status"] = json!({"loadBalancer": {}});
        }
        Builtin::Pod => {
            if let Some(spec) = obj.get_mut("spec") {
                default_pod_spec(spec);
            }
            let qos = pod_qos(obj);
            obj["status"] = json!({"phase": "Pending", "qosClass": qos});
        }
        Builtin::Deployment => {
            if let Some(spec) = obj.get_mut("spec") {
                set_default(spec, "replicas", json!(1));
                set_default(spec, "revisionHistoryLimit", json!(10));
                set_default(spec, "progressDeadlineSeconds", json!(600));
                set_default(
                    spec,
                    "strategy",
                    json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}),
                );
                if let Some(pod) = spec.pointer_mut("/template/spec") {
                    default_pod_spec(pod);
                }
            }
            obj["status"] = json!({});
        }
        // The strategy clears the status, and the v1 defaults that run when the
        // object is read back fill in the phase.
        Builtin::PersistentVolume => {
            if let Some(spec) = obj.get_mut("spec") {
                set_default(spec, "persistentVolumeReclaimPolicy", json!("Retain"));
                set_default(spec, "volumeMode", json!("Filesystem"));
            }
            obj["status"] = json!({"phase": "Pending"});
        }
        Builtin::PersistentVolumeClaim => {
            if let Some(spec) = obj.get_mut("spec") {
                set_default(spec, "volumeMode", json!("Filesystem"));
            }
            obj["status"] = json!({"phase": "Pending"});
        }
        _ => {}
    }
}

/// The v1 defaults of the workload kinds without rules of their own, which
/// controllers comparing their desired spec with the stored one run into.
pub(crate) fn default_workload(def: &ResourceDef, obj: &mut Value) {
    if def.builtin() != Some(Builtin::Other) {
        return;
    }
    let Some(spec) = obj.get_mut("spec") else {
        return;
    };
    let template = match (def.group.as_str(), def.plural.as_str()) {
        ("apps", "replicasets") => {
            set_default(spec, "replicas", json!(1));
            "/template/spec"
        }
        ("apps", "statefulsets") => {
            set_default(spec, "replicas", json!(1));
            set_default(spec, "podManagementPolicy", json!("OrderedReady"));
            set_default(
                spec,
                "updateStrategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}),
            );
            set_default(spec, "revisionHistoryLimit", json!(10));
            set_default(
                spec,
                "persistentVolumeClaimRetentionPolicy",
                json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
            );
            "/template/spec"
        }
        ("apps", "daemonsets") => {
            set_default(
                spec,
                "updateStrategy",
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}),
            );
            set_default(spec, "revisionHistoryLimit", json!(10));
            "/template/spec"
        }
        ("batch", "jobs") => {
            default_job_spec(spec);
            "/template/spec"
        }
        ("batch", "cronjobs") => {
            set_default(spec, "concurrencyPolicy", json!("Allow"));
            set_default(spec, "suspend", json!(false));
            set_default(spec, "successfulJobsHistoryLimit", json!(3));
            set_default(spec, "failedJobsHistoryLimit", json!(1));
            if let Some(job) = spec.pointer_mut("/jobTemplate/spec") {
                default_job_spec(job);
            }
            "/jobTemplate/spec/template/spec"
        }
        _ => return,
    };
    if let Some(pod) = spec.pointer_mut(template) {
        default_pod_spec(pod);
    }
}

fn default_job_spec(spec: &mut Value) {
    // Completions default to 1 only when parallelism was not given either.
    if spec.get("parallelism").is_none_or(Value::is_null) {
        set_default(spec, "completions", json!(1));
    }
    set_default(spec, "parallelism", json!(1));
    set_default(spec, "backoffLimit", json!(6));
    set_default(spec, "completionMode", json!("NonIndexed"));
    set_default(spec, "suspend", json!(false));
    let policy = if spec.get("podFailurePolicy").is_some_and(|p| !p.is_null()) {
        "Failed"
    } else {
        "TerminatingOrFailed"
    };
    set_default(spec, "podReplacementPolicy", json!(policy));
}

/// A Job without `manualSelector: true` gets a selector on its own uid, and its pod
/// template the labels that selector matches; kube-apiserver does this once the uid
/// is known.
pub(crate) fn select_job_pods(def: &ResourceDef, obj: &mut Value) {
    if def.builtin() != Some(Builtin::Other) || def.group != "batch" || def.plural != "jobs" {
        return;
    }
    if obj.pointer("/spec/manualSelector").and_then(Value::as_bool) == Some(true) {
        return;
    }
    let uid = obj.pointer("/metadata/uid").cloned().unwrap_or(Value::Null);
    let name = obj.pointer("/metadata/name").cloned().unwrap_or(Value::Null);
    let Some(spec) = obj.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    set_default(
        spec,
        "selector",
        json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}),
    );
    let Some(template) = spec.get_mut("template").filter(|t| t.is_object()) else {
        return;
    };
    if !template.get("metadata").is_some_and(Value::is_object) {
        template["metadata"] = json!({});
    }
    let meta = &mut template["metadata"];
    if !meta.get("labels").is_some_and(Value::is_object) {
        meta["labels"] = json!({});
    }
    let labels = &mut meta["labels"];
    set_default(labels, "batch.kubernetes.io/controller-uid", uid.clone());
    set_default(labels, "batch.kubernetes.io/job-name", name.clone());
    set_default(labels, "controller-uid", uid);
    set_default(labels, "job-name", name);
}

fn set_default(obj: &mut Value, key: &str, value: Value) {
    if let Some(m) = obj.as_object_mut()
        && m.get(key).is_none_or(Value::is_null)
    {
        m.insert(key.to_owned(), value);
    }
}

fn default_pod_spec(spec: &mut Value) {
    set_default(spec, "restartPolicy", json!("Always"));
    set_default(spec, "terminationGracePeriodSeconds", json!(30));
    set_default(spec, "dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "securityContext", json!({}));
    set_default(spec, "schedulerName", json!("default-scheduler"));
    set_default(spec, "enableServiceLinks", json!(true));
    set_default(spec, "preemptionPolicy", json!("PreemptLowerPriority"));
    set_default(spec, "priority", json!(0));
    set_default(spec, "serviceAccountName", json!("default"));
    let sa = spec.get("serviceAccountName").cloned();
    if let Some(sa) = sa {
        set_default(spec, "serviceAccount", sa);
    }
    for list in ["initContainers", "containers"] {
        if let Some(cs) = spec.get_mut(list).and_then(Value::as_array_mut) {
            for c in cs {
                set_default(c, "terminationMessagePath", json!("/dev/termination-log"));
                set_default(c, "terminationMessagePolicy", json!("File"));
                let image = c.get("image").and_then(Value::as_str).unwrap_or_default();
                let last = image.rsplit('/').next().unwrap_or_default();
                let policy = if image.contains('@') || (last.contains(':') && !last.ends_with(":latest")) {
                    "IfNotPresent"
                } else {
                    "Always"
                };
                set_default(c, "imagePullPolicy", json!(policy));
                set_default(c, "resources", json!({}));
                if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
                    for p in ports {
                        set_default(p, "protocol", json!("TCP"));
                    }
                }
            }
        }
    }
}

fn pod_qos(pod: &Value) -> &'static str {
    let containers = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let has = |c: &Value, what: &str| {
        c.pointer(&format!("/resources/{what}"))
            .and_then(Value::as_object)
            .is_some_and(|m| !m.is_empty())
    };
    if containers
        .iter()
        .all(|c| !has(c, "requests") && !has(c, "limits"))
    {
        return "BestEffort";
    }
    let guaranteed = containers.iter().all(|c| {
        let lim = c.pointer("/resources/limits").and_then(Value::as_object);
        let req = c.pointer("/resources/requests").and_then(Value::as_object);
        match lim {
            Some(l) if l.contains_key("cpu") && l.contains_key("memory") => {
                req.is_none_or(|r| r.iter().all(|(k, v)| l.get(k) == Some(v)))
            }
            _ => false,
        }
    });
    if guaranteed { "Guaranteed" } else { "Burstable" }
}

fn default_service(obj: &mut Value) {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let Some(spec) = obj.get_mut("spec") else {
        return;
    };
    set_default(spec, "type", json!("ClusterIP"));
    set_default(spec, "sessionAffinity", json!("None"));
    let external = spec.get("type").and_then(Value::as_str) == Some("ExternalName");
    if !external {
        // A stable address derived from the name keeps tests deterministic.
        let h = name
            .bytes()
            .fold(7u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
        let ip = format!("10.96.{}.{}", (h >> 8) % 256, h % 254 + 1);
        set_default(spec, "clusterIP", json!(ip));
        let cip = spec.get("clusterIP").cloned().unwrap_or(Value::Null);
        if cip.as_str() != Some("None") {
            set_default(spec, "clusterIPs", json!([cip]));
        } else {
            set_default(spec, "clusterIPs", json!(["None"]));
        }
        set_default(spec, "ipFamilies", json!(["IPv4"]));
        set_default(spec, "ipFamilyPolicy", json!("SingleStack"));
        set_default(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports {
            // Defaulting treats an empty protocol and a zero or empty targetPort as unset.
            if let Some(m) = p.as_object_mut() {
                if m.get("protocol").is_some_and(|v| v == "") {
                    m.remove("protocol");
                }
                if m.get("targetPort").is_some_and(|v| v == 0 || v == "") {
                    m.remove("targetPort");
                }
            }
            set_default(p, "protocol", json!("TCP"));
            let port = p.get("port").cloned().unwrap_or(Value::Null);
            set_default(p, "targetPort", port);
        }
    }
}
