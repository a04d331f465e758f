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
    /// About how much memory the event keeps alive ([`approximate_bytes`] of
    /// its object): what the byte bound of the history counts.
    pub(crate) bytes: usize,
}

/// About how many bytes `value` takes in memory: its strings and a node's
/// worth per value. Cheap next to the write that made it, and within a
/// small factor of the heap it holds, which is all a bound needs.
pub(crate) fn approximate_bytes(value: &Value) -> usize {
    const NODE: usize = 32;
    match value {
        Value::String(s) => NODE + s.len(),
        Value::Array(items) => NODE + items.iter().map(approximate_bytes).sum::<usize>(),
        Value::Object(fields) => {
            NODE + fields
                .iter()
                .map(|(k, v)| NODE + k.len() + approximate_bytes(v))
                .sum::<usize>()
        }
        _ => NODE,
    }
}

/// The requested revision has been compacted away.
#[derive(Debug)]
pub(crate) struct Compacted {
    /// The oldest revision still readable.
    pub(crate) oldest: u64,
}

/// The events of one resource a watch can start from, like the watch cache kube-apiserver
/// keeps per resource: it starts empty at the revision the resource began to be served
/// (the server's start for built-ins) and keeps the latest `history_limit` events.
#[derive(Debug)]
struct Window {
    /// The revision the window starts after (the watch cache's initial list).
    list_rv: u64,
    events: VecDeque<Arc<StoredEvent>>,
    /// The revision of the newest event dropped since `list_rv`, if any.
    trimmed_through: Option<u64>,
    /// The resource is no longer served; the events stay for watches still sending them.
    closed: bool,
}

impl Window {
    fn new(list_rv: u64) -> Self {
        Self {
            list_rv,
            events: VecDeque::new(),
            trimmed_through: None,
            closed: false,
        }
    }

    /// The oldest revision a watch can receive, computed as the watch cache does. A
    /// window emptied by the byte bound (other resources' events took the room) can
    /// deliver anything after the last event it dropped.
    fn oldest(&self) -> u64 {
        match (self.events.front(), self.trimmed_through) {
            (Some(first), Some(_)) => first.rv,
            (None, Some(dropped)) => dropped + 1,
            (_, None) => self.list_rv + 1,
        }
    }
}

/// A watch asked for a revision older than its resource's window.
#[derive(Debug)]
pub(crate) struct TooOld {
    /// The revision the watch cache names in its message (`too old resource version: X (Y)`).
    pub(crate) oldest_listed: u64,
}

#[derive(Debug)]
pub(crate) struct Store {
    rv: u64,
    objects: HashMap<ResKey, BTreeMap<ObjKey, Arc<Value>>>,
    history: VecDeque<Arc<StoredEvent>>,
    history_limit: usize,
    /// The [`StoredEvent::bytes`] of the events `history` and the windows keep
    /// alive, each counted once.
    held_bytes: usize,
    /// The most bytes of events the history and the windows keep together.
    history_bytes_limit: usize,
    windows: HashMap<ResKey, Window>,
    /// The revision the server started at: where the windows of built-ins begin.
    start_rv: u64,
    /// Every revision up to and including this one has left the history.
    compacted: u64,
    notify: tokio::sync::watch::Sender<u64>,
}

impl Store {
    pub(crate) fn new(history_limit: usize, history_bytes_limit: usize) -> Self {
        let (notify, _) = tokio::sync::watch::channel(0);
        Self {
            rv: 0,
            objects: HashMap::new(),
            history: VecDeque::new(),
            history_limit: history_limit.max(1),
            held_bytes: 0,
            history_bytes_limit,
            windows: HashMap::new(),
            start_rv: 0,
            compacted: 0,
            notify,
        }
    }

    pub(crate) fn rv(&self) -> u64 {
        self.rv
    }

