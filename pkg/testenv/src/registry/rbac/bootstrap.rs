//! The part of kube-apiserver's bootstrap RBAC policy that every request depends on:
//! `cluster-admin` for `system:masters`, and the roles that let every authenticated
//! user read discovery and health paths and review its own permissions
//! (`system:basic-user`, `system:discovery`, `system:public-info-viewer`).
//!
//! kube-apiserver writes these objects at start-up; testenv keeps them out of the
//! store, so that a fresh server lists only what a test created, and consults them
//! as though they were stored. A stored object of the same name takes their place,
//! as an edited bootstrap object would (without kube-apiserver's reconciliation).

use std::sync::OnceLock;

use serde_json::{Value, json};

/// The bootstrap ClusterRoles and ClusterRoleBindings, as kube-apiserver writes them
/// (its rule builder sorts every list in a rule).
struct Policy {
    roles: Vec<Value>,
    bindings: Vec<Value>,
}

fn policy() -> &'static Policy {
    static POLICY: OnceLock<Policy> = OnceLock::new();
    POLICY.get_or_init(|| Policy {
        roles: vec![
            role(
                "cluster-admin",
                json!([
                    {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                    {"nonResourceURLs": ["*"], "verbs": ["*"]},
                ]),
            ),
            role(
                "system:basic-user",
                json!([
                    {"apiGroups": ["authorization.k8s.io"],
                     "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                     "verbs": ["create"]},
                    {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"],
                     "verbs": ["create"]},
                ]),
            ),
            role(
                "system:discovery",
                json!([{"nonResourceURLs": [
                    "/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi",
                    "/openapi/*", "/readyz", "/version", "/version/",
                ], "verbs": ["get"]}]),
            ),
            role(
                "system:public-info-viewer",
                json!([{"nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"],
                        "verbs": ["get"]}]),
            ),
        ],
        bindings: vec![
            binding("cluster-admin", &["system:masters"]),
            binding("system:basic-user", &["system:authenticated"]),
            binding("system:discovery", &["system:authenticated"]),
            binding(
                "system:public-info-viewer",
                &["system:authenticated", "system:unauthenticated"],
            ),
        ],
    })
}

fn metadata(name: &str) -> Value {
    json!({
        "name": name,
        "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
    })
}

fn role(name: &str, rules: Value) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": metadata(name),
        "rules": rules,
    })
}

/// A ClusterRoleBinding of the ClusterRole of the same name to `groups`.
fn binding(name: &str, groups: &[&str]) -> Value {
    let subjects: Vec<Value> = groups
        .iter()
        .map(|g| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g}))
        .collect();
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": metadata(name),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": subjects,
    })
}

/// The bootstrap ClusterRoles.
pub(super) fn cluster_roles() -> &'static [Value] {
    &policy().roles
}

/// The bootstrap ClusterRoleBindings.
pub(super) fn cluster_role_bindings() -> &'static [Value] {
    &policy().bindings
}
