//! The informer cache: every object keyed by namespace and name, with its
//! resourceVersion, labels and custom index values beside it.
//!
//! How an object is held is a per-kind choice ([`CacheFormat`]). By default it
//! is decoded once, when the informer stores it, and shared behind an `Arc` by
//! the cache, every lister read and the handlers: a read costs a lookup and an
//! `Arc` clone (about 0.1 µs for a `get` of a reference Pod), never a decode.
//! The price is the kind's typed size: k8s-openapi types lay out every
//! optional nested struct inline, so a typed reference `Pod` costs about
//! 13 KB (client-go holds it in about 6 KB, kube-runtime's `Store` in about
//! 19 KB). As compact JSON it costs under 3 KB, and every read decodes it
//! again (about 12 µs for a `get`); a kind with many large objects that is
//! read rarely can opt into that. The `cache-memory` and `lister-read`
//! examples measure both.
//!
//! No form meets both halves of the budget (a `get` under 0.5 µs from at most
//! 4,000 bytes per reference Pod): before its first string, a decoded `Pod`
//! is 2,176 bytes of struct, each `Container` 2,120 and each `Volume` 3,208
//! (`std::mem::size_of`), so fast reads need more than 4,000 bytes, and a
//! smaller form needs a decode per read. The default keeps reads fast, since
//! a reconciler reads on every reconcile, and parses each object once.
//!
//! Entries are kept by namespace, then in a hash map by name, so a lookup
//! hashes the name once (no namespace in the key, no string comparisons) and
//! a namespace is one map to walk; lists, which keep name order, sort what
//! they return. Label keys and values are interned per cache, so the entry itself
//! holds its labels as a few integers: a list by label walks the entries
//! without following a pointer per object, whichever form the objects are in.
//!
//! Relists are applied in place: objects from the new list are upserted as they
//! arrive and the ones the list did not mention are removed when it ends. The
//! cache never holds two copies of the world, and handlers see exactly the
//! changes (an object with an unchanged resourceVersion is not an update).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use thiserror::Error;

use crate::apis::Object;
use crate::labels::{CompiledSelector, Interner, Labels};

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

/// How an informer's cache holds its objects: a trade-off between the time a
/// lister read takes and the memory each object costs, chosen per kind with
/// [`InformerSettings::cache`](crate::informer::InformerSettings::cache).
///
/// Decoded is the default: each object is parsed once, and reads, which a
/// reconciler makes on every reconcile, cost no decoding. A kind with many
/// large objects that is read rarely (every Pod of a cluster, say) can opt
/// into [`CacheFormat::Json`] for a fraction of the memory. A controller
/// that reads only names, labels, annotations and owners of a kind caches
/// less still with an informer of `PartialObjectMeta<K>`, which lists and
/// watches the metadata alone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CacheFormat {
    /// Each object decoded once, when the informer stores it, and shared behind
    /// an `Arc`: a read clones the `Arc`, and listers and handlers see the same
    /// allocation. Costs the kind's typed size, which for k8s-openapi kinds with
    /// large optional structs (a `Pod`) is several times their JSON.
    #[default]
    Decoded,
    /// Each object as compact JSON, decoded on every read (about 12 µs for a
    /// reference `Pod`, and a fresh copy each time), at a quarter of a
    /// decoded `Pod`'s memory.
    Json,
}

/// One cached object, in the form its store's [`CacheFormat`] asks for.
enum Body<K> {
    Decoded(Arc<K>),
    Json(Box<[u8]>),
}

struct Entry<K> {
    body: Body<K>,
    resource_version: Box<str>,
    labels: Labels,
    /// One list of values per custom index, in the order the indexes were added.
    index_values: Box<[Box<[Box<str>]>]>,
}