    /// The [`StoredEvent::bytes`] the history and the watch windows keep alive.
    pub(crate) fn history_bytes(&self) -> usize {
        self.held_bytes
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
            bytes: approximate_bytes(&obj),
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
            bytes: approximate_bytes(&last),
            object: Arc::clone(&last),
            prev: Some(prev),
        });
        Some(last)
    }

    /// Drops a whole resource without events (a CRD's storage going away is reported by
    /// the CRD's own deletion; instances are deleted one by one before that).
    pub(crate) fn drop_resource(&mut self, res: &ResKey) {
        self.objects.remove(res);
        if let Some(w) = self.windows.get_mut(res) {
            w.closed = true;
        }
    }

    fn record(&mut self, ev: StoredEvent) {
        // A request that wrote must not be run again for a conversion.
        crate::conversion::note_stored();
        let ev = Arc::new(ev);
        let res = ev.res.clone();
        let start = self.start_rv;
        self.held_bytes += ev.bytes;
        let window = self
            .windows
            .entry(res.clone())
            .or_insert_with(|| Window::new(start));
        window.events.push_back(Arc::clone(&ev));
        let window_full = window.events.len() > self.history_limit;
        self.history.push_back(ev);
        // By count, as kube-apiserver's watch cache is bounded by its capacity and
        // etcd's history by compaction: a watch from before the oldest kept event
        // gets 410 Expired.
        if window_full {
            self.pop_window(&res);
        }
        while self.history.len() > self.history_limit {
            self.pop_history();
        }
        // By bytes, over the history and every window together: each window on
        // its own could keep a full budget of its resource's events. The
        // newest always stays.
        while self.held_bytes > self.history_bytes_limit && self.drop_oldest() {}
        self.notify.send_replace(self.rv);
    }

    /// Whether `ev` is still in the history, which holds every revision after
    /// the last one it dropped.
    fn in_history(&self, ev: &StoredEvent) -> bool {
        self.history.front().is_some_and(|first| first.rv <= ev.rv)
    }

    /// Whether `ev` is still in its resource's window, which holds every event
    /// of the resource from its first on.
    fn in_window(&self, ev: &StoredEvent) -> bool {
        self.windows
            .get(&ev.res)
            .and_then(|w| w.events.front())
            .is_some_and(|first| first.rv <= ev.rv)
    }

    /// Drops the oldest event of `res`'s window.
    fn pop_window(&mut self, res: &ResKey) {
        let Some(window) = self.windows.get_mut(res) else {
            return;
        };
        let Some(old) = window.events.pop_front() else {
            return;
        };
        window.trimmed_through = Some(old.rv);
        if !self.in_history(&old) {
            self.held_bytes -= old.bytes;
        }
    }

    /// Drops the oldest event of the history.
    fn pop_history(&mut self) {
        let Some(old) = self.history.pop_front() else {
            return;
        };
        self.compacted = old.rv;
        if !self.in_window(&old) {
            self.held_bytes -= old.bytes;
        }
    }

    /// Drops the oldest event kept anywhere, from the history and its window
    /// both, so its memory goes; `false` when only the newest is left.
    fn drop_oldest(&mut self) -> bool {
        let oldest_window = self
            .windows
            .iter()
            .filter_map(|(res, w)| w.events.front().map(|first| (first.rv, res)))
            .min_by_key(|(rv, _)| *rv)
            .map(|(rv, res)| (rv, res.clone()));
        let oldest_history = self.history.front().map(|first| first.rv);
        let oldest = match (oldest_history, &oldest_window) {
            (Some(h), Some((w, _))) => h.min(*w),
            (Some(h), None) => h,
            (None, Some((w, _))) => *w,
            (None, None) => return false,
        };
        if oldest >= self.rv {
            return false;
        }
        if let Some((rv, res)) = oldest_window
            && rv == oldest
        {
            self.pop_window(&res);
        }
        if oldest_history == Some(oldest) {
            self.pop_history();
        }
        true
    }

    /// Forgets a window's events, counting those the history does not keep.
    fn forget_window(&mut self, window: &Window) {
        for ev in &window.events {
            if !self.in_history(ev) {
                self.held_bytes -= ev.bytes;
            }
        }
    }

    /// Marks the server as started: watches cannot go back before this revision, as a
    /// freshly started kube-apiserver's watch cache begins at etcd's current revision.
    pub(crate) fn start(&mut self) {
        self.start_rv = self.rv;
        for (_, window) in std::mem::take(&mut self.windows) {
            self.forget_window(&window);
        }
    }

    /// Starts the window of a resource that begins to be served now (a CRD's), unless
    /// it is already served.
    pub(crate) fn open_window(&mut self, res: &ResKey) {
        let rv = self.rv;
        let window = self.windows.entry(res.clone()).or_insert_with(|| Window::new(rv));
        if window.closed {
            let old = std::mem::replace(window, Window::new(rv));
            self.forget_window(&old);
        }
    }

    /// Forgets all history: every older revision becomes unreadable (like an etcd
    /// compaction followed by a restart of every watch cache).
    pub(crate) fn compact(&mut self) {
        self.history.clear();
        self.held_bytes = 0;
        self.compacted = self.rv;
        self.start_rv = self.rv;
        for w in self.windows.values_mut() {
            *w = Window::new(self.rv);
        }
    }

    /// Whether a watch of `res` can start after revision `after`.
    pub(crate) fn watch_window_check(&self, res: &ResKey, after: u64) -> Result<(), TooOld> {
        let oldest = self.windows.get(res).map_or(self.start_rv + 1, Window::oldest);
        // The watch cache's rule: a watch may start at the revision just before the
        // oldest event it can deliver, not earlier.
        let oldest_listed = oldest.saturating_sub(1);
        if after < oldest_listed {
            return Err(TooOld { oldest_listed });
        }
        Ok(())
    }

    /// The events of `res` after revision `after`, from the resource's window, or
    /// `TooOld` when the window no longer reaches back that far.
    pub(crate) fn watch_events_after(
        &self,
        res: &ResKey,
        after: u64,
    ) -> Result<Vec<Arc<StoredEvent>>, TooOld> {
        self.watch_window_check(res, after)?;
        let Some(window) = self.windows.get(res) else {
            return Ok(Vec::new());
        };
        let first = window.events.partition_point(|e| e.rv <= after);
        Ok(window.events.range(first..).cloned().collect())
    }

    /// The objects of `res` as they were at revision `at` (current state when `at` is the
    /// latest revision), in key order.
    pub(crate) fn snapshot(&self, res: &ResKey, at: u64) -> Result<Vec<(ObjKey, Arc<Value>)>, Compacted> {
        Ok(self
            .snapshot_from(res, at, None)?
            .map(|(k, v)| (k.clone(), v))
            .collect())
    }

    /// The objects of `res` as they were at revision `at`, in key order, from
    /// the first whose key (as etcd orders it: `<namespace>/<name>`, or
    /// `<name>`) is at least `from`. Lazy, and as cheap as the items taken
    /// plus the writes to `res` since `at`: a page of a list costs its own
    /// items, not the whole collection, as an etcd range read does.
    pub(crate) fn snapshot_from<'a>(
        &'a self,
        res: &ResKey,
        at: u64,
        from: Option<&str>,
    ) -> Result<impl Iterator<Item = (&'a ObjKey, Arc<Value>)> + 'a, Compacted> {
        use std::ops::Bound::{Included, Unbounded};
        // A key with no namespace orders by its name's bytes alone, so it
        // stands for any position in etcd's order.
        let bound = from.map_or(Unbounded, |from| Included(ObjKey::new("", from)));
        // The oldest write after `at` to each key tells what that key held at `at`.
        let mut then: BTreeMap<&'a ObjKey, Option<&'a Arc<Value>>> = BTreeMap::new();
        if at < self.rv {
            if at < self.compacted {
                return Err(Compacted {
                    oldest: self.compacted + 1,
                });
            }
            let start = self.history.partition_point(|e| e.rv <= at);
            for ev in self.history.range(start..).filter(|e| &e.res == res) {
                then.entry(&ev.key).or_insert(ev.prev.as_ref());
            }
        }
        let then: Vec<(&'a ObjKey, Option<&'a Arc<Value>>)> = match &bound {
            Included(b) => then.into_iter().filter(|(k, _)| *k >= b).collect(),
            _ => then.into_iter().collect(),
        };
        let now = self
            .objects
            .get(res)
            .into_iter()
            .flat_map(move |objs| objs.range((bound.clone(), Unbounded)));
        Ok(Merged {
            now: now.peekable(),
            then: then.into_iter().peekable(),
        })
    }
}

