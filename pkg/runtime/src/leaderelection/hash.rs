//! Consistent assignment of keys to buckets, bit for bit as Knative's
//! `hash.ChooseSubset` and `hash.BucketSet` do it, so a key lands in the same
//! bucket here as in a Knative controller with the same bucket names.
//!
//! For a key (the `namespace/name` string) the algorithm hashes with FNV-64a,
//! modulo a universe of 2048 angles:
//!
//! 1. a start angle, `fnv(key + "start-angle-salt") % 2048`, and a step,
//!    `fnv(key + "step-angle-salt") % 2048`;
//! 2. an angle per bucket name, `fnv(name + key) % 2048`; when two names land
//!    on the same angle, the later one (in byte order) appends the lowercase
//!    hex of its last hash to what it hashed and hashes again, until it lands
//!    on a free angle;
//! 3. the owner is the bucket on the first angle at or after the start angle,
//!    wrapping around to the smallest angle. Choosing `n` buckets repeats from
//!    `start + step`, `start + 2·step`, …, skipping buckets already chosen.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::num::NonZeroUsize;
use std::sync::Arc;

use lru::LruCache;
use parking_lot::Mutex;

use crate::controller::KeySource;
use crate::key::ObjectKey;
use crate::leader::Bucket;

const START_SALT: &[u8] = b"start-angle-salt";
const STEP_SALT: &[u8] = b"step-angle-salt";
/// The possible angles, `[0, UNIVERSE)`.
const UNIVERSE: u64 = 1 << 11;
/// Owners remembered per [`BucketSet`], as Knative does.
const CACHE_SIZE: NonZeroUsize = match NonZeroUsize::new(4096) {
    Some(n) => n,
    None => NonZeroUsize::MIN,
};

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a, 64 bits, over the concatenation of `parts`.
pub(super) fn fnv64a(parts: &[&[u8]]) -> u64 {
    parts
        .iter()
        .flat_map(|p| p.iter())
        .fold(FNV_OFFSET, |h, &b| (h ^ u64::from(b)).wrapping_mul(FNV_PRIME))
}

/// The angles of one target: where to start, how far to step, and each
/// name's angle, sorted by angle (`(angle, index into the sorted names)`).
struct Angles {
    start: u64,
    step: u64,
    pool: Vec<(u64, usize)>,
}

/// `names` must be sorted (byte order) and free of duplicates.
fn angles(names: &[String], target: &str) -> Angles {
    let target = target.as_bytes();
    let start = fnv64a(&[target, START_SALT]) % UNIVERSE;
    let step = fnv64a(&[target, STEP_SALT]) % UNIVERSE;
    let mut taken: BTreeMap<u64, usize> = BTreeMap::new();
    let mut buf = Vec::new();
    for (index, name) in names.iter().enumerate() {
        buf.clear();
        buf.extend_from_slice(name.as_bytes());
        buf.extend_from_slice(target);
        let mut hash = fnv64a(&[&buf]);
        while taken.contains_key(&(hash % UNIVERSE)) {
            buf.extend_from_slice(format!("{hash:x}").as_bytes());
            hash = fnv64a(&[&buf]);
        }
        taken.insert(hash % UNIVERSE, index);
    }
    Angles {
        start,
        step,
        pool: taken.into_iter().collect(),
    }
}

/// Indexes (into `names`) of `n` names chosen for `target`, in choice order.
fn choose_indexes(names: &[String], n: usize, target: &str) -> Vec<usize> {
    if n >= names.len() {
        return (0..names.len()).collect();
    }
    let Angles { start, step, pool } = angles(names, target);
    let mut chosen: Vec<usize> = Vec::with_capacity(n);
    let mut angle = start;
    while chosen.len() < n {
        let mut slot = pool.partition_point(|&(a, _)| a < angle);
        if slot == pool.len() {
            slot = 0;
        }
        while chosen.contains(&slot) {
            slot = (slot + 1) % pool.len();
        }
        chosen.push(slot);
        angle = (angle + step) % UNIVERSE;
    }
    chosen.into_iter().map(|slot| pool[slot].1).collect()
}