impl<K: Object> Entry<K> {
    fn object(&self, namespace: &str, name: &str) -> Result<Arc<K>, CacheError> {
        match &self.body {
            Body::Decoded(obj) => Ok(obj.clone()),
            Body::Json(bytes) => decode::<K>(namespace, name, bytes).map(Arc::new),
        }
    }
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
    fn new<K: Object>(action: &'static str, namespace: &str, name: &str, source: serde_json::Error) -> Self {
        let key = if namespace.is_empty() {
            name.to_owned()
        } else {
            format!("{namespace}/{name}")
        };
        CacheError {
            action,
            kind: K::kind(&()).into_owned(),
            key,
            source,
        }
    }
}

/// One namespace's entries, by name.
type Names<K> = HashMap<Box<str>, Entry<K>, ahash::RandomState>;

/// `names` in name order.
fn in_order<K>(names: &Names<K>) -> Vec<(&str, &Entry<K>)> {
    let mut sorted: Vec<(&str, &Entry<K>)> = names.iter().map(|(name, e)| (&**name, e)).collect();
    sorted.sort_unstable_by(|a, b| a.0.cmp(b.0));
    sorted
}

pub(crate) struct Store<K> {
    format: CacheFormat,
    /// By namespace (empty for cluster-scoped kinds), then by name: a
    /// lookup hashes the name once, where an ordered map compares it with a
    /// dozen others. What needs an order sorts.
    entries: BTreeMap<Box<str>, Names<K>>,
    /// The label strings of every entry, each held once.
    labels: Interner,
    indexes: Vec<Index<K>>,
    /// The keys seen since the current relist began; `None` outside a relist.
    relist_seen: Option<BTreeSet<StoreKey>>,
}

