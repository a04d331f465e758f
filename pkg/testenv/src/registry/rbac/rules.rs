//! kube-apiserver's RBAC rule resolver: the bindings that name a user, the rules of
//! their roles, and whether a rule covers a request.

use std::fmt;

use serde_json::Value;

use crate::registry::Registry;
use crate::store::{ObjKey, ResKey};

use super::bootstrap;
use super::{Attributes, NonResourceAttributes, User};

const RBAC: &str = "rbac.authorization.k8s.io";

fn text<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

fn strings<'a>(v: &'a Value, key: &str) -> Vec<&'a str> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|vs| vs.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Where a rule comes from, as the RBAC authorizer names it in a reason:
/// `ClusterRoleBinding "x" of ClusterRole "y" to Group "z"`.
pub(super) struct Source<'a> {
    binding: &'a Value,
    subject: &'a Value,
    /// The RoleBinding's namespace; empty for a ClusterRoleBinding.
    namespace: &'a str,
}

impl fmt::Display for Source<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = text(self.binding, "/metadata/name");
        let binding = if self.namespace.is_empty() {
            format!("ClusterRoleBinding {name:?}")
        } else {
            format!("RoleBinding {:?}", format!("{name}/{}", self.namespace))
        };
        let subject_name = text(self.subject, "/name");
        let subject = match text(self.subject, "/kind") {
            "ServiceAccount" => {
                let ns = match text(self.subject, "/namespace") {
                    "" => self.namespace,
                    ns => ns,
                };
                format!("ServiceAccount {:?}", format!("{subject_name}/{ns}"))
            }
            kind => format!("{kind} {subject_name:?}"),
        };
        write!(
            f,
            "{binding} of {} {:?} to {subject}",
            text(self.binding, "/roleRef/kind"),
            text(self.binding, "/roleRef/name"),
        )
    }
}