/// Consistently chooses `n` of `from` for `target` (Knative's
/// `hash.ChooseSubset`): the same inputs always give the same subset, and
/// adding or removing a name moves few targets. All of `from` when `n` is at
/// least its size.
///
/// ```
/// use std::collections::BTreeSet;
/// use kinject_runtime::leaderelection::choose_subset;
///
/// let tasks: BTreeSet<String> = ["task1", "task2", "task3"].map(String::from).into();
/// let chosen = choose_subset(&tasks, 1, "my-key1");
/// assert_eq!(chosen, BTreeSet::from(["task3".to_owned()]));
/// ```
pub fn choose_subset(from: &BTreeSet<String>, n: usize, target: &str) -> BTreeSet<String> {
    let names: Vec<String> = from.iter().cloned().collect();
    choose_indexes(&names, n, target)
        .into_iter()
        .map(|i| names[i].clone())
        .collect()
}

/// The buckets of one reconciler's keys (Knative's `hash.BucketSet`): a
/// fixed set of names, each key owned by exactly one of them.
///
/// Owners are cached (LRU, 4096 keys). Cloning is cheap and shares the cache.
/// Unlike Knative's, a set never changes its names: a new bucket count means
/// new lease names, hence a new set.
///
/// ```
/// use kinject_runtime::key::ObjectKey;
/// use kinject_runtime::leaderelection::BucketSet;
/// use kinject_runtime::leader::Bucket;
///
/// let set = BucketSet::new(["controller.addressableservice.00-of-02", "controller.addressableservice.01-of-02"]);
/// let key = ObjectKey::new("knative-samples", "web");
/// assert_eq!(set.owner_of(&key), Some("controller.addressableservice.00-of-02"));
/// let [first, second] = &set.buckets()[..] else { unreachable!() };
/// assert!(first.has(&key) && !second.has(&key));
/// ```
#[derive(Clone)]
pub struct BucketSet {
    inner: Arc<SetInner>,
}

struct SetInner {
    /// Sorted by byte order, without duplicates.
    names: Vec<String>,
    /// Key → index into `names`.
    cache: Mutex<LruCache<String, usize>>,
}

impl fmt::Debug for BucketSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BucketSet")
            .field("names", &self.inner.names)
            .finish_non_exhaustive()
    }
}

impl BucketSet {
    /// A set of the given bucket names (duplicates count once).
    pub fn new(names: impl IntoIterator<Item = impl Into<String>>) -> Self {
        let names: BTreeSet<String> = names.into_iter().map(Into::into).collect();
        BucketSet {
            inner: Arc::new(SetInner {
                names: names.into_iter().collect(),
                cache: Mutex::new(LruCache::new(CACHE_SIZE)),
            }),
        }
    }

    /// The bucket names, sorted.
    pub fn names(&self) -> &[String] {
        &self.inner.names
    }

    /// True when `name` is one of the set's buckets.
    pub fn has_bucket(&self, name: &str) -> bool {
        self.index_of(name).is_some()
    }

    /// Every bucket, sorted by name.
    pub fn buckets(&self) -> Vec<HashBucket> {
        (0..self.inner.names.len())
            .map(|index| HashBucket {
                set: self.clone(),
                index,
            })
            .collect()
    }

    /// The bucket named `name`, if the set has it.
    pub fn bucket(&self, name: &str) -> Option<HashBucket> {
        self.index_of(name).map(|index| HashBucket {
            set: self.clone(),
            index,
        })
    }

    /// The name of the bucket owning `key`, a `namespace/name` string as
    /// Knative hashes it (a cluster-scoped key is `/name`); `None` for an empty
    /// set.
    pub fn owner(&self, key: &str) -> Option<&str> {
        self.owner_index(key).map(|i| self.inner.names[i].as_str())
    }

    /// The name of the bucket owning `key`; `None` for an empty set.
    pub fn owner_of(&self, key: &ObjectKey) -> Option<&str> {
        self.owner(&hash_key(key))
    }

