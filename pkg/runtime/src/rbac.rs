//! What a process asks of the API server, as the RBAC rules that must grant it.
//!
//! The injection [`Context`](crate::injection::Context) records what its
//! constructors ask for: every informer is a `list` and `watch` of its kind, the
//! generic reconciler adds the `update` of its kind's status (and the `patch` of
//! its finalizers), events are `create`d and `patch`ed, and a constructor
//! declares the rest, what its reconciler writes itself:
//!
//! ```no_run
//! # fn new_controller(ctx: &kinject_runtime::injection::Context) {
//! use k8s_openapi::api::core::v1::Pod;
//! use kinject_runtime::rbac::Verb;
//! ctx.needs::<Pod>(&[Verb::Create, Verb::Delete]);
//! # }
//! ```
//!
//! `sharedmain` adds what the process itself does (its configuration ConfigMaps,
//! its leader-election leases), and the application's `rbac` command writes the
//! ClusterRole and Role from the sum, so the RBAC in `config/` grants exactly what
//! the code does. Kubebuilder has its authors write `+kubebuilder:rbac` markers
//! beside the code instead; here the reads cannot be forgotten, since asking for
//! an informer is what declares them.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::rbac::v1::PolicyRule;
use kube::Resource;

/// An RBAC verb: kinject-types' [`Verb`], which the API
/// server's authorizer (testenv's too) reads as well.
pub use crate::apis::Verb;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Target {
    /// `None`: in every namespace (and cluster-scoped kinds).
    namespace: Option<String>,
    group: String,
    /// The resource, with `/<subresource>` for a subresource.
    resource: String,
    /// `None`: every object; else only this one (the rule's `resourceNames`,
    /// which also covers a list or watch selecting `metadata.name`).
    name: Option<String>,
}

/// Verbs on resources, each in every namespace or in one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Permissions {
    grants: BTreeMap<Target, BTreeSet<Verb>>,
}

impl Permissions {
    /// Nothing allowed.
    pub fn new() -> Self {
        Self::default()
    }

    /// `verbs` on kind `K`, in `namespace` or (`None`) everywhere.
    pub fn allow<K: Resource<DynamicType = ()>>(&mut self, namespace: Option<&str>, verbs: &[Verb]) {
        self.allow_resource(namespace, &K::group(&()), &K::plural(&()), verbs);
    }

    /// `verbs` on `subresource` (`status`, `scale`) of kind `K`.
    pub fn allow_subresource<K: Resource<DynamicType = ()>>(
        &mut self,
        namespace: Option<&str>,
        subresource: &str,
        verbs: &[Verb],
    ) {
        let resource = format!("{}/{subresource}", K::plural(&()));
        self.allow_resource(namespace, &K::group(&()), &resource, verbs);
    }

    /// `verbs` on the one object of kind `K` named `name`: a rule with
    /// `resourceNames`, as a process that reads or writes a single Secret or
    /// ConfigMap should be granted.
    pub fn allow_named<K: Resource<DynamicType = ()>>(
        &mut self,
        namespace: Option<&str>,
        name: &str,
        verbs: &[Verb],
    ) {
        let target = Target {
            namespace: namespace.map(str::to_owned),
            group: K::group(&()).into_owned(),
            resource: K::plural(&()).into_owned(),
            name: Some(name.to_owned()),
        };
        self.grants.entry(target).or_default().extend(verbs);
    }

    /// `verbs` on `resource` (`<plural>` or `<plural>/<subresource>`) of API group
    /// `group` (`""` for the core group).
    pub fn allow_resource(&mut self, namespace: Option<&str>, group: &str, resource: &str, verbs: &[Verb]) {
        let target = Target {
            namespace: namespace.map(str::to_owned),
            group: group.to_owned(),
            resource: resource.to_owned(),
            name: None,
        };
        self.grants.entry(target).or_default().extend(verbs);
    }

    /// Adds everything `other` allows.
    pub fn merge(&mut self, other: &Permissions) {
        for (target, verbs) in &other.grants {
            self.grants.entry(target.clone()).or_default().extend(verbs);
        }
    }

    /// The namespaces with grants of their own, sorted.
    pub fn namespaces(&self) -> Vec<String> {
        let set: BTreeSet<&String> = self.grants.keys().filter_map(|t| t.namespace.as_ref()).collect();
        set.into_iter().cloned().collect()
    }

