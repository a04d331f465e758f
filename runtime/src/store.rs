//! The informer cache: every object as compact JSON, keyed by namespace and
//! name, with its resourceVersion, labels and custom index values beside it.
//!
//! Why bytes and not typed objects: k8s-openapi types lay out every optional
//! nested struct inline, so a typed `Pod` costs about 14 KB even without
//! managedFields (client-go holds the same pod in about 6 KB). Its compact JSON
//! is about 2.6 KB, and decoding one object on read takes microseconds, which is
//! cheap next to the API call a reconcile usually makes.
//!
//! Relists are applied in place: objects from the new list are upserted as they
//! arrive and the ones the list did not mention are removed when it ends. The
//! cache never holds two copies of the world, and handlers see exactly the
//! changes (an object with an unchanged resourceVersion is not an update).

use std::collections::{BTreeMap, BTreeSet};
use std::marker::PhantomData;
use std::sync::Arc;

use thiserror::Error;

use crate::apis::Object;
use crate::labels::{self, CompiledSelector, Labels};

/// A function computing the values under which an object is indexed.
pub type IndexFn<K> = Arc<dyn Fn(&K) -> Vec<String> + Send + Sync>;

/// The cache's key: namespace (empty when cluster-scoped) and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct StoreKey {
    pub(crate) namespace: Box<str>,
    pub(crate) name: Box<str>,
}

impl StoreKey {
    pub(crate) fn of<K: Object>(obj: &K) -> Self {
        let meta = obj.meta();
        StoreKey {
            namespace: meta.namespace.as_deref().unwrap_or_default().into(),
            name: meta.name.as_deref().unwrap_or_default().into(),
        }
    }
}

struct Entry {
    encoded: Box<[u8]>,
    resource_version: Box<str>,
    labels: Labels,
    /// One list of values per custom index, in the order the indexes were added.
    index_values: Box<[Box<[Box<str>]>]>,
}

struct Index<K> {
    name: String,
    func: IndexFn<K>,
    keys_by_value: BTreeMap<Box<str>, BTreeSet<StoreKey>>,
}

/// A change the cache made, for the informer to hand to its event handlers.
#[derive(Debug)]
pub(crate) enum Change<K> {
    Added(Arc<K>),
    Updated { old: Arc<K>, new: Arc<K> },
    Deleted(Arc<K>),
}

/// An object the cache could not encode or decode. Objects come from the API
/// server as valid JSON, so this points at a kind whose serde impls do not
/// round-trip.
#[derive(Debug, Error)]
#[error("the informer cache could not {action} {kind} {key}: {source}")]
pub struct CacheError {
    action: &'static str,
    kind: String,
    key: String,
    #[source]
    source: serde_json::Error,
}

impl CacheError {
    fn new<K: Object>(action: &'static str, key: &StoreKey, source: serde_json::Error) -> Self {
        let key = if key.namespace.is_empty() {
            key.name.to_string()
        } else {
            format!("{}/{}", key.namespace, key.name)
        };
        CacheError {
            action,
            kind: K::kind(&()).into_owned(),
            key,
            source,
        }
    }
}

pub(crate) struct Store<K> {
    entries: BTreeMap<StoreKey, Entry>,
    indexes: Vec<Index<K>>,
    /// The keys seen since the current relist began; `None` outside a relist.
    relist_seen: Option<BTreeSet<StoreKey>>,
    _kind: PhantomData<fn() -> K>,
}