    /// How many of `keys` each bucket owns, in [`names`](Self::names) order.
    ///
    /// For reporting over a whole cache: owners already cached are read
    /// without touching their recency, and the rest are not cached, so a
    /// count over more keys than the cache holds does not evict the owners
    /// that reconciles look up.
    pub fn count_keys<'a>(&self, keys: impl IntoIterator<Item = &'a ObjectKey>) -> Vec<usize> {
        let mut counts = vec![0; self.inner.names.len()];
        for key in keys {
            let hashed = hash_key(key);
            let cached = self.inner.cache.lock().peek(&hashed).copied();
            let index = cached.or_else(|| choose_indexes(&self.inner.names, 1, &hashed).first().copied());
            if let Some(count) = index.and_then(|i| counts.get_mut(i)) {
                *count += 1;
            }
        }
        counts
    }

    fn index_of(&self, name: &str) -> Option<usize> {
        self.inner.names.binary_search_by(|n| n.as_str().cmp(name)).ok()
    }

    fn owner_index(&self, key: &str) -> Option<usize> {
        if let Some(&index) = self.inner.cache.lock().get(key) {
            return Some(index);
        }
        let index = *choose_indexes(&self.inner.names, 1, key).first()?;
        self.inner.cache.lock().put(key.to_owned(), index);
        Some(index)
    }

    #[cfg(test)]
    fn cached(&self) -> usize {
        self.inner.cache.lock().len()
    }
}

/// What Knative hashes for a key: `types.NamespacedName.String()`, which keeps
/// the `/` even when the namespace is empty (unlike [`ObjectKey`]'s `Display`).
fn hash_key(key: &ObjectKey) -> String {
    format!("{}/{}", key.namespace, key.name)
}

/// A controller's keys and its buckets: how many keys each bucket holds, for
/// the metrics and for the replicas to share the keys evenly.
#[derive(Clone)]
pub(super) struct KeysPerBucket {
    pub(super) buckets: BucketSet,
    pub(super) keys: Arc<dyn KeySource>,
}

impl KeysPerBucket {
    /// How many of the keys each bucket holds now, by ordinal.
    pub(super) fn count_all(&self) -> Vec<usize> {
        self.buckets.count_keys(&self.keys.keys())
    }

    /// As [`count_all`](Self::count_all), once the keys are complete (the
    /// cache has listed); `None` before.
    pub(super) fn count_complete(&self) -> Option<Vec<usize>> {
        self.complete().then(|| self.count_all())
    }

    /// Whether the keys are complete.
    pub(super) fn complete(&self) -> bool {
        self.keys.complete()
    }
}

/// One bucket of a [`BucketSet`] (Knative's `hash.Bucket`): it has the keys
/// the set assigns to it. Its name is its lease name.
#[derive(Clone)]
pub struct HashBucket {
    set: BucketSet,
    index: usize,
}

impl fmt::Debug for HashBucket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("HashBucket").field(&self.name()).finish()
    }
}

impl HashBucket {
    /// The set this bucket belongs to.
    pub fn set(&self) -> &BucketSet {
        &self.set
    }
}

impl Bucket for HashBucket {
    fn name(&self) -> &str {
        &self.set.inner.names[self.index]
    }

