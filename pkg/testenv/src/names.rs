//! `metadata.generateName` suffixes and `metadata.uid`s.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// kube-apiserver's suffix alphabet: no vowels (no accidental words), no look-alikes.
const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// How the server completes `metadata.generateName`.
#[derive(Clone, Default)]
pub enum NameGenerator {
    /// A random 5-character suffix, as kube-apiserver does (`sd-x7k2p`).
    #[default]
    Random,
    /// `<generateName>%05d` with one 1-based counter per server (`sd-00001`), as Knative's
    /// table tests name objects.
    Sequential(Arc<AtomicU64>),
    /// Any other scheme: receives `generateName`, returns the full name.
    Custom(Arc<dyn Fn(&str) -> String + Send + Sync>),
}

impl NameGenerator {
    /// The sequential generator, counting from 1.
    pub fn sequential() -> Self {
        Self::Sequential(Arc::new(AtomicU64::new(0)))
    }

    pub(crate) fn generate(&self, prefix: &str) -> String {
        match self {
            Self::Random => {
                let bytes = random_uuid().into_bytes();
                let suffix: String = bytes
                    .iter()
                    .take(5)
                    .map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()]))
                    .collect();
                format!("{prefix}{suffix}")
            }
            Self::Sequential(n) => {
                let i = n.fetch_add(1, Ordering::Relaxed) + 1;
                format!("{prefix}{i:05}")
            }
            Self::Custom(f) => f(prefix),
        }
    }
}

impl fmt::Debug for NameGenerator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Random => f.write_str("Random"),
            Self::Sequential(n) => write!(f, "Sequential({})", n.load(Ordering::Relaxed)),
            Self::Custom(_) => f.write_str("Custom"),
        }
    }
}

/// How the server gives new objects their `metadata.uid`.
#[derive(Clone, Debug, Default)]
pub enum UidGenerator {
    /// A random version-4 UUID, as kube-apiserver does.
    #[default]
    Random,
    /// A name-based UUID of the object's resource, namespace and name (and how
    /// many objects of that name were created before), so a test can write the
    /// uid it expects with [`uid_for`] instead of deleting it from what it
    /// compares.
    /// The map counts the objects created so far by resource, namespace and name.
    Deterministic(std::collections::HashMap<String, u64>),
}

impl UidGenerator {
    /// The deterministic generator.
    pub fn deterministic() -> Self {
        Self::Deterministic(std::collections::HashMap::new())
    }

    /// The uid of a new object `name` in `namespace` of `resource` (see [`uid_for`]).
    pub(crate) fn generate(&mut self, resource: &str, namespace: &str, name: &str) -> String {
        match self {
            Self::Random => random_uuid().to_string(),
            Self::Deterministic(created) => {
                let key = format!("{resource}/{namespace}/{name}");
                let earlier = created.entry(key).or_insert(0);
                let uid = nth_uid(resource, namespace, name, *earlier);
                *earlier += 1;
                uid
            }
        }
    }
}

/// The uid a server with [`UidGenerator::Deterministic`] gives the first
/// object of kind `K` named `name` in `namespace` (empty for cluster-scoped
/// kinds). An object created again under the same name gets another.
///
/// ```
/// use k8s_openapi::api::batch::v1::Job;
///
/// let uid = kinject_testenv::uid_for::<Job>("default", "nightly");
/// assert_eq!(uid, kinject_testenv::uid_for::<Job>("default", "nightly"));
/// assert_ne!(uid, kinject_testenv::uid_for::<Job>("default", "weekly"));
/// ```
pub fn uid_for<K: kube::Resource<DynamicType = ()>>(namespace: &str, name: &str) -> String {
    nth_uid(&resource_key::<K>(), namespace, name, 0)
}

/// The store's name of `K`'s resource: the plural, with its group unless it
/// is the core group's (`pods`, `jobs.batch`).
fn resource_key<K: kube::Resource<DynamicType = ()>>() -> String {
    let (plural, group) = (K::plural(&()), K::group(&()));
    if group.is_empty() {
        plural.into_owned()
    } else {
        format!("{plural}.{group}")
    }
}

fn nth_uid(resource: &str, namespace: &str, name: &str, earlier: u64) -> String {
    let identity = format!("kinject-testenv:{resource}/{namespace}/{name}#{earlier}");
    uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_URL, identity.as_bytes()).to_string()
}

/// A version 4 uuid from fastrand's generator, as kube-apiserver gives a new
/// object's uid (random, not secret).
pub(crate) fn random_uuid() -> uuid::Uuid {
    let mut bytes = [0; 16];
    fastrand::fill(&mut bytes);
    uuid::Builder::from_random_bytes(bytes).into_uuid()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_is_one_based() {
        let g = NameGenerator::sequential();
        assert_eq!(g.generate("sd-"), "sd-00001");
        assert_eq!(g.generate("sd-"), "sd-00002");
    }

    #[test]
    fn random_uses_alphabet() {
        let n = NameGenerator::Random.generate("x-");
        assert_eq!(n.len(), 7);
        assert!(n[2..].bytes().all(|b| ALPHABET.contains(&b)));
    }

    #[test]
    fn deterministic_uids_are_uid_for_then_differ_on_recreation() {
        let mut g = UidGenerator::deterministic();
        use k8s_openapi::api::batch::v1::Job;
        use k8s_openapi::api::core::v1::{ConfigMap, Pod};

        let first = g.generate("pods", "ns", "web");
        assert_eq!(first, uid_for::<Pod>("ns", "web"));
        assert_ne!(g.generate("pods", "ns", "web"), first, "a new object, a new uid");
        assert_ne!(uid_for::<Pod>("ns", "web"), uid_for::<Pod>("other", "web"));
        assert_ne!(uid_for::<Pod>("", "web"), uid_for::<ConfigMap>("", "web"));
        // A kind of a named group is known by its group too, as the store knows it.
        assert_eq!(
            g.generate("jobs.batch", "ns", "nightly"),
            uid_for::<Job>("ns", "nightly")
        );
        assert_eq!(first.len(), 36);
        assert_ne!(UidGenerator::Random.generate("pods", "ns", "web"), first);
    }
}
