//! The identity of an object in the work queue: its namespace and name.

use std::fmt;
use std::str::FromStr;

use kube::Resource;

use crate::apis::go_quote;

/// The namespace and name of an object: what the work queue holds and what a
/// reconciler is asked to converge (Knative's `types.NamespacedName`).
///
/// Cluster-scoped objects have an empty `namespace`. The string form, which the
/// reconciler receives, is `namespace/name`, or just `name` when the namespace is
/// empty; [`FromStr`] parses it back with client-go's `SplitMetaNamespaceKey`
/// rules.
///
/// ```
/// use kinject_runtime::key::ObjectKey;
///
/// let key = ObjectKey::new("default", "web");
/// assert_eq!(key.to_string(), "default/web");
/// assert_eq!("default/web".parse::<ObjectKey>().unwrap(), key);
/// assert_eq!(ObjectKey::new("", "node-1").to_string(), "node-1");
/// assert!("too/many/parts".parse::<ObjectKey>().is_err());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// The namespace; empty for cluster-scoped objects.
    pub namespace: String,
    /// The name.
    pub name: String,
}

impl ObjectKey {
    /// A key from its parts; pass an empty namespace for a cluster-scoped object.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        ObjectKey {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// The key of an object: its `metadata.namespace` (empty when unset) and
    /// `metadata.name` (empty when unset, as for an object that has only a
    /// `generateName` and was never created).
    pub fn of<K: Resource>(obj: &K) -> Self {
        let meta = obj.meta();
        ObjectKey {
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
        }
    }

    /// True for the key of a cluster-scoped object (empty namespace).
    pub fn is_cluster_scoped(&self) -> bool {
        self.namespace.is_empty()
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            f.write_str(&self.name)
        } else {
            write!(f, "{}/{}", self.namespace, self.name)
        }
    }
}

/// A string that is not a work-queue key: it has more than one `/`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unexpected key format: {} (want \"namespace/name\" or \"name\")", go_quote(.key))]
pub struct InvalidKey {
    key: String,
}

impl InvalidKey {
    /// The string that failed to parse.
    pub fn key(&self) -> &str {
        &self.key
    }
}

impl FromStr for ObjectKey {
    type Err = InvalidKey;

    /// Splits `namespace/name` or `name`, as client-go's `SplitMetaNamespaceKey`
    /// does: no `/` gives a cluster-scoped key, one `/` splits namespace from
    /// name, more is an error. Empty parts are accepted; a reconciler that needs a
    /// name checks for it.
    fn from_str(key: &str) -> Result<Self, Self::Err> {
        let mut parts = key.split('/');
        match (parts.next(), parts.next(), parts.next()) {
            (Some(name), None, _) => Ok(ObjectKey::new("", name)),
            (Some(namespace), Some(name), None) => Ok(ObjectKey::new(namespace, name)),
            _ => Err(InvalidKey { key: key.to_owned() }),
        }
    }
}

impl TryFrom<&str> for ObjectKey {
    type Error = InvalidKey;

    fn try_from(key: &str) -> Result<Self, Self::Error> {
        key.parse()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
    use kube::api::ObjectMeta;

    #[test]
    fn display_drops_the_empty_namespace() {
        assert_eq!(ObjectKey::new("ns", "name").to_string(), "ns/name");
        assert_eq!(ObjectKey::new("", "name").to_string(), "name");
    }

    #[test]
    fn parses_like_split_meta_namespace_key() {
        assert_eq!("name".parse(), Ok(ObjectKey::new("", "name")));
        assert_eq!("ns/name".parse(), Ok(ObjectKey::new("ns", "name")));
        assert_eq!("/name".parse(), Ok(ObjectKey::new("", "name")));
        assert_eq!("".parse(), Ok(ObjectKey::new("", "")));
        let err = "too/many/parts".parse::<ObjectKey>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unexpected key format: \"too/many/parts\" (want \"namespace/name\" or \"name\")"
        );
        assert_eq!(err.key(), "too/many/parts");
    }

    #[test]
    fn key_of_an_object() {
        let cm = ConfigMap {
            metadata: ObjectMeta {
                namespace: Some("ns".into()),
                name: Some("cm".into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        };
        assert_eq!(ObjectKey::of(&cm), ObjectKey::new("ns", "cm"));
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some("ns".into()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        let key = ObjectKey::of(&ns);
        assert!(key.is_cluster_scoped());
        assert_eq!(key.to_string(), "ns");
    }
}
