//! kube-apiserver's authorizers: `system:masters` may do anything (its privileged
//! group authorizer), and everyone else what the stored Roles, ClusterRoles and
//! their bindings grant (its RBAC authorizer), aggregated ClusterRoles and the
//! bootstrap roles every authenticated user is bound to included. Who makes a
//! request is the HTTP layer's to say (see `crate::http::authentication`).

mod bootstrap;
mod rules;

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::errors::ErrorStatus;
use crate::registry::Registry;

use rules::{allows_non_resource, allows_resource, visit_rules};

/// Who makes a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct User {
    pub(crate) name: String,
    pub(crate) groups: Vec<String>,
    pub(crate) uid: String,
    pub(crate) extra: BTreeMap<String, Vec<String>>,
}

impl User {
    pub(crate) fn new(name: impl Into<String>, groups: Vec<String>) -> Self {
        Self {
            name: name.into(),
            groups,
            uid: String::new(),
            extra: BTreeMap::new(),
        }
    }

    pub(crate) fn admin() -> Self {
        Self::new(
            "system:admin",
            vec!["system:masters".to_owned(), "system:authenticated".to_owned()],
        )
    }

    /// A service account, with the groups its token authenticates it in.
    pub(crate) fn service_account(namespace: &str, name: &str) -> Self {
        let mut groups = service_account_groups(namespace);
        groups.push("system:authenticated".to_owned());
        Self::new(format!("system:serviceaccount:{namespace}:{name}"), groups)
    }

    fn is_admin(&self) -> bool {
        self.groups.iter().any(|g| g == "system:masters")
    }
}

/// The groups of every service account in `namespace`.
pub(crate) fn service_account_groups(namespace: &str) -> Vec<String> {
    vec![
        "system:serviceaccounts".to_owned(),
        format!("system:serviceaccounts:{namespace}"),
    ]
}

/// What a resource request asks to do.
#[derive(Clone, Copy)]
pub(crate) struct Attributes<'a> {
    pub(crate) verb: &'a str,
    pub(crate) group: &'a str,
    pub(crate) resource: &'a str,
    pub(crate) subresource: &'a str,
    pub(crate) namespace: &'a str,
    pub(crate) name: &'a str,
}

/// What a request for a path outside the API (`/healthz`, `/api`) asks to do.
pub(crate) struct NonResourceAttributes<'a> {
    pub(crate) verb: &'a str,
    pub(crate) path: &'a str,
}

/// A request, as the authorizers see it.
pub(crate) enum Asked<'a> {
    Resource(Attributes<'a>),
    NonResource(NonResourceAttributes<'a>),
}

/// An authorizer's answer. RBAC only ever allows or has no opinion, so a request it
/// does not allow is not `denied` either.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Decision {
    pub(crate) allowed: bool,
    /// `RBAC: allowed by ...` when allowed, the errors met looking for a rule when
    /// not; empty when allowed as a member of `system:masters`.
    pub(crate) reason: String,
}

/// Whether `user` may do what is asked, and why, as kube-apiserver's authorizer chain
/// answers (a SubjectAccessReview's status).
pub(crate) fn decide(state: &Registry, user: &User, asked: &Asked<'_>) -> Decision {
    if user.is_admin() {
        return Decision {
            allowed: true,
            reason: String::new(),
        };
    }
    let namespace = match asked {
        Asked::Resource(a) => a.namespace,
        Asked::NonResource(_) => "",
    };
    let mut errors = Vec::new();
    let mut reason = None;
    visit_rules(state, user, namespace, &mut errors, &mut |source, rule| {
        let allows = match asked {
            Asked::Resource(a) => allows_resource(rule, a),
            Asked::NonResource(a) => allows_non_resource(rule, a),
        };
        if allows {
            reason = Some(format!("RBAC: allowed by {source}"));
        }
        !allows
    });
    match reason {
        Some(reason) => Decision {
            allowed: true,
            reason,
        },
        None if errors.is_empty() => Decision {
            allowed: false,
            reason: String::new(),
        },
        None => Decision {
            allowed: false,
            reason: format!("RBAC: {}", aggregate(&errors)),
        },
    }
}