/// The current objects of a resource merged with what the keys written since
/// a revision held at that revision (`None`: absent then), in key order.
struct Merged<
    'a,
    N: Iterator<Item = (&'a ObjKey, &'a Arc<Value>)>,
    T: Iterator<Item = (&'a ObjKey, Option<&'a Arc<Value>>)>,
> {
    now: std::iter::Peekable<N>,
    then: std::iter::Peekable<T>,
}

impl<'a, N, T> Iterator for Merged<'a, N, T>
where
    N: Iterator<Item = (&'a ObjKey, &'a Arc<Value>)>,
    T: Iterator<Item = (&'a ObjKey, Option<&'a Arc<Value>>)>,
{
    type Item = (&'a ObjKey, Arc<Value>);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let order = match (self.now.peek(), self.then.peek()) {
                (None, None) => return None,
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (Some((n, _)), Some((t, _))) => n.cmp(t),
            };
            match order {
                std::cmp::Ordering::Less => return self.now.next().map(|(k, v)| (k, Arc::clone(v))),
                std::cmp::Ordering::Equal => {
                    self.now.next();
                }
                std::cmp::Ordering::Greater => {}
            }
            if let Some((k, Some(v))) = self.then.next() {
                return Some((k, Arc::clone(v)));
            }
        }
    }
}