    /// The rules granting what is allowed in `namespace` (`None`: everywhere, a
    /// ClusterRole's), one per API group and set of verbs, resources sorted; what
    /// is allowed everywhere is left out of a namespace's rules, and what is
    /// allowed on every object out of a named object's rule.
    pub fn rules(&self, namespace: Option<&str>) -> Vec<PolicyRule> {
        type Key = (String, Vec<Verb>, Option<String>);
        let mut grouped: BTreeMap<Key, BTreeSet<String>> = BTreeMap::new();
        for (target, verbs) in &self.grants {
            if target.namespace.as_deref() != namespace {
                continue;
            }
            let mut covered = BTreeSet::new();
            for (wider_namespace, wider_name) in [
                (None, target.name.clone()),
                (target.namespace.clone(), None),
                (None, None),
            ] {
                let wider = Target {
                    namespace: wider_namespace,
                    name: wider_name,
                    ..target.clone()
                };
                if wider != *target
                    && let Some(granted) = self.grants.get(&wider)
                {
                    covered.extend(granted);
                }
            }
            let verbs: Vec<Verb> = verbs.difference(&covered).copied().collect();
            if verbs.is_empty() {
                continue;
            }
            grouped
                .entry((target.group.clone(), verbs, target.name.clone()))
                .or_default()
                .insert(target.resource.clone());
        }
        grouped
            .into_iter()
            .map(|((group, verbs, name), resources)| PolicyRule {
                api_groups: Some(vec![group]),
                resources: Some(resources.into_iter().collect()),
                resource_names: name.map(|name| vec![name]),
                verbs: verbs.iter().map(|v| v.as_str().to_owned()).collect(),
                ..PolicyRule::default()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};

    #[test]
    fn rules_group_resources_by_api_group_and_verbs() {
        let mut p = Permissions::new();
        p.allow::<Pod>(None, &[Verb::Watch, Verb::List]);
        p.allow::<Service>(None, &[Verb::List, Verb::Watch]);
        p.allow::<Pod>(None, &[Verb::Delete, Verb::Create]);
        p.allow_subresource::<Pod>(None, "status", &[Verb::Update]);
        let rules = p.rules(None);
        let shown: Vec<(Vec<String>, Vec<String>)> = rules
            .iter()
            .map(|r| (r.resources.clone().unwrap_or_default(), r.verbs.clone()))
            .collect();
        let s = |v: &[&str]| v.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            shown,
            vec![
                (s(&["services"]), s(&["list", "watch"])),
                (s(&["pods"]), s(&["list", "watch", "create", "delete"])),
                (s(&["pods/status"]), s(&["update"])),
            ]
        );
        assert!(rules.iter().all(|r| r.api_groups == Some(vec![String::new()])));
    }

    #[test]
    fn a_namespace_gets_only_what_is_not_allowed_everywhere() {
        let mut p = Permissions::new();
        p.allow::<ConfigMap>(Some("system"), &[Verb::Get, Verb::List, Verb::Watch]);
        p.allow::<ConfigMap>(None, &[Verb::List, Verb::Watch]);
        let mut other = Permissions::new();
        other.allow_resource(Some("system"), "coordination.k8s.io", "leases", &[Verb::Get]);
        p.merge(&other);
        assert_eq!(p.namespaces(), vec!["system".to_owned()]);
        let rules = p.rules(Some("system"));
        assert_eq!(rules.len(), 2);
        assert_eq!(rules[0].resources, Some(vec!["configmaps".to_owned()]));
        assert_eq!(rules[0].verbs, vec!["get".to_owned()]);
        assert_eq!(rules[1].api_groups, Some(vec!["coordination.k8s.io".to_owned()]));
    }

    #[test]
    fn a_named_object_gets_a_rule_of_its_own() {
        let mut p = Permissions::new();
        p.allow_named::<Secret>(
            Some("system"),
            "certs",
            &[Verb::Get, Verb::List, Verb::Watch, Verb::Update],
        );
        p.allow::<Secret>(Some("system"), &[Verb::Get]);
        let rules = p.rules(Some("system"));
        assert_eq!(rules.len(), 2, "{rules:?}");
        let named = rules.iter().find(|r| r.resource_names.is_some()).unwrap();
        assert_eq!(named.resource_names, Some(vec!["certs".to_owned()]));
        assert_eq!(
            named.verbs,
            ["list", "watch", "update"],
            "get is granted on every Secret already"
        );
        assert!(p.rules(None).is_empty());
    }
}
