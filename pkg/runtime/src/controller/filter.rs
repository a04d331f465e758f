//! Predicates that decide which objects' events reach a controller: Knative's
//! `FilterController*`, `FilterWithName*` and the `reconciler` package's label,
//! annotation and namespace filters, with `not`, `or` and `chain` to combine
//! them.
//!
//! Each returns a cheap, cloneable `Fn(&K) -> bool` for any
//! [`kube::Resource`] `K`, to be checked in an informer event handler before
//! enqueueing.
//!
//! ```
//! use k8s_openapi::api::apps::v1::Deployment;
//! use kinject_runtime::controller::filter::{chain, filter_controller_gk, label_exists_filter, not};
//!
//! // Deployments controlled by one of our AddressableServices, unless opted out.
//! let owned = chain(
//!     filter_controller_gk::<Deployment>("samples.knative.dev", "AddressableService"),
//!     not(label_exists_filter("samples.knative.dev/ignore")),
//! );
//! assert!(!owned(&Deployment::default()));
//! ```

use kube::Resource;
use kube::core::GroupVersionKind;

pub use crate::owner::controller_of;
use crate::owner::group_of;

/// Objects whose controller is of group `group` and kind `kind`, whatever its
/// version: the filter a controller puts on the children it owns.
pub fn filter_controller_gk<K: Resource>(
    group: impl Into<String>,
    kind: impl Into<String>,
) -> impl Fn(&K) -> bool + Send + Sync + Clone + 'static {
    let (group, kind) = (group.into(), kind.into());
    move |obj: &K| {
        controller_of(obj)
            .is_some_and(|owner| owner.kind == kind && group_of(&owner.api_version) == Some(group.as_str()))
    }
}

/// Objects whose controller has exactly this group, version and kind.
pub fn filter_controller_gvk<K: Resource>(
    gvk: GroupVersionKind,
) -> impl Fn(&K) -> bool + Send + Sync + Clone + 'static {
    let api_version = gvk.api_version();
    let kind = gvk.kind;
    move |obj: &K| {
        controller_of(obj).is_some_and(|owner| owner.api_version == api_version && owner.kind == kind)
    }
}

/// Objects controlled by an object of kind `O` (Knative's `FilterController`):
/// [`filter_controller_gk`] with `O`'s group and kind.
pub fn filter_controller<K: Resource, O: Resource<DynamicType = ()>>()
-> impl Fn(&K) -> bool + Send + Sync + Clone + 'static {
    filter_controller_gk(O::group(&()), O::kind(&()))
}

/// Objects named `name`, in any namespace (Knative's `FilterWithName` and
/// `NameFilterFunc`).
pub fn filter_with_name<K: Resource>(
    name: impl Into<String>,
) -> impl Fn(&K) -> bool + Send + Sync + Clone + 'static {
    let name = name.into();
    move |obj: &K| obj.meta().name.as_deref().unwrap_or_default() == name
}

/// The object `namespace/name` (Knative's `FilterWithNameAndNamespace`).
pub fn filter_with_name_and_namespace<K: Resource>(
    namespace: impl Into<String>,
    name: impl Into<String>,
) -> impl Fn(&K) -> bool + Send + Sync + Clone + 'static {
    let (namespace, name) = (namespace.into(), name.into());
    move |obj: &K| {
        let meta = obj.meta();
        meta.name.as_deref().unwrap_or_default() == name
            && meta.namespace.as_deref().unwrap_or_default() == namespace
    }
}

/// Objects in `namespace` (Knative's `NamespaceFilterFunc`).
pub fn namespace_filter<K: Resource>(
    namespace: impl Into<String>,
) -> impl Fn(&K) -> bool + Send + Sync + Clone + 'static {
    let namespace = namespace.into();
    move |obj: &K| obj.meta().namespace.as_deref().unwrap_or_default() == namespace
}

