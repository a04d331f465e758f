//! Object storage with one global, strictly increasing revision (like etcd's), a bounded
//! event history for watches, and reads "as of" an older revision for `continue` tokens
//! and `resourceVersionMatch=Exact`.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use serde_json::Value;

/// Storage identity of a resource: group and plural (versions share storage).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct ResKey {
    pub(crate) group: String,
    pub(crate) resource: String,
}

impl ResKey {
    pub(crate) fn new(group: &str, resource: &str) -> Self {
        Self {
            group: group.to_owned(),
            resource: resource.to_owned(),
        }
    }
}

/// Object identity inside a resource: namespace (empty when cluster-scoped) and name.
/// Ordering matches etcd's key order: the bytes of `<namespace>/<name>` (or `<name>`),
/// so namespace `a-b` sorts before `a` (`-` < `/`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ObjKey {
    pub(crate) namespace: String,
    pub(crate) name: String,
}

impl Ord for ObjKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.etcd_bytes().cmp(other.etcd_bytes())
    }
}

impl PartialOrd for ObjKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl ObjKey {
    /// The key's bytes below the resource's prefix, as etcd orders them.
    fn etcd_bytes(&self) -> impl Iterator<Item = u8> + '_ {
        let ns: &[u8] = if self.namespace.is_empty() { b"" } else { b"/" };
        self.namespace
            .bytes()
            .chain(ns.iter().copied())
            .chain(self.name.bytes())
    }

    /// The key below a list's prefix: `<name>` within one namespace (or for
    /// cluster-scoped objects), `<namespace>/<name>` across namespaces.
    pub(crate) fn below(&self, in_namespace: bool) -> String {
        if in_namespace || self.namespace.is_empty() {
            self.name.clone()
        } else {
            format!("{}/{}", self.namespace, self.name)
        }
    }

    pub(crate) fn new(namespace: &str, name: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One write, as a watch sees it.
#[derive(Debug)]
pub(crate) struct StoredEvent {
    pub(crate) rv: u64,
    pub(crate) res: ResKey,
    pub(crate) key: ObjKey,
    pub(crate) kind: EventType,
    /// The object after the write; for deletions its last state with the deletion revision.
    pub(crate) object: Arc<Value>,
    /// The object before the write (`None` for creations).
    pub(crate) prev: Option<Arc<Value>>,
}

/// The requested revision has been compacted away.
#[derive(Debug)]
pub(crate) struct Compacted {
    /// The oldest revision still readable.
    pub(crate) oldest: u64,
}

#[derive(Debug)]
pub(crate) struct Store {
    rv: u64,
    objects: HashMap<ResKey, BTreeMap<ObjKey, Arc<Value>>>,
    history: VecDeque<Arc<StoredEvent>>,
    history_limit: usize,
    /// Every revision up to and including this one has left the history.
    compacted: u64,
    notify: tokio::sync::watch::Sender<u64>,
}

impl Store {
    pub(crate) fn new(history_limit: usize) -> Self {
        let (notify, _) = tokio::sync::watch::channel(0);
        Self {
            rv: 0,
            objects: HashMap::new(),
            history: VecDeque::new(),
            history_limit: history_limit.max(1),
            compacted: 0,
            notify,
        }
    }

    pub(crate) fn rv(&self) -> u64 {
        self.rv
    }

    pub(crate) fn compacted(&self) -> u64 {
        self.compacted
    }

    pub(crate) fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.notify.subscribe()
    }

    pub(crate) fn get(&self, res: &ResKey, key: &ObjKey) -> Option<&Arc<Value>> {
        self.objects.get(res)?.get(key)
    }

    pub(crate) fn iter(&self, res: &ResKey) -> impl Iterator<Item = (&ObjKey, &Arc<Value>)> {
        self.objects.get(res).into_iter().flatten()
    }

    /// Writes an object with the next revision and records the event.
    pub(crate) fn put(&mut self, res: &ResKey, key: ObjKey, mut obj: Value) -> Arc<Value> {
        self.rv += 1;
        let rv = self.rv;
        set_rv(&mut obj, rv);
        let obj = Arc::new(obj);
        let prev = self
            .objects
            .entry(res.clone())
            .or_default()
            .insert(key.clone(), Arc::clone(&obj));
        let kind = if prev.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.record(StoredEvent {
            rv,
            res: res.clone(),
            key,
            kind,
            object: Arc::clone(&obj),
            prev,
        });
        obj
    }

    /// Removes an object; the deletion gets its own revision, which the returned last
    /// state carries (as an etcd watch reports it).
    pub(crate) fn remove(&mut self, res: &ResKey, key: &ObjKey) -> Option<Arc<Value>> {
        let prev = self.objects.get_mut(res)?.remove(key)?;
        self.rv += 1;
        let rv = self.rv;
        let mut last = (*prev).clone();
        set_rv(&mut last, rv);
        let last = Arc::new(last);
        self.record(StoredEvent {
            rv,
            res: res.clone(),
            key: key.clone(),
            kind: EventType::Deleted,
            object: Arc::clone(&last),
            prev: Some(prev),
        });
        Some(last)
    }

    /// Drops a whole resource without events (a CRD's storage going away is reported by
    /// the CRD's own deletion; instances are deleted one by one before that).
    pub(crate) fn drop_resource(&mut self, res: &ResKey) {
        self.objects.remove(res);
    }

    fn record(&mut self, ev: StoredEvent) {
        self.history.push_back(Arc::new(ev));
        while self.history.len() > self.history_limit {
            if let Some(old) = self.history.pop_front() {
                self.compacted = old.rv;
            }
        }
        self.notify.send_replace(self.rv);
    }

    /// Forgets all history: every older revision becomes unreadable (like an etcd compaction).
    pub(crate) fn compact(&mut self) {
        self.history.clear();
        self.compacted = self.rv;
    }

    /// Events with a revision greater than `after`, or `Compacted` if some are gone.
    pub(crate) fn events_after(&self, after: u64) -> Result<Vec<Arc<StoredEvent>>, Compacted> {
        if after < self.compacted {
            return Err(Compacted {
                oldest: self.compacted + 1,
            });
        }
        let start = self.history.partition_point(|e| e.rv <= after);
        Ok(self.history.range(start..).cloned().collect())
    }

    /// The objects of `res` as they were at revision `at` (current state when `at` is the
    /// latest revision), in key order.
    pub(crate) fn snapshot(&self, res: &ResKey, at: u64) -> Result<Vec<(ObjKey, Arc<Value>)>, Compacted> {
        let mut state: BTreeMap<ObjKey, Arc<Value>> = BTreeMap::new();
        let current = self.objects.get(res);
        if let Some(objs) = current {
            for (k, v) in objs {
                state.insert(k.clone(), Arc::clone(v));
            }
        }
        if at < self.rv {
            let later = self.events_after(at)?;
            // The oldest write after `at` to each key tells what that key held at `at`.
            let mut seen = std::collections::HashSet::new();
            for ev in later.iter().filter(|e| &e.res == res) {
                if !seen.insert(ev.key.clone()) {
                    continue;
                }
                match &ev.prev {
                    Some(prev) => {
                        state.insert(ev.key.clone(), Arc::clone(prev));
                    }
                    None => {
                        state.remove(&ev.key);
                    }
                }
            }
        }
        Ok(state.into_iter().collect())
    }
}

fn set_rv(obj: &mut Value, rv: u64) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}
