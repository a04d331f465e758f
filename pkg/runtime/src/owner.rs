//! Owner references written once: the controller reference a parent puts on
//! the children it creates (Knative's `kmeta.NewControllerRef`, client-go's
//! `SetControllerReference`), and the way back from a child to its parent's
//! work-queue key.
//!
//! ```
//! use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
//! use kinject_runtime::key::ObjectKey;
//! use kinject_runtime::owner::{controller_key, set_controller_ref};
//! use kube::api::ObjectMeta;
//!
//! let parent = Namespace {
//!     metadata: ObjectMeta {
//!         name: Some("team-a".into()),
//!         uid: Some("3f1c".into()),
//!         ..ObjectMeta::default()
//!     },
//!     ..Namespace::default()
//! };
//! let mut child = ConfigMap::default();
//! child.metadata.namespace = Some("team-a".into());
//! set_controller_ref(&mut child, &parent)?;
//!
//! // Namespaces are cluster-scoped, so the parent's key has no namespace.
//! assert_eq!(controller_key::<Namespace, _>(&child), Some(ObjectKey::new("", "team-a")));
//! # Ok::<(), kinject_runtime::owner::OwnerRefError>(())
//! ```
//!
//! An owner reference names its owner's apiVersion, kind and name, but not
//! whether the kind is namespaced: the key of a child's owner can only be
//! found knowing the owner's type, which is why [`controller_key`] takes it as
//! a type parameter and reads its scope from [`kube::Resource::Scope`].

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Resource;

use crate::client::ApiScope;
use crate::key::ObjectKey;

/// Why a controller reference could not be built or set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OwnerRefError {
    /// The owner has no name; a reference to it would name nothing.
    #[error("the {kind} has no name to refer to")]
    MissingName {
        /// The owner's kind.
        kind: String,
    },
    /// The owner has no uid, so it was not read from the API server; the API
    /// server refuses an owner reference without one.
    #[error("{kind} {name:?} has no uid; refer only to objects read from the API server")]
    MissingUid {
        /// The owner's kind.
        kind: String,
        /// The owner's name.
        name: String,
    },
    /// The child already has another controller; an object has at most one.
    #[error("the object is already controlled by {kind} {name:?} ({api_version})")]
    AlreadyControlled {
        /// The current controller's apiVersion.
        api_version: String,
        /// The current controller's kind.
        kind: String,
        /// The current controller's name.
        name: String,
    },
}

/// The owner reference marked `controller: true`, if any (apimachinery's
/// `GetControllerOf`).
pub fn controller_of<K: Resource>(obj: &K) -> Option<&OwnerReference> {
    obj.meta()
        .owner_references
        .as_deref()?
        .iter()
        .find(|r| r.controller == Some(true))
}

/// The reference by which `owner` controls the objects it creates, as
/// Knative's `kmeta.NewControllerRef` builds it: `controller: true`, and
/// `blockOwnerDeletion: true` so a foreground deletion of the owner waits for
/// its children.
pub fn controller_ref<O: Resource<DynamicType = ()>>(owner: &O) -> Result<OwnerReference, OwnerRefError> {
    let kind = O::kind(&()).into_owned();
    let meta = owner.meta();
    let Some(name) = meta.name.clone().filter(|n| !n.is_empty()) else {
        return Err(OwnerRefError::MissingName { kind });
    };
    let Some(uid) = meta.uid.clone().filter(|u| !u.is_empty()) else {
        return Err(OwnerRefError::MissingUid { kind, name });
    };
    Ok(OwnerReference {
        api_version: O::api_version(&()).into_owned(),
        kind,
        name,
        uid,
        controller: Some(true),
        block_owner_deletion: Some(true),
    })
}