/// Objects whose annotation `key` is `value`; objects without the annotation
/// pass when `allow_unset` (Knative's `AnnotationFilterFunc`, used for class
/// annotations).
pub fn annotation_filter<K: Resource>(
    key: impl Into<String>,
    value: impl Into<String>,
    allow_unset: bool,
) -> impl Fn(&K) -> bool + Send + Sync + Clone + 'static {
    let (key, value) = (key.into(), value.into());
    move |obj: &K| match obj.meta().annotations.as_ref().and_then(|a| a.get(&key)) {
        Some(v) => *v == value,
        None => allow_unset,
    }
}

/// Objects whose label `label` is `value`; objects without the label pass when
/// `allow_unset` (Knative's `LabelFilterFunc`).
pub fn label_filter<K: Resource>(
    label: impl Into<String>,
    value: impl Into<String>,
    allow_unset: bool,
) -> impl Fn(&K) -> bool + Send + Sync + Clone + 'static {
    let (label, value) = (label.into(), value.into());
    move |obj: &K| match obj.meta().labels.as_ref().and_then(|l| l.get(&label)) {
        Some(v) => *v == value,
        None => allow_unset,
    }
}

/// Objects that carry label `label`, whatever its value (Knative's
/// `LabelExistsFilterFunc`).
pub fn label_exists_filter<K: Resource>(
    label: impl Into<String>,
) -> impl Fn(&K) -> bool + Send + Sync + Clone + 'static {
    let label = label.into();
    move |obj: &K| obj.meta().labels.as_ref().is_some_and(|l| l.contains_key(&label))
}

/// The objects `filter` rejects.
pub fn not<K, F>(filter: F) -> impl Fn(&K) -> bool + Send + Sync + Clone + 'static
where
    F: Fn(&K) -> bool + Send + Sync + Clone + 'static,
{
    move |obj: &K| !filter(obj)
}

/// The objects either filter accepts; nest for more (`or(a, or(b, c))`).
pub fn or<K, A, B>(a: A, b: B) -> impl Fn(&K) -> bool + Send + Sync + Clone + 'static
where
    A: Fn(&K) -> bool + Send + Sync + Clone + 'static,
    B: Fn(&K) -> bool + Send + Sync + Clone + 'static,
{
    move |obj: &K| a(obj) || b(obj)
}

