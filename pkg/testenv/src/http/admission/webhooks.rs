//! The webhooks of the stored `MutatingWebhookConfiguration`s and
//! `ValidatingWebhookConfiguration`s, and which requests they match.

use std::time::Duration;

use serde_json::{Map, Value};

use crate::registry::Registry;
use crate::registry::resource::ResourceDef;
use crate::selector::label_selector_matches;
use crate::store::ResKey;

/// kube-apiserver's default `timeoutSeconds`.
const DEFAULT_TIMEOUT_SECONDS: u64 = 10;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Operation {
    Create,
    Update,
    Delete,
}

impl Operation {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::Create => "CREATE",
            Self::Update => "UPDATE",
            Self::Delete => "DELETE",
        }
    }

    pub(super) fn options_kind(self) -> &'static str {
        match self {
            Self::Create => "CreateOptions",
            Self::Update => "UpdateOptions",
            Self::Delete => "DeleteOptions",
        }
    }
}

/// One webhook of a stored configuration.
#[derive(Clone, Debug)]
pub(super) struct Webhook {
    pub(super) name: String,
    pub(super) mutating: bool,
    pub(super) rules: Vec<Value>,
    pub(super) client: Value,
    pub(super) ignore_failures: bool,
    pub(super) namespace_selector: Option<Value>,
    pub(super) object_selector: Option<Value>,
    /// `None` and `NoneOnDryRun` webhooks may be called for dry runs.
    pub(super) dry_run_safe: bool,
    pub(super) timeout: Duration,
    pub(super) review_version: String,
    pub(super) reinvoke: bool,
}

impl Webhook {
    pub(super) fn parse(config: &Value, mutating: bool) -> Vec<Self> {
        let hooks = config
            .get("webhooks")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        hooks
            .iter()
            .map(|h| {
                let str_of = |k: &str| h.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
                let timeout = h
                    .get("timeoutSeconds")
                    .and_then(Value::as_u64)
                    .unwrap_or(DEFAULT_TIMEOUT_SECONDS);
                let review_version = h
                    .get("admissionReviewVersions")
                    .and_then(Value::as_array)
                    .and_then(|vs| {
                        vs.iter()
                            .filter_map(Value::as_str)
                            .find(|v| *v == "v1" || *v == "v1beta1")
                            .map(str::to_owned)
                    })
                    .unwrap_or_else(|| "v1".to_owned());
                Self {
                    name: str_of("name"),
                    mutating,
                    rules: h
                        .get("rules")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default(),
                    client: h.get("clientConfig").cloned().unwrap_or(Value::Null),
                    ignore_failures: str_of("failurePolicy") == "Ignore",
                    namespace_selector: h.get("namespaceSelector").cloned(),
                    object_selector: h.get("objectSelector").cloned(),
                    dry_run_safe: matches!(str_of("sideEffects").as_str(), "None" | "NoneOnDryRun"),
                    timeout: Duration::from_secs(timeout),
                    review_version,
                    reinvoke: mutating && str_of("reinvocationPolicy") == "IfNeeded",
                }
            })
            .collect()
    }

    pub(super) fn matches(&self, req: &Attributes<'_>, ns_labels: &Map<String, Value>) -> bool {
        self.rules.iter().any(|r| rule_matches(r, req))
            && self
                .namespace_selector
                .as_ref()
                .is_none_or(|sel| !req.namespace_scoped() || label_selector_matches(sel, ns_labels))
            && self.object_selector.as_ref().is_none_or(|sel| {
                [&req.object, &req.old_object]
                    .into_iter()
                    .flatten()
                    .any(|o| label_selector_matches(sel, &labels(o)))
            })
    }
}

/// What a webhook rule is matched against.
pub(super) struct Attributes<'a> {
    pub(super) def: &'a ResourceDef,
    pub(super) subresource: &'a str,
    pub(super) operation: Operation,
    pub(super) object: Option<Value>,
    pub(super) old_object: Option<Value>,
}

impl Attributes<'_> {
    /// Whether the namespace selector applies: to namespaced objects, and to a Namespace
    /// itself (by its own labels).
    fn namespace_scoped(&self) -> bool {
        self.def.namespaced || (self.def.group.is_empty() && self.def.plural == "namespaces")
    }
}

pub(super) fn labels(obj: &Value) -> Map<String, Value> {
    obj.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

fn listed(rule: &Value, key: &str, want: &str) -> bool {
    rule.get(key)
        .and_then(Value::as_array)
        .is_some_and(|vs| vs.iter().filter_map(Value::as_str).any(|v| v == "*" || v == want))
}

fn rule_matches(rule: &Value, req: &Attributes<'_>) -> bool {
    let def = req.def;
    // As kube-apiserver splits them: `pods/*` is pods with any subresource or
    // none, `*` every resource without a subresource.
    let resource_matches = rule.get("resources").and_then(Value::as_array).is_some_and(|rs| {
        rs.iter().filter_map(Value::as_str).any(|r| {
            let (res, sub) = r.split_once('/').unwrap_or((r, ""));
            (res == "*" || res == def.plural) && (sub == "*" || sub == req.subresource)
        })
    });
    let scope_matches = match rule.get("scope").and_then(Value::as_str) {
        Some("Cluster") => !def.namespaced,
        Some("Namespaced") => def.namespaced,
        _ => true,
    };
    listed(rule, "operations", req.operation.as_str())
        && listed(rule, "apiGroups", &def.group)
        && listed(rule, "apiVersions", &def.version)
        && resource_matches
        && scope_matches
}

/// Every stored webhook, mutating ones first, each kind by configuration name.
pub(super) fn webhooks(state: &Registry) -> Vec<Webhook> {
    let mut out = Vec::new();
    for (resource, mutating) in [
        ("mutatingwebhookconfigurations", true),
        ("validatingwebhookconfigurations", false),
    ] {
        let res = ResKey::new("admissionregistration.k8s.io", resource);
        // The store iterates by key, so configurations come by name as kube-apiserver sorts them.
        for (_, config) in state.store.iter(&res) {
            out.extend(Webhook::parse(config, mutating));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn matches(resources: &[&str], plural: &str, subresource: &str) -> bool {
        let defs = crate::registry::resource::builtins();
        let Some(def) = defs.iter().find(|d| d.group.is_empty() && d.plural == plural) else {
            panic!("{plural} is not a core resource");
        };
        let rule =
            json!({"operations": ["*"], "apiGroups": [""], "apiVersions": ["v1"], "resources": resources});
        let attrs = Attributes {
            def,
            subresource,
            operation: Operation::Update,
            object: None,
            old_object: None,
        };
        rule_matches(&rule, &attrs)
    }

    #[test]
    fn resources_match_as_kube_apiserver_splits_them() {
        assert!(matches(&["pods"], "pods", ""));
        assert!(!matches(&["pods"], "pods", "status"));
        assert!(matches(&["pods/*"], "pods", ""), "pods/* includes pods itself");
        assert!(matches(&["pods/*"], "pods", "status"));
        assert!(matches(&["*/status"], "pods", "status"));
        assert!(!matches(&["*/status"], "pods", ""));
        assert!(matches(&["*"], "services", ""));
        assert!(
            !matches(&["*"], "services", "status"),
            "* leaves subresources out"
        );
        assert!(matches(&["*/*"], "services", "status"));
        assert!(!matches(&["pods/status"], "services", "status"));
    }
}