fn set_rv(obj: &mut Value, rv: u64) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(name: &str, v: u64) -> Value {
        json!({"metadata": {"namespace": "a", "name": name}, "v": v})
    }

    fn names_and_values<'a>(page: impl Iterator<Item = (&'a ObjKey, Arc<Value>)>) -> Vec<(String, u64)> {
        page.map(|(k, v)| (k.name.clone(), v["v"].as_u64().unwrap_or_default()))
            .collect()
    }

    #[test]
    fn the_history_is_bounded_by_bytes_too() {
        let res = ResKey::new("", "configmaps");
        let big = |generation: u64| {
            let mut o = obj("big", generation);
            o["data"] = serde_json::json!({"blob": "x".repeat(100_000)});
            o
        };
        let one = approximate_bytes(&big(0));
        let mut store = Store::new(10_000, 3 * one + one / 2);
        store.put(&res, ObjKey::new("a", "big"), big(0));
        let first = store.rv();
        for generation in 1..10 {
            store.put(&res, ObjKey::new("a", "big"), big(generation));
        }
        assert_eq!(store.history.len(), 3, "three objects' worth of bytes");
        assert!(store.held_bytes <= 3 * one + one / 2);
        assert!(
            store.watch_window_check(&res, first).is_err(),
            "an early watch is too old"
        );
        assert!(
            store.snapshot(&res, first).is_err(),
            "an early continue token expired"
        );
        assert!(store.watch_window_check(&res, store.rv() - 1).is_ok());

        // One object larger than the bound still has its event.
        let mut tiny = Store::new(10_000, 10);
        tiny.put(&res, ObjKey::new("a", "big"), big(0));
        assert_eq!(tiny.history.len(), 1);
    }

    /// The bytes of the distinct events the history and the windows keep.
    fn distinct_bytes(store: &Store) -> usize {
        let mut held: BTreeMap<u64, usize> = BTreeMap::new();
        for ev in store
            .history
            .iter()
            .chain(store.windows.values().flat_map(|w| w.events.iter()))
        {
            held.insert(ev.rv, ev.bytes);
        }
        held.values().sum()
    }

    #[test]
    fn the_byte_bound_holds_over_every_window_together() {
        let big = |name: &str, generation: u64| {
            let mut o = obj(name, generation);
            o["data"] = serde_json::json!({"blob": "x".repeat(100_000)});
            o
        };
        let one = approximate_bytes(&big("big", 0));
        let limit = 3 * one + one / 2;
        let mut store = Store::new(10_000, limit);
        let (cms, secrets) = (ResKey::new("", "configmaps"), ResKey::new("", "secrets"));
        for generation in 0..5 {
            store.put(&cms, ObjKey::new("a", "big"), big("big", generation));
            assert_eq!(store.held_bytes, distinct_bytes(&store));
        }
        let last_cm = store.rv();
        for generation in 0..5 {
            store.put(&secrets, ObjKey::new("a", "big"), big("big", generation));
            assert_eq!(store.held_bytes, distinct_bytes(&store));
            assert!(store.held_bytes <= limit, "{} bytes held", store.held_bytes);
        }
        // The ConfigMaps' window gave its room to newer events: a watch that
        // would miss one of its events is too old, one after them all is not.
        assert!(store.watch_window_check(&cms, last_cm - 1).is_err());
        assert!(store.watch_window_check(&cms, last_cm).is_ok());
        assert!(
            store
                .watch_events_after(&cms, last_cm)
                .is_ok_and(|evs| evs.is_empty())
        );

        // The count bound trims a window on its own; the history still
        // holds what the window let go, and counts it once.
        let mut counted = Store::new(2, usize::MAX);
        for generation in 0..3 {
            counted.put(&cms, ObjKey::new("a", "small"), obj("small", generation));
        }
        counted.put(&secrets, ObjKey::new("a", "small"), obj("small", 0));
        assert_eq!(counted.held_bytes, distinct_bytes(&counted));
        counted.compact();
        assert_eq!(counted.held_bytes, 0);
    }

    #[test]
    fn a_page_takes_its_own_items_not_a_copy_of_the_collection() {
        let res = ResKey::new("", "configmaps");
        let mut store = Store::new(10_000, usize::MAX);
        for i in 0..1000 {
            store.put(
                &res,
                ObjKey::new("a", &format!("o{i:04}")),
                obj(&format!("o{i:04}"), 0),
            );
        }
        let shared = |store: &Store| -> usize { store.iter(&res).map(|(_, v)| Arc::strong_count(v)).sum() };
        let before = shared(&store);
        let page: Vec<_> = store
            .snapshot_from(&res, store.rv(), Some("a/o0500"))
            .unwrap()
            .take(10)
            .collect();
        assert_eq!(page.first().map(|(k, _)| k.name.as_str()), Some("o0500"));
        assert_eq!(shared(&store) - before, 10, "only the page's objects are held");
    }

    #[test]
    fn a_page_at_an_older_revision_shows_the_objects_as_they_were() {
        let res = ResKey::new("", "configmaps");
        let mut store = Store::new(10_000, usize::MAX);
        for name in ["o1", "o2", "o3", "o4"] {
            store.put(&res, ObjKey::new("a", name), obj(name, 0));
        }
        // Another namespace, sorting after `a/` ('b' > 'a'), stays out of a page of `a`.
        store.put(&res, ObjKey::new("b", "o0"), obj("o0", 0));
        let at = store.rv();
        store.put(&res, ObjKey::new("a", "o2"), obj("o2", 1));
        store.put(&res, ObjKey::new("a", "o2"), obj("o2", 2));
        store.remove(&res, &ObjKey::new("a", "o3"));
        store.put(&res, ObjKey::new("a", "o25"), obj("o25", 1));
        store.remove(&res, &ObjKey::new("a", "o1"));

        let then = names_and_values(store.snapshot_from(&res, at, Some("a/o2")).unwrap());
        assert_eq!(
            then,
            [
                ("o2".into(), 0),
                ("o3".into(), 0),
                ("o4".into(), 0),
                ("o0".into(), 0)
            ]
        );
        let now = names_and_values(store.snapshot_from(&res, store.rv(), Some("a/")).unwrap());
        assert_eq!(
            now,
            [
                ("o2".into(), 2),
                ("o25".into(), 1),
                ("o4".into(), 0),
                ("o0".into(), 0)
            ]
        );
        assert_eq!(store.snapshot(&res, at).unwrap().len(), 5);
    }
}