impl<K: Object> Store<K> {
    pub(crate) fn new(format: CacheFormat) -> Self {
        Store {
            format,
            entries: BTreeMap::new(),
            labels: Interner::default(),
            indexes: Vec::new(),
            relist_seen: None,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.values().map(HashMap::len).sum()
    }

    fn entry(&self, namespace: &str, name: &str) -> Option<&Entry<K>> {
        self.entries.get(namespace)?.get(name)
    }

    /// Every entry, ordered by namespace then name.
    fn iter(&self) -> impl Iterator<Item = (&str, &str, &Entry<K>)> {
        self.entries
            .iter()
            .flat_map(|(ns, names)| in_order(names).into_iter().map(move |(name, e)| (&**ns, name, e)))
    }

    /// Inserts or replaces an object. Returns the change, or `None` when the
    /// cache already held this resourceVersion.
    pub(crate) fn upsert(&mut self, obj: K) -> Result<Option<Change<K>>, CacheError> {
        let key = StoreKey::of(&obj);
        if let Some(seen) = &mut self.relist_seen {
            seen.insert(key.clone());
        }
        let resource_version = obj.meta().resource_version.as_deref().unwrap_or_default();
        let old = match self.entry(&key.namespace, &key.name) {
            Some(entry) if &*entry.resource_version == resource_version && !resource_version.is_empty() => {
                return Ok(None);
            }
            Some(entry) => Some(entry.object(&key.namespace, &key.name)?),
            None => None,
        };
        let resource_version = resource_version.into();
        let (new, body) = match self.format {
            // serde grows each list as it decodes, leaving room for four
            // elements where a Pod has one port or one volume mount; a clone
            // allocates each list at its length: a reference Pod holds
            // 12,899 bytes instead of 17,443 (the `cache-memory` example).
            CacheFormat::Decoded => {
                let new = Arc::new(obj.clone());
                (new.clone(), Body::Decoded(new))
            }
            CacheFormat::Json => {
                let bytes = serde_json::to_vec(&obj)
                    .map_err(|e| CacheError::new::<K>("encode", &key.namespace, &key.name, e))?;
                (Arc::new(obj), Body::Json(bytes.into_boxed_slice()))
            }
        };
        let labels = self.labels.labels(new.meta().labels.as_ref());
        let index_values = self
            .indexes
            .iter()
            .map(|idx| boxed_values((idx.func)(&new)))
            .collect();
        let entry = Entry {
            body,
            resource_version,
            labels,
            index_values,
        };
        self.unindex(&key);
        self.index(&key, &entry);
        let StoreKey { namespace, name } = key;
        if let Some(replaced) = self.entries.entry(namespace).or_default().insert(name, entry) {
            self.labels.release_labels(&replaced.labels);
        }
        Ok(Some(match old {
            Some(old) => Change::Updated { old, new },
            None => Change::Added(new),
        }))
    }

    /// Removes an object; the change carries the final state the API server sent.
    pub(crate) fn remove(&mut self, obj: K) -> Option<Change<K>> {
        let key = StoreKey::of(&obj);
        self.take(&key).map(|_| Change::Deleted(Arc::new(obj)))
    }

    /// Drops `key`'s entry (its object can no longer be decoded): handlers see
    /// the last good version deleted.
    pub(crate) fn forget(&mut self, key: &StoreKey) -> Result<Option<Change<K>>, CacheError> {
        match self.take(key) {
            Some(entry) => entry
                .object(&key.namespace, &key.name)
                .map(|last| Some(Change::Deleted(last))),
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
            .keys()
            .map(|(namespace, name)| StoreKey {
                namespace: namespace.into(),
                name: name.into(),
            })
            .filter(|k| !seen.contains(k))
            .collect();
        let mut changes = Vec::with_capacity(gone.len());
        let mut errors = Vec::new();
        for key in gone {
            if let Some(entry) = self.take(&key) {
                match entry.object(&key.namespace, &key.name) {
                    Ok(last) => changes.push(Change::Deleted(last)),
                    Err(e) => errors.push(e),
                }
            }
        }
        (changes, errors)
    }

    pub(crate) fn get(&self, namespace: &str, name: &str) -> Result<Option<Arc<K>>, CacheError> {
        self.entry(namespace, name)
            .map(|e| e.object(namespace, name))
            .transpose()
    }

    /// Objects in `namespace` (every namespace when `None`) whose labels match.
    pub(crate) fn list(
        &self,
        namespace: Option<&str>,
        selector: &CompiledSelector,
    ) -> Result<Vec<Arc<K>>, CacheError> {
        let Some(selector) = selector.resolve(&self.labels) else {
            return Ok(Vec::new());
        };
        let Some(ns) = namespace else {
            return self
                .iter()
                .filter(|(_, _, e)| selector.matches(&e.labels))
                .map(|(ns, name, e)| e.object(ns, name))
                .collect();
        };
        let Some((ns, names)) = self.entries.get_key_value(ns) else {
            return Ok(Vec::new());
        };
        // Only the selected are put in order.
        let mut selected: Vec<(&str, &Entry<K>)> = names
            .iter()
            .filter(|(_, e)| selector.matches(&e.labels))
            .map(|(name, e)| (&**name, e))
            .collect();
        selected.sort_unstable_by(|a, b| a.0.cmp(b.0));
        selected.into_iter().map(|(name, e)| e.object(ns, name)).collect()
    }

    /// The `(namespace, name)` of every entry, ordered.
    pub(crate) fn keys(&self) -> impl Iterator<Item = (&str, &str)> {
        self.iter().map(|(namespace, name, _)| (namespace, name))
    }

    /// Up to `limit` keys after `after` (from the first when `None`), in
    /// order: a walk over the cache that holds no lock between steps.
    pub(crate) fn keys_after(&self, after: Option<&StoreKey>, limit: usize) -> Vec<StoreKey> {
        use std::ops::Bound::{Included, Unbounded};
        let mut keys = Vec::with_capacity(limit.min(self.len()));
        let from = after.map_or(Unbounded, |k| Included(&*k.namespace));
        for (namespace, names) in self.entries.range::<str, _>((from, Unbounded)) {
            let after_name = after.filter(|k| k.namespace == *namespace).map(|k| &*k.name);
            let mut later: Vec<&Box<str>> = names
                .keys()
                .filter(|name| after_name.is_none_or(|after| &***name > after))
                .collect();
            // The next `room` names in order, without sorting the rest.
            let room = limit - keys.len();
            if later.len() > room {
                later.select_nth_unstable(room);
                later.truncate(room);
            }
            later.sort_unstable();
            keys.extend(later.into_iter().map(|name| StoreKey {
                namespace: namespace.clone(),
                name: name.clone(),
            }));
            if keys.len() == limit {
                return keys;
            }
        }
        keys
    }

    /// Every cached object; used for late handlers.
    pub(crate) fn all(&self) -> (Vec<Arc<K>>, Vec<CacheError>) {
        let mut objects = Vec::with_capacity(self.len());
        let mut errors = Vec::new();
        for (namespace, name, e) in self.iter() {
            match e.object(namespace, name) {
                Ok(obj) => objects.push(obj),
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
        let entries = self
            .entries
            .iter_mut()
            .flat_map(|(ns, names)| names.iter_mut().map(move |(name, e)| (&**ns, &**name, e)));
        for (namespace, name, entry) in entries {
            let obj = entry.object(namespace, name)?;
            let values = boxed_values(func(&obj));
            let mut all: Vec<Box<[Box<str>]>> = std::mem::take(&mut entry.index_values).into_vec();
            all.resize_with(self.indexes.len(), Default::default);
            all[position] = values;
            for v in all[position].iter() {
                self.indexes[position]
                    .keys_by_value
                    .entry(v.clone())
                    .or_default()
                    .insert(StoreKey {
                        namespace: namespace.into(),
                        name: name.into(),
                    });
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
            .filter_map(|k| self.entry(&k.namespace, &k.name).map(|e| (k, e)))
            .map(|(k, e)| e.object(&k.namespace, &k.name).map_err(IndexError::Cache))
            .collect()
    }

    fn index(&mut self, key: &StoreKey, entry: &Entry<K>) {
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

    /// Removes `key`'s entry, with everything that refers to it.
    fn take(&mut self, key: &StoreKey) -> Option<Entry<K>> {
        self.unindex(key);
        let names = self.entries.get_mut(&key.namespace)?;
        let entry = names.remove(&key.name)?;
        if names.is_empty() {
            self.entries.remove(&key.namespace);
        }
        self.labels.release_labels(&entry.labels);
        Some(entry)
    }

    fn unindex(&mut self, key: &StoreKey) {
        let Some(entry) = self
            .entries
            .get(&key.namespace)
            .and_then(|names| names.get(&key.name))
        else {
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

fn decode<K: Object>(namespace: &str, name: &str, bytes: &[u8]) -> Result<K, CacheError> {
    serde_json::from_slice(bytes).map_err(|e| CacheError::new::<K>("decode", namespace, name, e))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use kube::core::Selector;

    use super::*;

    /// Every behaviour holds whichever form the cache keeps objects in.
    const FORMATS: [CacheFormat; 2] = [CacheFormat::Decoded, CacheFormat::Json];

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

    /// serde leaves room for more in a list it decoded; the cache holds lists
    /// at their length, and reads share that compact object.
    #[test]
    fn a_decoded_object_holds_its_lists_at_their_length() {
        let decoded: ConfigMap = serde_json::from_str(
            r#"{"metadata":{"namespace":"a","name":"x","resourceVersion":"1","finalizers":["example.com/cleanup"]}}"#,
        )
        .unwrap();
        let finalizers = |cm: &ConfigMap| cm.metadata.finalizers.as_ref().map(|f| (f.len(), f.capacity()));
        let (len, capacity) = finalizers(&decoded).unwrap();
        assert!(capacity > len, "serde grew the list: {capacity} for {len}");
        let mut store = Store::<ConfigMap>::new(CacheFormat::Decoded);
        let Some(Change::Added(added)) = store.upsert(decoded).unwrap() else {
            panic!("the object was added");
        };
        let read = store.get("a", "x").unwrap().unwrap();
        assert!(Arc::ptr_eq(&added, &read), "handlers and reads share one object");
        assert_eq!(finalizers(&read), Some((1, 1)));
    }

    #[test]
    fn upsert_reports_add_update_and_skips_same_resource_version() {
        for format in FORMATS {
            let mut store = Store::<ConfigMap>::new(format);
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
    }

    /// The walk a resync makes, a few keys at a time, meets every key once
    /// and in order, across namespaces and within one bigger than a step.
    #[test]
    fn keys_after_walks_every_key_in_order_a_step_at_a_time() {
        let mut store = Store::<ConfigMap>::new(CacheFormat::Decoded);
        let mut want = Vec::new();
        for ns in ["b", "a", "c"] {
            for i in (0..7).rev() {
                store.upsert(cm(ns, &format!("n{i}"), "1", "web")).unwrap();
                want.push((ns.to_owned(), format!("n{i}")));
            }
        }
        want.sort();
        let mut walked = Vec::new();
        let mut last: Option<StoreKey> = None;
        loop {
            let keys = store.keys_after(last.as_ref(), 3);
            walked.extend(keys.iter().map(|k| (k.namespace.to_string(), k.name.to_string())));
            if keys.len() < 3 {
                break;
            }
            last = keys.into_iter().last();
        }
        assert_eq!(walked, want);
    }

    #[test]
    fn list_by_namespace_and_selector_is_ordered() {
        for format in FORMATS {
            let mut store = Store::<ConfigMap>::new(format);
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
    }

    #[test]
    fn relist_deletes_what_it_did_not_see_with_last_known_state() {
        for format in FORMATS {
            let mut store = Store::<ConfigMap>::new(format);
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
    }

    /// An index of ConfigMaps by their `app` label.
    fn by_app() -> IndexFn<ConfigMap> {
        Arc::new(|cm: &ConfigMap| {
            cm.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("app").cloned())
                .into_iter()
                .collect()
        })
    }

    #[test]
    fn custom_indexes_follow_updates_and_deletes() {
        for format in FORMATS {
            let mut store = Store::<ConfigMap>::new(format);
            store.upsert(cm("a", "x", "1", "web")).unwrap();
            store.add_index("byApp", by_app()).unwrap();
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

    #[test]
    fn decoded_reads_share_the_stored_object_until_it_changes() {
        let mut store = Store::<ConfigMap>::new(CacheFormat::Decoded);
        store.add_index("byApp", by_app()).unwrap();
        let Some(Change::Added(added)) = store.upsert(cm("a", "x", "1", "web")).unwrap() else {
            panic!("expected an add");
        };
        let everything = CompiledSelector::new(&Selector::default());
        let read = store.get("a", "x").unwrap().unwrap();
        // The same allocation the handlers got: nothing was decoded or copied.
        assert!(Arc::ptr_eq(&read, &added));
        assert!(Arc::ptr_eq(
            &store.list(Some("a"), &everything).unwrap()[0],
            &added
        ));
        assert!(Arc::ptr_eq(&store.by_index("byApp", "web").unwrap()[0], &added));
        assert!(Arc::ptr_eq(&store.all().0[0], &added));

        let Some(Change::Updated { old, new }) = store.upsert(cm("a", "x", "2", "db")).unwrap() else {
            panic!("expected an update");
        };
        assert!(
            Arc::ptr_eq(&old, &added),
            "the old object is the one cached before"
        );
        let after = store.get("a", "x").unwrap().unwrap();
        assert!(Arc::ptr_eq(&after, &new));
        assert_eq!(after.metadata.resource_version.as_deref(), Some("2"));
        assert_eq!(
            read.metadata.resource_version.as_deref(),
            Some("1"),
            "a reader's earlier object does not change under it"
        );
        assert_eq!(names(&store.by_index("byApp", "db").unwrap()), ["x"]);
    }

    #[test]
    fn json_reads_are_fresh_copies() {
        let mut store = Store::<ConfigMap>::new(CacheFormat::Json);
        store.upsert(cm("a", "x", "1", "web")).unwrap();
        let first = store.get("a", "x").unwrap().unwrap();
        let second = store.get("a", "x").unwrap().unwrap();
        assert!(!Arc::ptr_eq(&first, &second));
        assert_eq!(first, second);
    }
}
