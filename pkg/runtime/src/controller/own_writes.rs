//! The writes a controller's reconciler makes to the objects it reconciles,
//! remembered until the watch shows them.
//!
//! Two things follow from them. A watch update from the version a write
//! replaced to the version it wrote only echoes the write: the reconcile that
//! wrote it saw that state, so the key is not queued again for it
//! ([`OwnWrites::is_echo`]; Knative queues it, and reconciles every object it
//! writes a second time for nothing). And a cache that still holds a replaced
//! version is stale ([`OwnWrites::is_stale`]): a reconcile from it would write
//! again and earn a 409.
//!
//! An update can arrive before the answer to the write that caused it. One
//! from the version a write in flight started from is held until the answer:
//! it was the write's own when the write succeeded with that version, and is
//! queued when the write failed (another writer came first) or wrote
//! something else. Writes are resourceVersion-guarded (a status update, a
//! merge patch carrying the version), so a write that succeeded is the only
//! change between the two versions.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use crate::key::ObjectKey;
use crate::leader::Bucket;

/// How long a written version's replaced one is remembered: past this, a
/// cache that still holds it is trusted again (and a write from it meets the
/// usual conflict), and its update, if it ever comes, queues the key.
pub(crate) const STALE_CACHE_WINDOW: Duration = Duration::from_secs(10);

/// The most unseen writes remembered per key; a reconcile writes at most
/// twice (a finalizer patch, then the status), so older ones are long seen.
const WRITES_KEPT: usize = 4;

type Enqueue = Box<dyn Fn(ObjectKey) + Send + Sync>;

/// A controller's writes to its own objects; cloning shares them.
#[derive(Clone)]
pub(crate) struct OwnWrites {
    shared: Arc<Shared>,
}

struct Shared {
    /// Queues a key whose held update turned out not to be its write's.
    enqueue: Enqueue,
    keys: Mutex<HashMap<ObjectKey, Writes>>,
}

#[derive(Default)]
struct Writes {
    /// The versions that writes in flight started from.
    in_flight: Vec<String>,
    /// Updates `(old, new)` from such a version, seen before the answer.
    held: Vec<(String, String)>,
    /// Writes answered whose update has not been seen.
    unseen: Vec<Written>,
}

struct Written {
    replaced: String,
    written: String,
    at: Instant,
}

impl Writes {
    fn is_empty(&self) -> bool {
        self.in_flight.is_empty() && self.held.is_empty() && self.unseen.is_empty()
    }

    fn expire(&mut self, now: Instant) {
        self.unseen
            .retain(|w| now.saturating_duration_since(w.at) < STALE_CACHE_WINDOW);
    }
}

impl fmt::Debug for OwnWrites {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnWrites")
            .field("keys", &self.shared.keys.lock().len())
            .finish_non_exhaustive()
    }
}

/// A write in flight from one version of a key's object; [`done`](Self::done)
/// with the version it wrote, or dropped when it failed.
#[must_use = "a write in flight holds the updates from its version until it is done or dropped"]
pub(crate) struct InFlight {
    writes: OwnWrites,
    key: ObjectKey,
    base: String,
    written: Option<String>,
}

