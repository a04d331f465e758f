//! kube-apiserver's RBAC authorizer: a service account's request is authorized
//! against the stored Roles, ClusterRoles and their bindings, aggregated ClusterRoles
//! included; `system:admin` (in `system:masters`) may do anything. Who makes a request
//! is the HTTP layer's to say (see `crate::http::authentication`).

use serde_json::Value;

use crate::errors::ErrorStatus;
use crate::registry::Registry;
use crate::store::{ObjKey, ResKey};

const RBAC: &str = "rbac.authorization.k8s.io";

/// Who makes a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct User {
    pub(crate) name: String,
    pub(crate) groups: Vec<String>,
}

impl User {
    pub(crate) fn admin() -> Self {
        Self {
            name: "system:admin".to_owned(),
            groups: vec!["system:masters".to_owned(), "system:authenticated".to_owned()],
        }
    }

    pub(crate) fn service_account(namespace: &str, name: &str) -> Self {
        Self {
            name: format!("system:serviceaccount:{namespace}:{name}"),
            groups: vec![
                "system:serviceaccounts".to_owned(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".to_owned(),
            ],
        }
    }

    fn is_admin(&self) -> bool {
        self.groups.iter().any(|g| g == "system:masters")
    }
}

/// What a resource request asks to do.
pub(crate) struct Attributes<'a> {
    pub(crate) verb: &'a str,
    pub(crate) group: &'a str,
    pub(crate) resource: &'a str,
    pub(crate) subresource: &'a str,
    pub(crate) namespace: &'a str,
    pub(crate) name: &'a str,
}

/// `Ok` when `user` may make the request, else kube-apiserver's 403.
pub(crate) fn authorize(state: &Registry, user: &User, a: &Attributes<'_>) -> Result<(), ErrorStatus> {
    if user.is_admin() || allowed(state, user, a) {
        return Ok(());
    }
    let resource = if a.subresource.is_empty() {
        a.resource.to_owned()
    } else {
        format!("{}/{}", a.resource, a.subresource)
    };
    let why = if a.namespace.is_empty() {
        format!(
            "User \"{}\" cannot {} resource \"{resource}\" in API group \"{}\" at the cluster scope",
            user.name, a.verb, a.group
        )
    } else {
        format!(
            "User \"{}\" cannot {} resource \"{resource}\" in API group \"{}\" in the namespace \"{}\"",
            user.name, a.verb, a.group, a.namespace
        )
    };
    let qualified = if a.group.is_empty() {
        a.resource.to_owned()
    } else {
        format!("{}.{}", a.resource, a.group)
    };
    let message = if a.name.is_empty() {
        format!("{qualified} is forbidden: {why}")
    } else {
        format!("{qualified} \"{}\" is forbidden: {why}", a.name)
    };
    Err(ErrorStatus::forbidden(message).with_details(a.group, a.resource, a.name))
}

fn allowed(state: &Registry, user: &User, a: &Attributes<'_>) -> bool {
    let bound = |binding: &Value| {
        binding
            .get("subjects")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(|s| subject_is(s, user))
    };
    let clusterwide = state
        .store
        .iter(&ResKey::new(RBAC, "clusterrolebindings"))
        .map(|(_, b)| b)
        .filter(|b| bound(b))
        .any(|b| rules_of(state, b, "").iter().any(|r| rule_allows(r, a)));
    clusterwide
        || (!a.namespace.is_empty()
            && state
                .store
                .iter(&ResKey::new(RBAC, "rolebindings"))
                .filter(|(k, _)| k.namespace == a.namespace)
                .map(|(_, b)| b)
                .filter(|b| bound(b))
                .any(|b| rules_of(state, b, a.namespace).iter().any(|r| rule_allows(r, a))))
}

fn subject_is(subject: &Value, user: &User) -> bool {
    let field = |k: &str| subject.get(k).and_then(Value::as_str).unwrap_or_default();
    match field("kind") {
        "User" => field("name") == user.name,
        "Group" => user.groups.iter().any(|g| g == field("name")),
        "ServiceAccount" => {
            format!("system:serviceaccount:{}:{}", field("namespace"), field("name")) == user.name
        }
        _ => false,
    }
}