/// Makes `owner` the controller of `child` (client-go's
/// `SetControllerReference`): a reference to the same owner (same group, kind
/// and name, whatever its version, uid or flags) is replaced in place, any
/// other reference is kept, and a child controlled by someone else is left
/// unchanged with [`OwnerRefError::AlreadyControlled`], so it never ends up
/// with two controllers.
pub fn set_controller_ref<O, C>(child: &mut C, owner: &O) -> Result<(), OwnerRefError>
where
    O: Resource<DynamicType = ()>,
    C: Resource,
{
    let reference = controller_ref(owner)?;
    let group = O::group(&());
    let same_owner = |r: &OwnerReference| {
        r.kind == reference.kind && r.name == reference.name && group_of(&r.api_version) == Some(&*group)
    };
    if let Some(other) = controller_of(child).filter(|r| !same_owner(r)) {
        return Err(OwnerRefError::AlreadyControlled {
            api_version: other.api_version.clone(),
            kind: other.kind.clone(),
            name: other.name.clone(),
        });
    }
    let references = child.meta_mut().owner_references.get_or_insert_default();
    match references.iter_mut().find(|r| same_owner(r)) {
        Some(existing) => *existing = reference,
        None => references.push(reference),
    }
    Ok(())
}

/// True when `reference` points at an object of kind `O`, whatever the
/// version it names.
pub fn refers_to_kind<O: Resource<DynamicType = ()>>(reference: &OwnerReference) -> bool {
    reference.kind == O::kind(&()) && group_of(&reference.api_version) == Some(&*O::group(&()))
}

/// The work-queue key of `child`'s controller when that is an `O`: in the
/// child's namespace for a namespaced `O`, without a namespace for a
/// cluster-scoped one. `None` when the child has no controller or another
/// kind controls it.
pub fn controller_key<O, C>(child: &C) -> Option<ObjectKey>
where
    O: Resource<DynamicType = (), Scope: ApiScope>,
    C: Resource,
{
    let owner = controller_of(child).filter(|r| refers_to_kind::<O>(r))?;
    let namespace = if <O::Scope as ApiScope>::NAMESPACED {
        child.meta().namespace.clone().unwrap_or_default()
    } else {
        String::new()
    };
    Some(ObjectKey::new(namespace, owner.name.clone()))
}

