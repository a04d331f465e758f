//! Discovery documents (`/version`, `/api`, `/apis`, resource lists).

use serde_json::{Value, json};

use crate::errors::ErrorStatus;
use crate::registry::Registry;

use super::reply::Reply;

/// The Kubernetes version testenv answers as (kube 5's minimum supported, k8s-openapi `v1_33`).
pub(crate) const MAJOR: &str = "1";
pub(crate) const MINOR: &str = "33";

pub(crate) fn version() -> Value {
    json!({
        "major": MAJOR,
        "minor": MINOR,
        "gitVersion": format!("v{MAJOR}.{MINOR}.0-testenv"),
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-04-23T00:00:00Z",
        "goVersion": "go1.24.2",
        "compiler": "gc",
        "platform": format!("{}/{}", std::env::consts::OS, if cfg!(target_arch = "x86_64") { "amd64" } else if cfg!(target_arch = "aarch64") { "arm64" } else { std::env::consts::ARCH }),
    })
}

pub(crate) fn api_versions(host: &str) -> Value {
    let addr = if host.is_empty() { "127.0.0.1" } else { host };
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": addr}],
    })
}

/// Groups in the order they were registered, versions in registration order (the first
/// is preferred).
fn groups(state: &Registry) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for d in state.resources.iter().filter(|d| !d.group.is_empty()) {
        match out.iter_mut().find(|(g, _)| *g == d.group) {
            Some((_, vs)) => {
                if !vs.contains(&d.version) {
                    vs.push(d.version.clone());
                }
            }
            None => out.push((d.group.clone(), vec![d.version.clone()])),
        }
    }
    out
}

fn group_json(name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    let preferred = vs.first().cloned().unwrap_or(Value::Null);
    json!({"name": name, "versions": vs, "preferredVersion": preferred})
}

pub(crate) fn group_list(state: &Registry) -> Value {
    let groups: Vec<Value> = groups(state).iter().map(|(g, vs)| group_json(g, vs)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub(crate) fn group(state: &Registry, name: &str) -> Reply {
    match groups(state).into_iter().find(|(g, _)| g == name) {
        Some((g, vs)) => {
            let mut v = group_json(&g, &vs);
            v["kind"] = json!("APIGroup");
            v["apiVersion"] = json!("v1");
            Reply::ok(v)
        }
        None => Reply::error(&ErrorStatus::unknown_path()),
    }
}

const AGGREGATED_V2: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Whether the client asked for aggregated discovery (apidiscovery.k8s.io/v2) first.
pub(crate) fn wants_aggregated(accept: &str) -> bool {
    accept.split(',').next().is_some_and(|first| {
        let params: Vec<&str> = first.split(';').map(str::trim).collect();
        params.contains(&"as=APIGroupDiscoveryList")
            && params.contains(&"g=apidiscovery.k8s.io")
            && params.contains(&"v=v2")
    })
}

/// `/api` or `/apis` as one APIGroupDiscoveryList, as kube-apiserver answers clients
/// that ask for aggregated discovery.
pub(crate) fn aggregated(state: &Registry, core: bool) -> Reply {
    let gvk = |g: &str, v: &str, k: &str| json!({"group": g, "version": v, "kind": k});
    let mut items = Vec::new();
    let names: Vec<(String, Vec<String>)> = if core {
        vec![(String::new(), vec!["v1".to_owned()])]
    } else {
        groups(state)
    };
    for (g, versions) in names {
        let vs: Vec<Value> = versions
            .iter()
            .map(|v| {
                let resources: Vec<Value> = state
                    .resources
                    .iter()
                    .filter(|d| d.group == g && &d.version == v)
                    .map(|d| {
                        let mut r = json!({
                            "resource": d.plural,
                            "responseKind": gvk(&g, v, &d.kind),
                            "scope": if d.namespaced { "Namespaced" } else { "Cluster" },
                            "singularResource": d.singular,
                            "verbs": d.verbs(),
                        });
                        if !d.short_names.is_empty() {
                            r["shortNames"] = json!(d.short_names);
                        }
                        if !d.categories.is_empty() {
                            r["categories"] = json!(d.categories);
                        }
                        let mut subs = Vec::new();
                        if d.status {
                            subs.push(json!({
                                "subresource": "status",
                                "responseKind": gvk(&g, v, &d.kind),
                                "verbs": ["get", "patch", "update"],
                            }));
                        }
                        if d.scale.is_some() {
                            subs.push(json!({
                                "subresource": "scale",
                                "responseKind": gvk("autoscaling", "v1", "Scale"),
                                "verbs": ["get", "patch", "update"],
                            }));
                        }
                        if d.token_request {
                            subs.push(json!({
                                "subresource": "token",
                                "responseKind": gvk("authentication.k8s.io", "v1", "TokenRequest"),
                                "verbs": ["create"],
                            }));
                        }
                        if !subs.is_empty() {
                            r["subresources"] = json!(subs);
                        }
                        r
                    })
                    .collect();
                json!({"version": v, "resources": resources, "freshness": "Current"})
            })
            .collect();
        items.push(json!({"metadata": {"name": g}, "versions": vs}));
    }
    Reply::JsonAs {
        content_type: AGGREGATED_V2,
        body: json!({
            "kind": "APIGroupDiscoveryList",
            "apiVersion": "apidiscovery.k8s.io/v2",
            "metadata": {},
            "items": items,
        }),
    }
}

pub(crate) fn resource_list(state: &Registry, group: &str, version: &str) -> Value {
    let mut resources = Vec::new();
    for d in state
        .resources
        .iter()
        .filter(|d| d.group == group && d.version == version)
    {
        let mut r = json!({
            "name": d.plural,
            "singularName": d.singular,
            "namespaced": d.namespaced,
            "kind": d.kind,
            "verbs": d.verbs(),
        });
        if !d.short_names.is_empty() {
            r["shortNames"] = json!(d.short_names);
        }
        if !d.categories.is_empty() {
            r["categories"] = json!(d.categories);
        }
        resources.push(r);
        if d.status {
            resources.push(json!({
                "name": format!("{}/status", d.plural),
                "singularName": "",
                "namespaced": d.namespaced,
                "kind": d.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        if d.scale.is_some() {
            resources.push(json!({
                "name": format!("{}/scale", d.plural),
                "singularName": "",
                "namespaced": d.namespaced,
                "group": "autoscaling",
                "version": "v1",
                "kind": "Scale",
                "verbs": ["get", "patch", "update"],
            }));
        }
        if d.token_request {
            resources.push(json!({
                "name": format!("{}/token", d.plural),
                "singularName": "",
                "namespaced": d.namespaced,
                "group": "authentication.k8s.io",
                "version": "v1",
                "kind": "TokenRequest",
                "verbs": ["create"],
            }));
        }
    }
    let gv = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources})
}