/// The rules a binding grants: its Role's, or its ClusterRole's with those of the
/// ClusterRoles it aggregates.
fn rules_of(state: &Registry, binding: &Value, namespace: &str) -> Vec<Value> {
    let role_ref = |k: &str| {
        binding
            .pointer(&format!("/roleRef/{k}"))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let name = role_ref("name");
    let rules = |role: &Value| {
        role.get("rules")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    if role_ref("kind") == "Role" {
        return state
            .store
            .get(&ResKey::new(RBAC, "roles"), &ObjKey::new(namespace, name))
            .map(|r| rules(r))
            .unwrap_or_default();
    }
    let cluster_roles = ResKey::new(RBAC, "clusterroles");
    let Some(role) = state.store.get(&cluster_roles, &ObjKey::new("", name)) else {
        return Vec::new();
    };
    let mut out = rules(role);
    let selectors = role
        .pointer("/aggregationRule/clusterRoleSelectors")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if !selectors.is_empty() {
        for (_, other) in state.store.iter(&cluster_roles) {
            let labels = other
                .pointer("/metadata/labels")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            if selectors
                .iter()
                .any(|s| crate::selector::label_selector_matches(s, &labels))
            {
                out.extend(rules(other));
            }
        }
    }
    out
}

fn rule_allows(rule: &Value, a: &Attributes<'_>) -> bool {
    let list = |k: &str| -> Vec<&str> {
        rule.get(k)
            .and_then(Value::as_array)
            .map(|vs| vs.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    };
    let has = |k: &str, want: &str| list(k).iter().any(|v| *v == "*" || *v == want);
    let combined = if a.subresource.is_empty() {
        a.resource.to_owned()
    } else {
        format!("{}/{}", a.resource, a.subresource)
    };
    let resource_matches = list("resources").iter().any(|r| {
        *r == "*" || *r == combined || (!a.subresource.is_empty() && *r == format!("*/{}", a.subresource))
    });
    let names = list("resourceNames");
    has("verbs", a.verb)
        && has("apiGroups", a.group)
        && resource_matches
        && (names.is_empty() || (!a.name.is_empty() && names.contains(&a.name)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn attrs<'a>(verb: &'a str, resource: &'a str, sub: &'a str, name: &'a str) -> Attributes<'a> {
        Attributes {
            verb,
            group: "",
            resource,
            subresource: sub,
            namespace: "ns",
            name,
        }
    }

    #[test]
    fn rules_match_verbs_resources_subresources_and_names() {
        let rule = json!({"apiGroups": [""], "resources": ["pods", "*/status"], "verbs": ["get", "update"]});
        assert!(rule_allows(&rule, &attrs("get", "pods", "", "a")));
        assert!(rule_allows(&rule, &attrs("update", "services", "status", "a")));
        assert!(!rule_allows(&rule, &attrs("update", "services", "", "a")));
        assert!(!rule_allows(&rule, &attrs("delete", "pods", "", "a")));
        assert!(
            !rule_allows(&rule, &attrs("get", "pods", "log", "a")),
            "pods does not grant pods/log"
        );
        let named = json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"], "resourceNames": ["a"]});
        assert!(rule_allows(&named, &attrs("delete", "pods", "", "a")));
        assert!(!rule_allows(&named, &attrs("delete", "pods", "", "b")));
        assert!(
            !rule_allows(&named, &attrs("list", "pods", "", "")),
            "a list has no name to match"
        );
    }

    #[test]
    fn subjects_match_users_groups_and_service_accounts() {
        let sa = User::service_account("ns", "bot");
        assert!(subject_is(
            &json!({"kind": "ServiceAccount", "namespace": "ns", "name": "bot"}),
            &sa
        ));
        assert!(!subject_is(
            &json!({"kind": "ServiceAccount", "namespace": "other", "name": "bot"}),
            &sa
        ));
        assert!(subject_is(
            &json!({"kind": "Group", "name": "system:serviceaccounts:ns"}),
            &sa
        ));
        assert!(subject_is(
            &json!({"kind": "User", "name": "system:serviceaccount:ns:bot"}),
            &sa
        ));
    }
}
