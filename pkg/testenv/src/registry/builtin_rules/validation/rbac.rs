//! rbac.authorization.k8s.io: the rules of Roles and ClusterRoles, and what a binding
//! refers to, which never changes (`ValidatePolicyRule`, `ValidateRoleBinding` and
//! `ValidateRoleBindingUpdate`).

use serde_json::{Value, json};

use crate::errors::FieldError;

const GROUP: &str = "rbac.authorization.k8s.io";

fn list_len(v: &Value, key: &str) -> usize {
    v.get(key).and_then(Value::as_array).map_or(0, Vec::len)
}

/// Each rule needs verbs, and either resources in API groups or non-resource URLs
/// (which only cluster-wide roles may have).
pub(super) fn rules(obj: &Value, namespaced: bool, errs: &mut Vec<FieldError>) {
    let rules = obj
        .get("rules")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (i, rule) in rules.iter().enumerate() {
        let at = format!("rules[{i}]");
        if list_len(rule, "verbs") == 0 {
            errs.push(FieldError::required(
                format!("{at}.verbs"),
                "verbs must contain at least one value",
            ));
        }
        if list_len(rule, "nonResourceURLs") > 0 {
            let urls = rule.get("nonResourceURLs").cloned().unwrap_or(Value::Null);
            if namespaced {
                errs.push(FieldError::invalid(
                    format!("{at}.nonResourceURLs"),
                    urls.clone(),
                    "namespaced rules cannot apply to non-resource URLs",
                ));
            }
            if ["apiGroups", "resources", "resourceNames"]
                .iter()
                .any(|k| list_len(rule, k) > 0)
            {
                errs.push(FieldError::invalid(
                    format!("{at}.nonResourceURLs"),
                    urls,
                    "rules cannot apply to both regular resources and non-resource URLs",
                ));
            }
            continue;
        }
        if list_len(rule, "apiGroups") == 0 {
            errs.push(FieldError::required(
                format!("{at}.apiGroups"),
                "resource rules must supply at least one api group",
            ));
        }
        if list_len(rule, "resources") == 0 {
            errs.push(FieldError::required(
                format!("{at}.resources"),
                "resource rules must supply at least one resource",
            ));
        }
    }
}

fn role_ref_part<'a>(obj: &'a Value, key: &str) -> &'a str {
    obj.pointer(&format!("/roleRef/{key}"))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// A RoleBinding refers to a Role or ClusterRole, a ClusterRoleBinding to a
/// ClusterRole, in the RBAC group; the reference is fixed once the binding exists.
pub(super) fn binding(obj: &Value, old: Option<&Value>, cluster: bool, errs: &mut Vec<FieldError>) {
    let group = role_ref_part(obj, "apiGroup");
    if group != GROUP {
        errs.push(FieldError::not_supported(
            "roleRef.apiGroup",
            json!(group),
            &[GROUP.into()],
        ));
    }
    let kind = role_ref_part(obj, "kind");
    let kinds: &[&str] = if cluster {
        &["ClusterRole"]
    } else {
        &["Role", "ClusterRole"]
    };
    if !kinds.contains(&kind) {
        let allowed: Vec<String> = kinds.iter().map(|k| (*k).to_owned()).collect();
        errs.push(FieldError::not_supported("roleRef.kind", json!(kind), &allowed));
    }
    if role_ref_part(obj, "name").is_empty() {
        errs.push(FieldError::required("roleRef.name", ""));
    }
    if let Some(old) = old
        && ["apiGroup", "kind", "name"]
            .iter()
            .any(|k| role_ref_part(obj, k) != role_ref_part(old, k))
    {
        let shown = format!(
            "rbac.RoleRef{{APIGroup:{:?}, Kind:{:?}, Name:{:?}}}",
            group,
            kind,
            role_ref_part(obj, "name")
        );
        errs.push(FieldError::invalid_raw("roleRef", shown, "cannot change roleRef"));
    }
}