impl OwnWrites {
    /// Nothing written yet; `enqueue` queues a key whose held update was
    /// another writer's.
    pub(crate) fn new(enqueue: impl Fn(ObjectKey) + Send + Sync + 'static) -> Self {
        OwnWrites {
            shared: Arc::new(Shared {
                enqueue: Box::new(enqueue),
                keys: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// A write to `key`'s object at version `base` is about to be sent;
    /// `None` (nothing remembered) for an object without a version.
    pub(crate) fn begin(&self, key: &ObjectKey, base: Option<&str>) -> Option<InFlight> {
        let base = base.filter(|v| !v.is_empty())?;
        self.shared
            .keys
            .lock()
            .entry(key.clone())
            .or_default()
            .in_flight
            .push(base.to_owned());
        Some(InFlight {
            writes: self.clone(),
            key: key.clone(),
            base: base.to_owned(),
            written: None,
        })
    }

    /// True when a watch update of `key` from version `old` to `new` is a
    /// write of ours (or may be, its write still in flight): it queues
    /// nothing.
    pub(crate) fn is_echo(&self, key: &ObjectKey, old: Option<&str>, new: Option<&str>) -> bool {
        let (Some(old), Some(new)) = (old, new) else {
            return false;
        };
        let mut keys = self.shared.keys.lock();
        let Some(writes) = keys.get_mut(key) else {
            return false;
        };
        writes.expire(Instant::now());
        let echo = if let Some(i) = writes
            .unseen
            .iter()
            .position(|w| w.replaced == old && w.written == new)
        {
            writes.unseen.remove(i);
            true
        } else if writes.in_flight.iter().any(|base| base == old) {
            writes.held.push((old.to_owned(), new.to_owned()));
            true
        } else {
            // The cache holds `new` now: only a write that replaced it can
            // still show up.
            writes.unseen.retain(|w| w.replaced == new);
            false
        };
        if writes.is_empty() {
            keys.remove(key);
        }
        echo
    }

    /// True when the cache's copy of `key`'s object, at version `cached`, is
    /// one a write of ours replaced less than [`STALE_CACHE_WINDOW`] ago and
    /// the watch has not shown the write yet.
    pub(crate) fn is_stale(&self, key: &ObjectKey, cached: Option<&str>) -> bool {
        let mut keys = self.shared.keys.lock();
        let Some(writes) = keys.get_mut(key) else {
            return false;
        };
        writes.expire(Instant::now());
        let stale = cached.is_some_and(|v| writes.unseen.iter().any(|w| w.replaced == v));
        if writes.is_empty() {
            keys.remove(key);
        }
        stale
    }

    /// Drops what is remembered of `key`, whose object is gone.
    pub(crate) fn forget(&self, key: &ObjectKey) {
        self.shared.keys.lock().remove(key);
    }

    /// Drops what is remembered of the keys of a bucket this replica no
    /// longer leads (and so no longer writes).
    pub(crate) fn forget_bucket(&self, bucket: &dyn Bucket) {
        self.shared.keys.lock().retain(|key, _| !bucket.has(key));
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.shared.keys.lock().len()
    }

    /// Ends a write from `base`: it wrote `written`, or failed (`None`).
    fn end(&self, key: &ObjectKey, base: &str, written: Option<&str>) {
        let others: Vec<(String, String)> = {
            let mut keys = self.shared.keys.lock();
            let Some(writes) = keys.get_mut(key) else {
                return;
            };
            if let Some(i) = writes.in_flight.iter().position(|b| b == base) {
                writes.in_flight.remove(i);
            }
            let (from_base, rest): (Vec<_>, Vec<_>) = writes.held.drain(..).partition(|(old, _)| old == base);
            writes.held = rest;
            let mut seen = false;
            let mut others = Vec::new();
            for (old, new) in from_base {
                if written == Some(new.as_str()) {
                    seen = true;
                } else {
                    others.push((old, new));
                }
            }
            if let Some(written) = written.filter(|w| !seen && *w != base) {
                if writes.unseen.len() == WRITES_KEPT {
                    writes.unseen.remove(0);
                }
                writes.unseen.push(Written {
                    replaced: base.to_owned(),
                    written: written.to_owned(),
                    at: Instant::now(),
                });
            }
            if writes.is_empty() {
                keys.remove(key);
            }
            others
        };
        // Outside the lock: the callback queues the key.
        if !others.is_empty() {
            (self.shared.enqueue)(key.clone());
        }
    }
}

impl InFlight {
    /// The write succeeded and the object is now at version `written`.
    pub(crate) fn done(mut self, written: Option<&str>) {
        self.written = Some(written.unwrap_or_default().to_owned());
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let written = self.written.as_deref().filter(|w| !w.is_empty());
        self.writes.end(&self.key, &self.base, written);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ObjectKey {
        ObjectKey::new("ns", name)
    }

    fn own_writes() -> (OwnWrites, Arc<Mutex<Vec<ObjectKey>>>) {
        let queued = Arc::new(Mutex::new(Vec::new()));
        let q = queued.clone();
        (OwnWrites::new(move |k| q.lock().push(k)), queued)
    }

    fn write(writes: &OwnWrites, name: &str, from: &str, to: &str) {
        writes
            .begin(&key(name), Some(from))
            .expect("a version")
            .done(Some(to));
    }

    #[tokio::test(start_paused = true)]
    async fn the_update_a_write_caused_is_an_echo_once() {
        let (writes, queued) = own_writes();
        write(&writes, "a", "1", "2");
        assert!(!writes.is_echo(&key("b"), Some("1"), Some("2")), "another key");
        assert!(
            !writes.is_echo(&key("a"), Some("1"), Some("3")),
            "another version"
        );
        write(&writes, "a", "3", "4");
        assert!(writes.is_echo(&key("a"), Some("3"), Some("4")));
        assert!(!writes.is_echo(&key("a"), Some("3"), Some("4")), "seen once");
        assert_eq!(writes.len(), 0, "nothing left once seen");
        assert!(queued.lock().is_empty());
    }

    /// The update may come before the answer to the write: held until then,
    /// it is the write's when the write wrote that version, and is queued
    /// when the write failed or wrote another.
    #[tokio::test(start_paused = true)]
    async fn an_update_before_the_answer_waits_for_it() {
        let (writes, queued) = own_writes();
        let in_flight = writes.begin(&key("a"), Some("1")).unwrap();
        assert!(writes.is_echo(&key("a"), Some("1"), Some("2")));
        in_flight.done(Some("2"));
        assert!(queued.lock().is_empty());
        assert_eq!(writes.len(), 0);

        let in_flight = writes.begin(&key("a"), Some("2")).unwrap();
        assert!(writes.is_echo(&key("a"), Some("2"), Some("3")));
        drop(in_flight); // a 409: version 3 was another writer's
        assert_eq!(*queued.lock(), [key("a")]);
        queued.lock().clear();

        let in_flight = writes.begin(&key("a"), Some("3")).unwrap();
        assert!(writes.is_echo(&key("a"), Some("3"), Some("4")));
        in_flight.done(Some("5"));
        assert_eq!(*queued.lock(), [key("a")], "4 was not the write's");
    }

    /// A finalizer patch then a status write: the cache is stale at either
    /// replaced version until the watch shows each write, and trusted again
    /// after the window.
    #[tokio::test(start_paused = true)]
    async fn a_cache_holding_a_replaced_version_is_stale() {
        let (writes, _) = own_writes();
        let a = key("a");
        write(&writes, "a", "1", "2");
        write(&writes, "a", "2", "3");
        assert!(writes.is_stale(&a, Some("1")));
        assert!(writes.is_stale(&a, Some("2")));
        assert!(!writes.is_stale(&a, Some("3")));
        assert!(writes.is_echo(&a, Some("1"), Some("2")));
        assert!(!writes.is_stale(&a, Some("1")), "shown");
        assert!(writes.is_stale(&a, Some("2")));

        tokio::time::advance(STALE_CACHE_WINDOW).await;
        assert!(!writes.is_stale(&a, Some("2")), "trusted after the window");
        assert!(!writes.is_echo(&a, Some("2"), Some("3")), "too late to tell");
        assert_eq!(writes.len(), 0);

        // A long run of writes keeps the most recent few.
        for v in 10..20 {
            write(&writes, "a", &v.to_string(), &(v + 1).to_string());
        }
        assert!(writes.is_stale(&a, Some("19")));
        assert!(writes.is_stale(&a, Some("16")));
        assert!(!writes.is_stale(&a, Some("15")));
    }

    /// A list that skipped a write's update (the watch expired) leaves the
    /// cache at a later version: what it replaced can no longer show up.
    #[tokio::test(start_paused = true)]
    async fn an_update_past_the_writes_forgets_them() {
        let (writes, queued) = own_writes();
        write(&writes, "a", "1", "2");
        write(&writes, "a", "2", "3");
        assert!(!writes.is_echo(&key("a"), Some("1"), Some("3")));
        assert_eq!(writes.len(), 0);

        // An update to the version a write replaced keeps that write.
        write(&writes, "a", "5", "6");
        assert!(!writes.is_echo(&key("a"), Some("3"), Some("5")));
        assert!(writes.is_echo(&key("a"), Some("5"), Some("6")));
        assert!(queued.lock().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn writes_that_change_nothing_or_have_no_version_are_not_remembered() {
        let (writes, _) = own_writes();
        write(&writes, "a", "1", "1");
        assert!(writes.begin(&key("a"), None).is_none());
        assert!(writes.begin(&key("a"), Some("")).is_none());
        assert_eq!(writes.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_gone_object_or_a_demoted_bucket_is_forgotten() {
        #[derive(Debug)]
        struct Named(&'static str);
        impl Bucket for Named {
            fn name(&self) -> &str {
                self.0
            }
            fn has(&self, key: &ObjectKey) -> bool {
                key.name == self.0
            }
        }
        let (writes, _) = own_writes();
        for name in ["a", "b", "c"] {
            write(&writes, name, "1", "2");
        }
        writes.forget_bucket(&Named("a"));
        writes.forget(&key("c"));
        assert_eq!(writes.len(), 1);
        assert!(writes.is_stale(&key("b"), Some("1")));
        assert!(!writes.is_stale(&key("a"), Some("1")));
    }
}