    fn has(&self, key: &ObjectKey) -> bool {
        self.set.owner_index(&hash_key(key)) == Some(self.index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn fnv64a_reference_values() {
        assert_eq!(fnv64a(&[]), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv64a(&[b"a"]), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv64a(&[b"foo", b"bar"]), 0x8594_4171_f739_67e8);
    }

    /// The examples and test tables of Knative's `hash` package.
    #[test]
    fn knative_vectors() {
        let tasks = set(&["task1", "task2", "task3"]);
        assert_eq!(choose_subset(&tasks, 1, "my-key1"), set(&["task3"]));
        assert_eq!(choose_subset(&tasks, 1, "something/another-key"), set(&["task2"]));
        let tasks = set(&["task1", "task2", "task3", "task4", "task5"]);
        assert_eq!(choose_subset(&tasks, 2, "my-key1"), set(&["task3", "task4"]));
        let planets = set(&["sun", "moon", "mars", "mercury"]);
        assert_eq!(choose_subset(&planets, 4, "a target!"), planets);
        assert_eq!(choose_subset(&planets, 2, "a target!"), set(&["mercury", "moon"]));
        assert_eq!(
            choose_subset(&planets, 2, "something else entirely"),
            set(&["mercury", "mars"])
        );
        assert_eq!(
            choose_subset(&planets, 3, "something else entirely"),
            set(&["mars", "mercury", "sun"])
        );
        let rain = BucketSet::new(["monsoon", "chubasco", "aguacero", "chaparrón"]);
        assert_eq!(rain.names(), ["aguacero", "chaparrón", "chubasco", "monsoon"]);
        assert_eq!(rain.owner("hagel"), Some("monsoon"));
        assert_eq!(rain.owner("snow"), Some("chubasco"));
        assert_eq!(rain.owner_of(&ObjectKey::new("snow", "hail")), Some("monsoon"));
    }

    /// Two names on one angle: the later re-hashes with its hash's hex appended.
    #[test]
    fn collisions_are_resolved_as_knative_does() {
        let (key1, key2) = (
            "b08006d4-81f9-42ee-808b-ea18a39cbd83",
            "c9dc8df4-8c8d-4077-8750-6d2c2113a23b",
        );
        let target = "e68a64e1-19d8-4855-9ffa-04f49223a059";
        let h1 = fnv64a(&[key1.as_bytes(), target.as_bytes()]) % UNIVERSE;
        let h2 = fnv64a(&[key2.as_bytes(), target.as_bytes()]) % UNIVERSE;
        assert_eq!((h1, h2), (1222, 1222), "the baseline collides");
        let names = vec![key1.to_owned(), key2.to_owned()];
        let a = angles(&names, target);
        assert_eq!((a.start, a.step), (547, 777));
        assert_eq!(a.pool, [(904, 1), (1222, 0)]);
    }

    /// Worked by hand from the algorithm (FNV-64a values mod 2048) for two
    /// buckets `controller.addressableservice.0N-of-02` (A0, A1) and three
    /// `controller.simpledeployment.0N-of-03` (S0, S1, S2):
    ///
    /// | key | start | angles | owner |
    /// |---|---|---|---|
    /// | `default/hello` | 1748 | A1 190, A0 431 | past the last angle: wraps to A1 |
    /// | `default/world` | 1356 | A0 151, A1 1874 | A1 |
    /// | `knative-samples/web` | 335 | A0 404, A1 601 | A0 |
    /// | `ns/b` | 202 | A0 289, A1 1282 | A0 |
    /// | `ns/c` | 1617 | A1 1717, A0 1902 | A1 |
    /// | `/node-1` | 1093 | A0 530, A1 643 | wraps to A0 |
    /// | `default/hello` | 1748 | S2 1422, S0 1616, S1 1785 | S1 |
    /// | `default/world` | 1356 | S0 28, S2 610, S1 1217 | wraps to S0 |
    /// | `prod/api` | 1626 | S0 448, S1 595, S2 1898 | S2 |
    #[test]
    fn known_assignments() {
        let two = lease_names("addressableservice", 2);
        let a = BucketSet::new(two.clone());
        let angles_of = |key: &str| {
            let x = angles(a.names(), key);
            (x.start, x.pool)
        };
        assert_eq!(angles_of("default/hello"), (1748, vec![(190, 1), (431, 0)]));
        assert_eq!(angles_of("knative-samples/web"), (335, vec![(404, 0), (601, 1)]));
        for (ns, name, owner) in [
            ("default", "hello", 1),
            ("default", "world", 1),
            ("knative-samples", "web", 0),
            ("ns", "a", 1),
            ("ns", "b", 0),
            ("ns", "c", 1),
            ("ns", "d", 1),
            ("", "node-1", 0),
            ("", "node-2", 1),
            ("", "node-3", 1),
        ] {
            let key = ObjectKey::new(ns, name);
            assert_eq!(a.owner_of(&key), Some(two[owner].as_str()), "{key}");
            let buckets = a.buckets();
            assert!(buckets[owner].has(&key), "{key}");
            assert!(!buckets[1 - owner].has(&key), "{key}");
        }
        // A cluster-scoped key hashes as "/name", not "name".
        assert_eq!(a.owner("/node-2"), Some(two[1].as_str()));
        assert_eq!(a.owner("node-2"), Some(two[0].as_str()));

        let three = lease_names("simpledeployment", 3);
        let s = BucketSet::new(three.clone());
        for (ns, name, owner) in [
            ("default", "hello", 1),
            ("default", "world", 0),
            ("prod", "api", 2),
            ("", "node-1", 1),
        ] {
            assert_eq!(s.owner_of(&ObjectKey::new(ns, name)), Some(three[owner].as_str()));
        }
    }

    fn lease_names(queue: &str, buckets: u32) -> Vec<String> {
        (0..buckets)
            .map(|i| format!("controller.{queue}.{i:02}-of-{buckets:02}"))
            .collect()
    }

    #[test]
    fn one_bucket_owns_everything_and_empty_owns_nothing() {
        let one = BucketSet::new(["only"]);
        assert_eq!(one.owner("anything/at-all"), Some("only"));
        assert!(one.buckets()[0].has(&ObjectKey::new("", "x")));
        let none = BucketSet::new(Vec::<String>::new());
        assert_eq!(none.owner("a/b"), None);
        assert!(none.buckets().is_empty());
    }

    #[test]
    fn owners_are_cached() {
        let rain = BucketSet::new(["monsoon", "chubasco", "aguacero", "chaparrón"]);
        assert_eq!(rain.cached(), 0);
        assert_eq!(rain.owner("hagel"), Some("monsoon"));
        assert_eq!(rain.owner("hagel"), Some("monsoon"));
        assert_eq!(rain.cached(), 1);
        assert_eq!(rain.owner("snow"), Some("chubasco"));
        assert_eq!(rain.cached(), 2);
        for i in 0..5000 {
            rain.owner(&format!("ns/{i}"));
        }
        assert_eq!(rain.cached(), 4096, "the cache is bounded");
    }

    #[test]
    fn counting_keys_agrees_with_the_owners_and_leaves_the_cache_alone() {
        let set = BucketSet::new(lease_names("q", 3));
        let keys: Vec<ObjectKey> = (0..5000)
            .map(|i| ObjectKey::new("ns", format!("obj-{i}")))
            .collect();
        let _cached = set.owner_of(&keys[0]);
        let counts = set.count_keys(&keys);
        assert_eq!(set.cached(), 1, "counting caches nothing");
        assert_eq!(counts.iter().sum::<usize>(), keys.len());
        for (index, name) in set.names().iter().enumerate() {
            let owned = keys
                .iter()
                .filter(|k| set.owner_of(k) == Some(name.as_str()))
                .count();
            assert_eq!(counts[index], owned, "{name}");
        }
        assert!(BucketSet::new(Vec::<String>::new()).count_keys(&keys).is_empty());
    }

    #[test]
    fn buckets_partition_the_keys() {
        let set = BucketSet::new(lease_names("q", 5));
        let buckets = set.buckets();
        assert_eq!(set.bucket(buckets[3].name()).map(|b| b.index), Some(3));
        assert!(set.bucket("nope").is_none());
        assert!(set.has_bucket("controller.q.04-of-05") && !set.has_bucket("controller.q.05-of-05"));
        let mut counts = [0usize; 5];
        for i in 0..5000 {
            let key = ObjectKey::new("ns", format!("obj-{i}"));
            let owners: Vec<usize> = (0..5).filter(|&b| buckets[b].has(&key)).collect();
            assert_eq!(owners.len(), 1, "{key}");
            counts[owners[0]] += 1;
        }
        for count in counts {
            assert!((700..1300).contains(&count), "skewed: {counts:?}");
        }
    }
}