/// Calls `visit` with each rule granted to `user` by the ClusterRoleBindings, then by
/// the RoleBindings of `namespace` (none when it is empty), each in name order, until
/// `visit` answers false. A binding whose role cannot be found grants nothing; why is
/// added to `errors`, as the resolver reports it.
pub(super) fn visit_rules(
    state: &Registry,
    user: &User,
    namespace: &str,
    errors: &mut Vec<String>,
    visit: &mut dyn FnMut(&Source<'_>, &Value) -> bool,
) {
    for binding in cluster_role_bindings(state) {
        if !visit_binding(state, user, binding, "", errors, visit) {
            return;
        }
    }
    if namespace.is_empty() {
        return;
    }
    let role_bindings = ResKey::new(RBAC, "rolebindings");
    let in_namespace = state
        .store
        .iter(&role_bindings)
        .filter(|(k, _)| k.namespace == namespace);
    for (_, binding) in in_namespace {
        if !visit_binding(state, user, binding, namespace, errors, visit) {
            return;
        }
    }
}

fn visit_binding(
    state: &Registry,
    user: &User,
    binding: &Value,
    namespace: &str,
    errors: &mut Vec<String>,
    visit: &mut dyn FnMut(&Source<'_>, &Value) -> bool,
) -> bool {
    // The first subject naming the user is the one a reason names.
    let Some(subject) = binding
        .get("subjects")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|s| applies_to(s, user, namespace))
    else {
        return true;
    };
    match role_rules(state, binding, namespace) {
        Ok(rules) => {
            let source = Source {
                binding,
                subject,
                namespace,
            };
            rules.iter().all(|rule| visit(&source, rule))
        }
        Err(e) => {
            errors.push(e);
            true
        }
    }
}

/// Stored objects of a cluster-scoped RBAC resource and the bootstrap ones no stored
/// object replaces, in name order as a list from storage would be.
fn with_bootstrap<'a>(state: &'a Registry, plural: &str, bootstrap: &'a [Value]) -> Vec<&'a Value> {
    let key = ResKey::new(RBAC, plural);
    let stored: Vec<&Value> = state.store.iter(&key).map(|(_, v)| &**v).collect();
    let name = |v: &Value| text(v, "/metadata/name").to_owned();
    let mut all: Vec<&Value> = bootstrap
        .iter()
        .filter(|b| !stored.iter().any(|s| name(s) == name(b)))
        .collect();
    all.extend(stored);
    all.sort_by_key(|v| name(v));
    all
}

fn cluster_role_bindings(state: &Registry) -> Vec<&Value> {
    with_bootstrap(state, "clusterrolebindings", bootstrap::cluster_role_bindings())
}

fn cluster_roles(state: &Registry) -> Vec<&Value> {
    with_bootstrap(state, "clusterroles", bootstrap::cluster_roles())
}

/// Whether a binding's subject is the user: a RoleBinding's service account without a
/// namespace is one of the binding's namespace.
fn applies_to(subject: &Value, user: &User, namespace: &str) -> bool {
    let name = text(subject, "/name");
    match text(subject, "/kind") {
        "User" => name == user.name,
        "Group" => user.groups.iter().any(|g| g == name),
        "ServiceAccount" => {
            let ns = match text(subject, "/namespace") {
                "" => namespace,
                ns => ns,
            };
            !ns.is_empty() && format!("system:serviceaccount:{ns}:{name}") == user.name
        }
        _ => false,
    }
}

/// The rules a binding grants: its Role's, or its ClusterRole's with those of the
/// ClusterRoles it aggregates; the lister's NotFound message when the role is missing.
fn role_rules(state: &Registry, binding: &Value, namespace: &str) -> Result<Vec<Value>, String> {
    let name = text(binding, "/roleRef/name");
    let rules = |role: &Value| {
        role.get("rules")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    match text(binding, "/roleRef/kind") {
        "Role" => state
            .store
            .get(&ResKey::new(RBAC, "roles"), &ObjKey::new(namespace, name))
            .map(|r| rules(r))
            .ok_or_else(|| format!("role.{RBAC} {name:?} not found")),
        "ClusterRole" => {
            let all = cluster_roles(state);
            let Some(role) = all.iter().find(|r| text(r, "/metadata/name") == name) else {
                return Err(format!("clusterrole.{RBAC} {name:?} not found"));
            };
            let mut out = rules(role);
            let selectors = array_at(role, "/aggregationRule/clusterRoleSelectors");
            if !selectors.is_empty() {
                for other in &all {
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
            Ok(out)
        }
        kind => Err(format!("unsupported role reference kind: {kind:?}")),
    }
}

fn array_at(v: &Value, pointer: &str) -> Vec<Value> {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// Whether `rule` grants a resource request: verb, API group, resource (with
/// `<resource>/<subresource>`, `*` and `*/<subresource>`) and, when it lists any,
/// the resource name.
pub(super) fn allows_resource(rule: &Value, a: &Attributes<'_>) -> bool {
    let has = |k: &str, want: &str| strings(rule, k).iter().any(|v| *v == "*" || *v == want);
    let combined = if a.subresource.is_empty() {
        a.resource.to_owned()
    } else {
        format!("{}/{}", a.resource, a.subresource)
    };
    let resource_matches = strings(rule, "resources").iter().any(|r| {
        *r == "*" || *r == combined || (!a.subresource.is_empty() && *r == format!("*/{}", a.subresource))
    });
    let names = strings(rule, "resourceNames");
    has("verbs", a.verb)
        && has("apiGroups", a.group)
        && resource_matches
        && (names.is_empty() || names.contains(&a.name))
}

/// Whether `rule` grants a request for a path: its verb, and a URL that is the path,
/// `*`, or a prefix of it ending in `*`.
pub(super) fn allows_non_resource(rule: &Value, a: &NonResourceAttributes<'_>) -> bool {
    let verb = strings(rule, "verbs").iter().any(|v| *v == "*" || *v == a.verb);
    verb && strings(rule, "nonResourceURLs").iter().any(|url| {
        *url == "*"
            || *url == a.path
            || url
                .strip_suffix('*')
                .is_some_and(|prefix| a.path.starts_with(prefix.trim_end_matches('*')))
    })
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
        assert!(allows_resource(&rule, &attrs("get", "pods", "", "a")));
        assert!(allows_resource(
            &rule,
            &attrs("update", "services", "status", "a")
        ));
        assert!(!allows_resource(&rule, &attrs("update", "services", "", "a")));
        assert!(!allows_resource(&rule, &attrs("delete", "pods", "", "a")));
        assert!(
            !allows_resource(&rule, &attrs("get", "pods", "log", "a")),
            "pods does not grant pods/log"
        );
        let named = json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"], "resourceNames": ["a"]});
        assert!(allows_resource(&named, &attrs("delete", "pods", "", "a")));
        assert!(!allows_resource(&named, &attrs("delete", "pods", "", "b")));
        assert!(
            !allows_resource(&named, &attrs("list", "pods", "", "")),
            "a list has no name to match"
        );
        let urls = json!({"nonResourceURLs": ["/healthz", "/apis/*"], "verbs": ["get"]});
        assert!(
            !allows_resource(&urls, &attrs("get", "pods", "", "a")),
            "a URL rule grants no resource"
        );
    }

    #[test]
    fn non_resource_rules_match_paths_exactly_or_by_a_starred_prefix() {
        let rule = json!({"nonResourceURLs": ["/healthz", "/apis/*"], "verbs": ["get"]});
        let at = |verb, path| allows_non_resource(&rule, &NonResourceAttributes { verb, path });
        assert!(at("get", "/healthz"));
        assert!(!at("get", "/healthz/ping"), "no star, no prefix");
        assert!(at("get", "/apis/apps/v1"));
        assert!(at("get", "/apis/"));
        assert!(!at("get", "/apis"), "the prefix keeps its slash");
        assert!(!at("post", "/healthz"));
        let all = json!({"nonResourceURLs": ["*"], "verbs": ["*"]});
        assert!(allows_non_resource(
            &all,
            &NonResourceAttributes {
                verb: "delete",
                path: "/anything"
            }
        ));
        let resources = json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]});
        assert!(!allows_non_resource(
            &resources,
            &NonResourceAttributes {
                verb: "get",
                path: "/healthz"
            }
        ));
    }

    #[test]
    fn subjects_match_users_groups_and_service_accounts() {
        let sa = User::service_account("ns", "bot");
        let sa_subject = json!({"kind": "ServiceAccount", "namespace": "ns", "name": "bot"});
        assert!(applies_to(&sa_subject, &sa, ""));
        assert!(!applies_to(
            &json!({"kind": "ServiceAccount", "namespace": "other", "name": "bot"}),
            &sa,
            "ns"
        ));
        let local = json!({"kind": "ServiceAccount", "name": "bot"});
        assert!(
            applies_to(&local, &sa, "ns"),
            "a RoleBinding's account defaults to its namespace"
        );
        assert!(!applies_to(&local, &sa, ""), "a ClusterRoleBinding's does not");
        assert!(applies_to(
            &json!({"kind": "Group", "name": "system:serviceaccounts:ns"}),
            &sa,
            ""
        ));
        assert!(applies_to(
            &json!({"kind": "User", "name": "system:serviceaccount:ns:bot"}),
            &sa,
            ""
        ));
    }

    #[test]
    fn sources_are_described_as_the_rbac_authorizer_words_them() {
        let binding = json!({"metadata": {"name": "b"}, "roleRef": {"kind": "ClusterRole", "name": "edit"}});
        let sa = json!({"kind": "ServiceAccount", "name": "bot"});
        let in_ns = Source {
            binding: &binding,
            subject: &sa,
            namespace: "shop",
        };
        assert_eq!(
            in_ns.to_string(),
            "RoleBinding \"b/shop\" of ClusterRole \"edit\" to ServiceAccount \"bot/shop\""
        );
        let group = json!({"kind": "Group", "name": "devs"});
        let cluster = Source {
            binding: &binding,
            subject: &group,
            namespace: "",
        };
        assert_eq!(
            cluster.to_string(),
            "ClusterRoleBinding \"b\" of ClusterRole \"edit\" to Group \"devs\""
        );
    }
}