/// Errors as apimachinery's `NewAggregate` prints them: each distinct message once,
/// in brackets when there are several.
fn aggregate(errors: &[String]) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for e in errors {
        if !seen.contains(&e.as_str()) {
            seen.push(e);
        }
    }
    match seen.as_slice() {
        [one] => (*one).to_owned(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// `Ok` when `user` may make the request, else kube-apiserver's 403, with the
/// authorizer's reason after the message when it gives one.
pub(crate) fn authorize(state: &Registry, user: &User, a: &Attributes<'_>) -> Result<(), ErrorStatus> {
    let decision = decide(state, user, &Asked::Resource(*a));
    if decision.allowed {
        return Ok(());
    }
    Err(forbidden(user, a, &decision.reason))
}

/// kube-apiserver's 403 for a resource request `user` may not make.
pub(crate) fn forbidden(user: &User, a: &Attributes<'_>, reason: &str) -> ErrorStatus {
    let resource = if a.subresource.is_empty() {
        a.resource.to_owned()
    } else {
        format!("{}/{}", a.resource, a.subresource)
    };
    let scope = if a.namespace.is_empty() {
        "at the cluster scope".to_owned()
    } else {
        format!("in the namespace \"{}\"", a.namespace)
    };
    let mut why = format!(
        "User \"{}\" cannot {} resource \"{resource}\" in API group \"{}\" {scope}",
        user.name, a.verb, a.group
    );
    if !reason.is_empty() {
        why = format!("{why}: {reason}");
    }
    let qualified = crate::errors::qualified(a.group, a.resource);
    let message = if a.name.is_empty() {
        format!("{qualified} is forbidden: {why}")
    } else {
        format!("{qualified} \"{}\" is forbidden: {why}", a.name)
    };
    ErrorStatus::forbidden(message).with_details(a.group, a.resource, a.name)
}

/// What `user` may do in `namespace`, as a SelfSubjectRulesReview's status reports it.
pub(crate) struct Rules {
    /// `ResourceRule`s: verbs, apiGroups, resources and resourceNames.
    pub(crate) resource: Vec<Value>,
    /// `NonResourceRule`s: verbs and nonResourceURLs.
    pub(crate) non_resource: Vec<Value>,
    /// Why some bindings gave no rules (`evaluationError`); empty when none failed.
    pub(crate) error: String,
}

/// The rules of every binding naming `user` in the cluster and in `namespace`, as
/// kube-apiserver's RBAC rule resolver lists them: a rule with both resources and
/// URLs (which validation refuses) would count as one of each.
pub(crate) fn rules_for(state: &Registry, user: &User, namespace: &str) -> Rules {
    let mut out = Rules {
        resource: Vec::new(),
        non_resource: Vec::new(),
        error: String::new(),
    };
    let mut errors = Vec::new();
    visit_rules(state, user, namespace, &mut errors, &mut |_, rule| {
        let list = |k: &str| {
            rule.get(k)
                .filter(|v| v.as_array().is_some_and(|a| !a.is_empty()))
        };
        let verbs = rule.get("verbs").cloned().unwrap_or(Value::Null);
        if let Some(resources) = list("resources") {
            let mut r = json!({"verbs": verbs, "resources": resources});
            for k in ["apiGroups", "resourceNames"] {
                if let Some(v) = list(k) {
                    r[k] = v.clone();
                }
            }
            out.resource.push(r);
        }
        if let Some(urls) = list("nonResourceURLs") {
            out.non_resource
                .push(json!({"verbs": verbs, "nonResourceURLs": urls}));
        }
        true
    });
    if !errors.is_empty() {
        out.error = aggregate(&errors);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{ObjKey, ResKey, Store};

    fn registry(objects: &[Value]) -> Registry {
        let mut r = Registry {
            store: Store::new(100, 1 << 20),
            resources: Vec::new(),
            names: crate::names::NameGenerator::Random,
            uids: crate::names::UidGenerator::Random,
            controllers: crate::registry::controllers::Controllers::default(),
            converters: std::collections::BTreeMap::new(),
        };
        for o in objects {
            let plural = match o["kind"].as_str() {
                Some("Role") => "roles",
                Some("RoleBinding") => "rolebindings",
                Some("ClusterRole") => "clusterroles",
                _ => "clusterrolebindings",
            };
            let ns = o
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let name = o
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            r.store.put(
                &ResKey::new("rbac.authorization.k8s.io", plural),
                ObjKey::new(ns, name),
                o.clone(),
            );
        }
        r
    }

    fn resource<'a>(verb: &'a str, group: &'a str, resource: &'a str, namespace: &'a str) -> Asked<'a> {
        Asked::Resource(Attributes {
            verb,
            group,
            resource,
            subresource: "",
            namespace,
            name: "",
        })
    }

    #[test]
    fn every_authenticated_user_may_review_itself_and_read_discovery() {
        let state = registry(&[]);
        let bot = User::service_account("ns", "bot");
        let review = decide(
            &state,
            &bot,
            &resource("create", "authorization.k8s.io", "selfsubjectaccessreviews", ""),
        );
        assert_eq!(
            review.reason,
            "RBAC: allowed by ClusterRoleBinding \"system:basic-user\" of ClusterRole \"system:basic-user\" to Group \"system:authenticated\""
        );
        let api = Asked::NonResource(NonResourceAttributes {
            verb: "get",
            path: "/apis/apps/v1",
        });
        assert!(decide(&state, &bot, &api).allowed);
        let pods = decide(&state, &bot, &resource("list", "", "pods", "ns"));
        assert_eq!(
            pods,
            Decision {
                allowed: false,
                reason: String::new()
            }
        );
        let unauthenticated = User::new("nobody", Vec::new());
        assert!(!decide(&state, &unauthenticated, &api).allowed);
    }

    #[test]
    fn a_binding_to_a_missing_role_is_the_reason_for_a_refusal() {
        let state = registry(&[
            json!({"kind": "RoleBinding", "metadata": {"name": "b", "namespace": "ns"},
                "subjects": [{"kind": "ServiceAccount", "name": "bot"}],
                "roleRef": {"kind": "Role", "name": "gone"}}),
            json!({"kind": "ClusterRoleBinding", "metadata": {"name": "c"},
                "subjects": [{"kind": "Group", "name": "system:serviceaccounts"}],
                "roleRef": {"kind": "ClusterRole", "name": "gone"}}),
        ]);
        let bot = User::service_account("ns", "bot");
        let d = decide(&state, &bot, &resource("get", "", "pods", "ns"));
        assert_eq!(
            d.reason,
            "RBAC: [clusterrole.rbac.authorization.k8s.io \"gone\" not found, role.rbac.authorization.k8s.io \"gone\" not found]"
        );
        let err = authorize(
            &state,
            &bot,
            &Attributes {
                verb: "get",
                group: "",
                resource: "pods",
                subresource: "",
                namespace: "ns",
                name: "p",
            },
        )
        .unwrap_err();
        assert!(
            err.message.ends_with(&format!(": {}", d.reason)),
            "{}",
            err.message
        );
        let rules = rules_for(&state, &bot, "ns");
        assert_eq!(
            rules.error,
            "[clusterrole.rbac.authorization.k8s.io \"gone\" not found, role.rbac.authorization.k8s.io \"gone\" not found]"
        );
    }

    #[test]
    fn rules_are_listed_cluster_bindings_first_and_admin_has_every_rule() {
        let state = registry(&[
            json!({"kind": "Role", "metadata": {"name": "r", "namespace": "ns"},
                "rules": [{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create"]}]}),
            json!({"kind": "RoleBinding", "metadata": {"name": "b", "namespace": "ns"},
                "subjects": [{"kind": "ServiceAccount", "name": "bot"}],
                "roleRef": {"kind": "Role", "name": "r"}}),
        ]);
        let bot = User::service_account("ns", "bot");
        let rules = rules_for(&state, &bot, "ns");
        assert_eq!(
            rules.resource.last(),
            Some(&json!({"verbs": ["create"], "apiGroups": ["batch"], "resources": ["jobs"]}))
        );
        assert_eq!(rules.resource.len(), 3, "{:?}", rules.resource);
        assert!(rules_for(&state, &bot, "other").resource.len() == 2);
        let admin = rules_for(&state, &User::admin(), "ns");
        assert_eq!(
            admin.resource.first(),
            Some(&json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}))
        );
        assert_eq!(
            admin.non_resource.first(),
            Some(&json!({"verbs": ["*"], "nonResourceURLs": ["*"]}))
        );
    }

    #[test]
    fn a_stored_bootstrap_object_replaces_the_built_in_one() {
        let state = registry(&[json!({"kind": "ClusterRoleBinding",
            "metadata": {"name": "system:basic-user"},
            "subjects": [], "roleRef": {"kind": "ClusterRole", "name": "system:basic-user"}})]);
        let bot = User::service_account("ns", "bot");
        let review = resource("create", "authorization.k8s.io", "selfsubjectaccessreviews", "");
        assert!(!decide(&state, &bot, &review).allowed);
    }
}