impl<K: Object> Store<K> {
    pub(crate) fn new() -> Self {
        Store {
            entries: BTreeMap::new(),
            indexes: Vec::new(),
            relist_seen: None,
            _kind: PhantomData,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Inserts or replaces an object. Returns the change, or `None` when the
    /// cache already held this resourceVersion.
    pub(crate) fn upsert(&mut self, obj: K) -> Result<Option<Change<K>>, CacheError> {
        let key = StoreKey::of(&obj);
        if let Some(seen) = &mut self.relist_seen {
            seen.insert(key.clone());
        }
        let resource_version = obj.meta().resource_version.as_deref().unwrap_or_default();
        let old = match self.entries.get(&key) {
            Some(entry) if &*entry.resource_version == resource_version && !resource_version.is_empty() => {
                return Ok(None);
            }
            Some(entry) => Some(decode::<K>(&key, &entry.encoded)?),
            None => None,
        };
        let encoded = serde_json::to_vec(&obj).map_err(|e| CacheError::new::<K>("encode", &key, e))?;
        let entry = Entry {
            encoded: encoded.into_boxed_slice(),
            resource_version: resource_version.into(),
            labels: labels::compact(obj.meta().labels.as_ref()),
            index_values: self
                .indexes
                .iter()
                .map(|idx| boxed_values((idx.func)(&obj)))
                .collect(),
        };
        self.unindex(&key);
        self.index(&key, &entry);
        self.entries.insert(key, entry);
        let new = Arc::new(obj);
        Ok(Some(match old {
            Some(old) => Change::Updated {
                old: Arc::new(old),
                new,
            },
            None => Change::Added(new),
        }))
    }

    /// Removes an object; the change carries the final state the API server sent.
    pub(crate) fn remove(&mut self, obj: K) -> Option<Change<K>> {
        let key = StoreKey::of(&obj);
        self.unindex(&key);
        self.entries.remove(&key).map(|_| Change::Deleted(Arc::new(obj)))
    }

    /// Drops `key`'s entry (its object can no longer be decoded): handlers see
    /// the last good version deleted.
    pub(crate) fn forget(&mut self, key: &StoreKey) -> Result<Option<Change<K>>, CacheError> {
        self.unindex(key);
        match self.entries.remove(key) {
            Some(entry) => decode::<K>(key, &entry.encoded).map(|last| Some(Change::Deleted(Arc::new(last)))),
            None => Ok(None),
        }
    }

    pub(crate) fn begin_relist(&mut self) {
        self.relist_seen = Some(BTreeSet::new());
    }

    /// Ends a relist: every object the new list did not contain was deleted
    /// while the watch was down; the change carries its last known state.
    pub(crate) fn finish_relist(&mut self) -> (Vec<Change<K>>, Vec<CacheError>) {
        let Some(seen) = self.relist_seen.take() else {
            return (Vec::new(), Vec::new());
        };
        let gone: Vec<StoreKey> = self
            .entries
            .keys()
            .filter(|k| !seen.contains(*k))
            .cloned()
            .collect();
        let mut changes = Vec::with_capacity(gone.len());
        let mut errors = Vec::new();
        for key in gone {
            self.unindex(&key);
            if let Some(entry) = self.entries.remove(&key) {
                match decode::<K>(&key, &entry.encoded) {
                    Ok(last) => changes.push(Change::Deleted(Arc::new(last))),
                    Err(e) => errors.push(e),
                }
            }
        }
        (changes, errors)
    }

    pub(crate) fn get(&self, namespace: &str, name: &str) -> Result<Option<Arc<K>>, CacheError> {
        let key = StoreKey {
            namespace: namespace.into(),
            name: name.into(),
        };
        self.entries
            .get(&key)
            .map(|e| decode::<K>(&key, &e.encoded).map(Arc::new))
            .transpose()
    }

    /// Objects in `namespace` (every namespace when `None`) whose labels match.
    pub(crate) fn list(
        &self,
        namespace: Option<&str>,
        selector: &CompiledSelector,
    ) -> Result<Vec<Arc<K>>, CacheError> {
        let range: Box<dyn Iterator<Item = (&StoreKey, &Entry)>> = match namespace {
            // The map is ordered by namespace first, so a namespace is a range:
            // this is the built-in namespace index.
            Some(ns) => Box::new(
                self.entries
                    .range(
                        StoreKey {
                            namespace: ns.into(),
                            name: "".into(),
                        }..,
                    )
                    .take_while(move |(k, _)| &*k.namespace == ns),
            ),
            None => Box::new(self.entries.iter()),
        };
        range
            .filter(|(_, e)| selector.selects_all() || selector.matches(&e.labels))
            .map(|(k, e)| decode::<K>(k, &e.encoded).map(Arc::new))
            .collect()
    }

    pub(crate) fn keys(&self) -> impl Iterator<Item = &StoreKey> {
        self.entries.keys()
    }

    /// Every cached object, decoded; used for resyncs and late handlers.
    pub(crate) fn all(&self) -> (Vec<Arc<K>>, Vec<CacheError>) {
        let mut objects = Vec::with_capacity(self.entries.len());
        let mut errors = Vec::new();
        for (k, e) in &self.entries {
            match decode::<K>(k, &e.encoded) {
                Ok(obj) => objects.push(Arc::new(obj)),
                Err(err) => errors.push(err),
            }
        }
        (objects, errors)
    }

    /// Adds (or replaces) a custom index and computes it for every cached object.
    pub(crate) fn add_index(&mut self, name: &str, func: IndexFn<K>) -> Result<(), CacheError> {
        let position = match self.indexes.iter().position(|i| i.name == name) {
            Some(p) => {
                self.indexes[p].func = func;
                self.indexes[p].keys_by_value.clear();
                p
            }
            None => {
                self.indexes.push(Index {
                    name: name.to_owned(),
                    func,
                    keys_by_value: BTreeMap::new(),
                });
                self.indexes.len() - 1
            }
        };
        let func = self.indexes[position].func.clone();
        for (key, entry) in &mut self.entries {
            let obj = decode::<K>(key, &entry.encoded)?;
            let values = boxed_values(func(&obj));
            let mut all: Vec<Box<[Box<str>]>> = std::mem::take(&mut entry.index_values).into_vec();
            all.resize_with(self.indexes.len(), Default::default);
            all[position] = values;
            for v in all[position].iter() {
                self.indexes[position]
                    .keys_by_value
                    .entry(v.clone())
                    .or_default()
                    .insert(key.clone());
            }
            entry.index_values = all.into_boxed_slice();
        }
        Ok(())
    }

    pub(crate) fn by_index(&self, name: &str, value: &str) -> Result<Vec<Arc<K>>, IndexError> {
        let index = self
            .indexes
            .iter()
            .find(|i| i.name == name)
            .ok_or_else(|| IndexError::Unknown {
                kind: K::kind(&()).into_owned(),
                index: name.to_owned(),
                known: self.indexes.iter().map(|i| i.name.clone()).collect(),
            })?;
        let Some(keys) = index.keys_by_value.get(value) else {
            return Ok(Vec::new());
        };
        keys.iter()
            .filter_map(|k| self.entries.get(k).map(|e| (k, e)))
            .map(|(k, e)| {
                decode::<K>(k, &e.encoded)
                    .map(Arc::new)
                    .map_err(IndexError::Cache)
            })
            .collect()
    }

    fn index(&mut self, key: &StoreKey, entry: &Entry) {
        for (index, values) in self.indexes.iter_mut().zip(entry.index_values.iter()) {
            for v in values.iter() {
                index
                    .keys_by_value
                    .entry(v.clone())
                    .or_default()
                    .insert(key.clone());
            }
        }
    }

    fn unindex(&mut self, key: &StoreKey) {
        let Some(entry) = self.entries.get(key) else {
            return;
        };
        for (index, values) in self.indexes.iter_mut().zip(entry.index_values.iter()) {
            for v in values.iter() {
                if let Some(keys) = index.keys_by_value.get_mut(v) {
                    keys.remove(key);
                    if keys.is_empty() {
                        index.keys_by_value.remove(v);
                    }
                }
            }
        }
    }
}

/// A lookup in an index that was never added.
#[derive(Debug, Error)]
pub enum IndexError {
    /// No index of that name.
    #[error(
        "the {kind} informer has no index {index:?} (it has {known:?}); add it with Informer::add_index before looking it up"
    )]
    Unknown {
        /// The kind of the informer.
        kind: String,
        /// The index asked for.
        index: String,
        /// The indexes that exist.
        known: Vec<String>,
    },
    /// An indexed object could not be decoded.
    #[error(transparent)]
    Cache(#[from] CacheError),
}

fn boxed_values(values: Vec<String>) -> Box<[Box<str>]> {
    values.into_iter().map(String::into_boxed_str).collect()
}

fn decode<K: Object>(key: &StoreKey, bytes: &[u8]) -> Result<K, CacheError> {
    serde_json::from_slice(bytes).map_err(|e| CacheError::new::<K>("decode", key, e))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use kube::core::Selector;

    use super::*;

    fn cm(ns: &str, name: &str, rv: &str, app: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                namespace: Some(ns.into()),
                name: Some(name.into()),
                resource_version: Some(rv.into()),
                labels: Some([("app".to_string(), app.to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn names(objs: &[Arc<ConfigMap>]) -> Vec<String> {
        objs.iter()
            .map(|o| o.metadata.name.clone().unwrap_or_default())
            .collect()
    }

    #[test]
    fn upsert_reports_add_update_and_skips_same_resource_version() {
        let mut store = Store::<ConfigMap>::new();
        assert!(matches!(
            store.upsert(cm("a", "x", "1", "web")).unwrap(),
            Some(Change::Added(_))
        ));
        assert!(store.upsert(cm("a", "x", "1", "web")).unwrap().is_none());
        match store.upsert(cm("a", "x", "2", "db")).unwrap() {
            Some(Change::Updated { old, new }) => {
                assert_eq!(old.metadata.resource_version.as_deref(), Some("1"));
                assert_eq!(new.metadata.resource_version.as_deref(), Some("2"));
            }
            other => panic!("expected an update, got {other:?}"),
        }
        assert_eq!(
            store
                .get("a", "x")
                .unwrap()
                .unwrap()
                .metadata
                .resource_version
                .as_deref(),
            Some("2")
        );
        assert!(matches!(
            store.remove(cm("a", "x", "3", "db")),
            Some(Change::Deleted(_))
        ));
        assert!(store.remove(cm("a", "x", "3", "db")).is_none());
        assert!(store.get("a", "x").unwrap().is_none());
    }

    #[test]
    fn list_by_namespace_and_selector_is_ordered() {
        let mut store = Store::<ConfigMap>::new();
        for (ns, name, app) in [
            ("b", "2", "web"),
            ("a", "2", "db"),
            ("a", "1", "web"),
            ("c", "1", "web"),
        ] {
            store.upsert(cm(ns, name, "1", app)).unwrap();
        }
        let everything = CompiledSelector::new(&Selector::default());
        assert_eq!(
            names(&store.list(None, &everything).unwrap()),
            ["1", "2", "2", "1"]
        );
        assert_eq!(names(&store.list(Some("a"), &everything).unwrap()), ["1", "2"]);
        assert!(store.list(Some("aa"), &everything).unwrap().is_empty());
        let web = CompiledSelector::new(&Selector::from_iter([("app", "web")]));
        let all_web = store.list(None, &web).unwrap();
        assert_eq!(
            all_web
                .iter()
                .map(|o| o.metadata.namespace.clone().unwrap_or_default())
                .collect::<Vec<_>>(),
            ["a", "b", "c"]
        );
        assert_eq!(names(&store.list(Some("a"), &web).unwrap()), ["1"]);
    }

    #[test]
    fn relist_deletes_what_it_did_not_see_with_last_known_state() {
        let mut store = Store::<ConfigMap>::new();
        store.upsert(cm("a", "kept", "1", "web")).unwrap();
        store.upsert(cm("a", "changed", "1", "web")).unwrap();
        store.upsert(cm("a", "gone", "7", "web")).unwrap();

        store.begin_relist();
        assert!(store.upsert(cm("a", "kept", "1", "web")).unwrap().is_none());
        assert!(matches!(
            store.upsert(cm("a", "changed", "2", "web")).unwrap(),
            Some(Change::Updated { .. })
        ));
        assert!(matches!(
            store.upsert(cm("a", "new", "3", "web")).unwrap(),
            Some(Change::Added(_))
        ));
        let (changes, errors) = store.finish_relist();
        assert!(errors.is_empty());
        match changes.as_slice() {
            [Change::Deleted(last)] => {
                assert_eq!(last.metadata.name.as_deref(), Some("gone"));
                assert_eq!(last.metadata.resource_version.as_deref(), Some("7"));
            }
            other => panic!("expected one delete, got {other:?}"),
        }
        assert_eq!(store.len(), 3);
        assert!(store.finish_relist().0.is_empty(), "no relist in progress");
    }

    #[test]
    fn custom_indexes_follow_updates_and_deletes() {
        let mut store = Store::<ConfigMap>::new();
        store.upsert(cm("a", "x", "1", "web")).unwrap();
        let by_app: IndexFn<ConfigMap> = Arc::new(|cm: &ConfigMap| {
            cm.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("app").cloned())
                .into_iter()
                .collect()
        });
        store.add_index("byApp", by_app).unwrap();
        store.upsert(cm("b", "y", "1", "web")).unwrap();
        assert_eq!(names(&store.by_index("byApp", "web").unwrap()), ["x", "y"]);

        store.upsert(cm("a", "x", "2", "db")).unwrap();
        assert_eq!(names(&store.by_index("byApp", "web").unwrap()), ["y"]);
        assert_eq!(names(&store.by_index("byApp", "db").unwrap()), ["x"]);
        store.remove(cm("b", "y", "3", "web"));
        assert!(store.by_index("byApp", "web").unwrap().is_empty());

        let err = store.by_index("byOwner", "x").unwrap_err().to_string();
        assert!(
            err.contains("no index \"byOwner\"") && err.contains("byApp"),
            "{err}"
        );
    }
}