/// The objects both filters accept, checking `a` first (Knative's
/// `ChainFilterFuncs`); nest for more (`chain(a, chain(b, c))`).
pub fn chain<K, A, B>(a: A, b: B) -> impl Fn(&K) -> bool + Send + Sync + Clone + 'static
where
    A: Fn(&K) -> bool + Send + Sync + Clone + 'static,
    B: Fn(&K) -> bool + Send + Sync + Clone + 'static,
{
    move |obj: &K| a(obj) && b(obj)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use kube::api::ObjectMeta;

    fn owner(api_version: &str, kind: &str, controller: Option<bool>) -> OwnerReference {
        OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: "parent".into(),
            uid: "uid".into(),
            controller,
            block_owner_deletion: None,
        }
    }

    fn cm(owners: Vec<OwnerReference>) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                namespace: Some("ns".into()),
                name: Some("cm".into()),
                owner_references: Some(owners),
                labels: Some([("app".to_owned(), "web".to_owned())].into()),
                annotations: Some([("class".to_owned(), "ours".to_owned())].into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    #[test]
    fn controller_group_kind_ignores_version_and_non_controllers() {
        let f = filter_controller_gk::<ConfigMap>("samples.knative.dev", "AddressableService");
        assert!(f(&cm(vec![owner(
            "samples.knative.dev/v1alpha1",
            "AddressableService",
            Some(true)
        )])));
        assert!(f(&cm(vec![owner(
            "samples.knative.dev/v1",
            "AddressableService",
            Some(true)
        )])));
        assert!(!f(&cm(vec![owner(
            "samples.knative.dev/v1",
            "AddressableService",
            Some(false)
        )])));
        assert!(!f(&cm(vec![owner(
            "samples.knative.dev/v1",
            "AddressableService",
            None
        )])));
        assert!(!f(&cm(vec![owner(
            "other.dev/v1",
            "AddressableService",
            Some(true)
        )])));
        assert!(!f(&cm(vec![owner(
            "samples.knative.dev/v1",
            "SimpleDeployment",
            Some(true)
        )])));
        assert!(!f(&cm(vec![owner("a/b/c", "AddressableService", Some(true))])));
        assert!(!f(&cm(Vec::new())));
        assert!(!f(&ConfigMap::default()));
        // The core group is empty.
        let core = filter_controller_gk::<ConfigMap>("", "Pod");
        assert!(core(&cm(vec![owner("v1", "Pod", Some(true))])));
        // The controller is found among other owners.
        assert!(f(&cm(vec![
            owner("v1", "Pod", None),
            owner("samples.knative.dev/v1alpha1", "AddressableService", Some(true)),
        ])));
    }

    #[test]
    fn controller_gvk_is_exact() {
        let f = filter_controller_gvk::<ConfigMap>(GroupVersionKind::gvk(
            "samples.knative.dev",
            "v1alpha1",
            "AddressableService",
        ));
        assert!(f(&cm(vec![owner(
            "samples.knative.dev/v1alpha1",
            "AddressableService",
            Some(true)
        )])));
        assert!(!f(&cm(vec![owner(
            "samples.knative.dev/v1",
            "AddressableService",
            Some(true)
        )])));
        let core = filter_controller_gvk::<ConfigMap>(GroupVersionKind::gvk("", "v1", "Pod"));
        assert!(core(&cm(vec![owner("v1", "Pod", Some(true))])));
    }

    #[test]
    fn controller_of_a_kind() {
        let f = filter_controller::<ConfigMap, k8s_openapi::api::apps::v1::Deployment>();
        assert!(f(&cm(vec![owner("apps/v1", "Deployment", Some(true))])));
        assert!(!f(&cm(vec![owner("apps/v1", "StatefulSet", Some(true))])));
    }

    #[test]
    fn names_and_namespaces() {
        let obj = cm(Vec::new());
        assert!(filter_with_name::<ConfigMap>("cm")(&obj));
        assert!(!filter_with_name::<ConfigMap>("other")(&obj));
        assert!(filter_with_name_and_namespace::<ConfigMap>("ns", "cm")(&obj));
        assert!(!filter_with_name_and_namespace::<ConfigMap>("other", "cm")(&obj));
        assert!(!filter_with_name_and_namespace::<ConfigMap>("ns", "other")(&obj));
        assert!(namespace_filter::<ConfigMap>("ns")(&obj));
        assert!(!namespace_filter::<ConfigMap>("kube-system")(&obj));
        assert!(namespace_filter::<ConfigMap>("")(&ConfigMap::default()));
    }

    #[test]
    fn labels_and_annotations() {
        let obj = cm(Vec::new());
        let bare = ConfigMap::default();
        assert!(annotation_filter::<ConfigMap>("class", "ours", false)(&obj));
        assert!(!annotation_filter::<ConfigMap>("class", "theirs", true)(&obj));
        assert!(!annotation_filter::<ConfigMap>("class", "ours", false)(&bare));
        assert!(annotation_filter::<ConfigMap>("class", "ours", true)(&bare));
        assert!(label_filter::<ConfigMap>("app", "web", false)(&obj));
        assert!(!label_filter::<ConfigMap>("app", "db", true)(&obj));
        assert!(!label_filter::<ConfigMap>("app", "web", false)(&bare));
        assert!(label_filter::<ConfigMap>("app", "web", true)(&bare));
        assert!(label_exists_filter::<ConfigMap>("app")(&obj));
        assert!(!label_exists_filter::<ConfigMap>("tier")(&obj));
        assert!(!label_exists_filter::<ConfigMap>("app")(&bare));
    }

    #[test]
    fn combinators() {
        let obj = cm(Vec::new());
        let yes = filter_with_name::<ConfigMap>("cm");
        let no = filter_with_name::<ConfigMap>("other");
        assert!(!not(yes.clone())(&obj));
        assert!(not(no.clone())(&obj));
        assert!(or(no.clone(), yes.clone())(&obj));
        assert!(!or(no.clone(), no.clone())(&obj));
        assert!(chain(yes.clone(), yes.clone())(&obj));
        assert!(!chain(yes.clone(), no.clone())(&obj));
        assert!(chain(yes.clone(), or(no.clone(), not(no)))(&obj));
    }
}