/// The group of an `apiVersion` (`apps/v1` → `apps`, `v1` → the empty core
/// group); `None` when it has more than one `/` (apimachinery's
/// `ParseGroupVersion`).
pub fn group_of(api_version: &str) -> Option<&str> {
    match api_version.split_once('/') {
        None => Some(""),
        Some((group, version)) if !version.contains('/') => Some(group),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
    use k8s_openapi::api::rbac::v1::ClusterRole;
    use kube::api::ObjectMeta;

    fn meta(name: Option<&str>, uid: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            name: name.map(Into::into),
            uid: uid.map(Into::into),
            ..ObjectMeta::default()
        }
    }

    fn deployment(name: &str, uid: &str) -> Deployment {
        Deployment {
            metadata: meta(Some(name), Some(uid)),
            ..Deployment::default()
        }
    }

    fn cluster_role(name: &str, uid: &str) -> ClusterRole {
        ClusterRole {
            metadata: meta(Some(name), Some(uid)),
            ..ClusterRole::default()
        }
    }

    fn child(references: Vec<OwnerReference>) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                namespace: Some("ns".into()),
                name: Some("child".into()),
                owner_references: Some(references),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    fn reference(api_version: &str, kind: &str, name: &str, controller: Option<bool>) -> OwnerReference {
        OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            controller,
            block_owner_deletion: None,
        }
    }

    #[test]
    fn controller_ref_is_kmeta_new_controller_ref() {
        assert_eq!(
            controller_ref(&deployment("web", "u-1")),
            Ok(OwnerReference {
                api_version: "apps/v1".into(),
                kind: "Deployment".into(),
                name: "web".into(),
                uid: "u-1".into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            })
        );
        let core = controller_ref(&Namespace {
            metadata: meta(Some("team-a"), Some("u-2")),
            ..Namespace::default()
        });
        assert_eq!(
            core.map(|r| (r.api_version, r.kind)),
            Ok(("v1".into(), "Namespace".into()))
        );
    }

    #[test]
    fn an_owner_without_name_or_uid_is_an_error() {
        let mut d = deployment("web", "u-1");
        d.metadata.uid = None;
        assert_eq!(
            controller_ref(&d),
            Err(OwnerRefError::MissingUid {
                kind: "Deployment".into(),
                name: "web".into()
            })
        );
        d.metadata.uid = Some(String::new());
        assert!(matches!(
            controller_ref(&d),
            Err(OwnerRefError::MissingUid { .. })
        ));
        d.metadata = meta(None, Some("u-1"));
        assert_eq!(
            controller_ref(&d),
            Err(OwnerRefError::MissingName {
                kind: "Deployment".into()
            })
        );

        let mut c = child(Vec::new());
        let before = c.clone();
        assert!(set_controller_ref(&mut c, &d).is_err());
        assert_eq!(c, before, "a failed call leaves the child alone");
    }

    #[test]
    fn setting_the_controller_appends_and_keeps_other_owners() {
        let mut c = ConfigMap::default();
        set_controller_ref(&mut c, &deployment("web", "u-1")).unwrap();
        assert_eq!(
            c.metadata.owner_references,
            Some(vec![controller_ref(&deployment("web", "u-1")).unwrap()])
        );

        let other = reference("v1", "Service", "svc", None);
        let mut c = child(vec![other.clone()]);
        set_controller_ref(&mut c, &deployment("web", "u-1")).unwrap();
        assert_eq!(
            c.metadata.owner_references,
            Some(vec![other, controller_ref(&deployment("web", "u-1")).unwrap()])
        );
    }

    #[test]
    fn the_same_owner_is_replaced_in_place_never_added_twice() {
        let first = reference("v1", "Service", "first", None);
        let last = reference("v1", "Service", "last", None);
        // An older version of the owner's kind, and a uid of a deleted
        // namesake: both name the same owner slot.
        let stale = reference("apps/v1beta1", "Deployment", "web", Some(true));
        let mut c = child(vec![first.clone(), stale, last.clone()]);
        let owner = deployment("web", "u-2");
        set_controller_ref(&mut c, &owner).unwrap();
        set_controller_ref(&mut c, &owner).unwrap();
        let want = controller_ref(&owner).unwrap();
        assert_eq!(c.metadata.owner_references, Some(vec![first, want.clone(), last]));

        // A plain reference to the owner becomes the controller reference.
        let mut c = child(vec![reference("apps/v1", "Deployment", "web", Some(false))]);
        set_controller_ref(&mut c, &owner).unwrap();
        assert_eq!(c.metadata.owner_references, Some(vec![want]));
    }

    #[test]
    fn another_controller_is_never_joined_by_a_second() {
        let theirs = [
            reference("apps/v1", "Deployment", "someone-else", Some(true)),
            // Same kind and name in another group is another owner.
            reference("extensions.example.com/v1", "Deployment", "web", Some(true)),
        ];
        for other in theirs {
            let mut c = child(vec![other.clone()]);
            let before = c.clone();
            assert_eq!(
                set_controller_ref(&mut c, &deployment("web", "u-1")),
                Err(OwnerRefError::AlreadyControlled {
                    api_version: other.api_version.clone(),
                    kind: other.kind.clone(),
                    name: other.name.clone(),
                })
            );
            assert_eq!(c, before);
        }
    }

    #[test]
    fn controller_key_follows_the_owner_kinds_scope() {
        let mut c = child(Vec::new());
        set_controller_ref(&mut c, &deployment("web", "u-1")).unwrap();
        assert_eq!(
            controller_key::<Deployment, _>(&c),
            Some(ObjectKey::new("ns", "web"))
        );
        assert_eq!(controller_key::<ClusterRole, _>(&c), None, "another kind");

        let mut c = child(Vec::new());
        set_controller_ref(&mut c, &cluster_role("admin", "u-3")).unwrap();
        assert_eq!(
            controller_key::<ClusterRole, _>(&c),
            Some(ObjectKey::new("", "admin"))
        );
        assert_eq!(controller_key::<Deployment, _>(&c), None);

        let not_controller = child(vec![reference("apps/v1", "Deployment", "web", None)]);
        assert_eq!(controller_key::<Deployment, _>(&not_controller), None);
        let other_group = child(vec![reference(
            "example.com/v1",
            "ClusterRole",
            "admin",
            Some(true),
        )]);
        assert_eq!(controller_key::<ClusterRole, _>(&other_group), None);
    }

    #[test]
    fn groups_of_api_versions() {
        assert_eq!(group_of("v1"), Some(""));
        assert_eq!(group_of("apps/v1"), Some("apps"));
        assert_eq!(group_of("a/b/c"), None);
    }
}
