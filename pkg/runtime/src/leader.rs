//! Leader awareness: which keys this replica may write.
//!
//! Knative splits each reconciler's keys into buckets; a replica writes the keys
//! of the buckets it leads and only observes the rest. Leader election
//! promotes and demotes buckets; the reconciler asks
//! [`LeaderAwareFuncs::is_leader_for`] before every write.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use parking_lot::RwLock;

use crate::key::ObjectKey;

/// A set of keys led together.
pub trait Bucket: Send + Sync + fmt::Debug {
    /// The bucket's name (its lease name, for elected buckets).
    fn name(&self) -> &str;
    /// True when `key` belongs to this bucket.
    fn has(&self, key: &ObjectKey) -> bool;
}

/// The bucket holding every key: what a replica leads when it runs alone
/// (`--disable-ha`) and what tests promote.
#[derive(Clone, Copy, Debug, Default)]
pub struct UniversalBucket;

impl Bucket for UniversalBucket {
    fn name(&self) -> &str {
        ""
    }
    fn has(&self, _: &ObjectKey) -> bool {
        true
    }
}

/// Called with each key of a newly led bucket, to reconcile what may have
/// changed while another replica led it.
pub type Enqueue = Arc<dyn Fn(&dyn Bucket, ObjectKey) + Send + Sync>;

/// Called after a bucket is promoted, with the enqueue function.
pub type PromoteHook = Arc<dyn Fn(&dyn Bucket, Option<&Enqueue>) + Send + Sync>;

/// Called when a bucket's leadership changes; must not block.
pub type BucketHook = Arc<dyn Fn(&dyn Bucket) + Send + Sync>;

/// Something leader election can promote and demote buckets on.
pub trait LeaderAware: Send + Sync + fmt::Debug {
    /// This replica now leads `bucket`; `enqueue`, when given, re-enqueues its
    /// keys.
    fn promote(&self, bucket: Arc<dyn Bucket>, enqueue: Option<Enqueue>);
    /// This replica no longer leads `bucket`.
    fn demote(&self, bucket: &dyn Bucket);
    /// True when a led bucket holds `key`.
    fn is_leader_for(&self, key: &ObjectKey) -> bool;
}

/// The buckets a reconciler leads, with hooks run on promotion and demotion
/// (Knative's `LeaderAwareFuncs`).
#[derive(Default)]
pub struct LeaderAwareFuncs {
    buckets: RwLock<BTreeMap<String, Arc<dyn Bucket>>>,
    on_promote: Option<PromoteHook>,
    on_demote: Option<BucketHook>,
}

impl fmt::Debug for LeaderAwareFuncs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaderAwareFuncs")
            .field("buckets", &self.buckets.read().keys())
            .finish()
    }
}

impl LeaderAwareFuncs {
    /// Leads nothing until promoted; runs `on_promote` after each promotion
    /// (with the enqueue function when the promotion brings one; a replica
    /// leading alone and table tests promote without), and `on_demote` after
    /// each demotion.
    pub fn new(on_promote: Option<PromoteHook>, on_demote: Option<BucketHook>) -> Self {
        LeaderAwareFuncs {
            buckets: RwLock::new(BTreeMap::new()),
            on_promote,
            on_demote,
        }
    }

    /// For a reconciler of one object: enqueues `key` after each promotion
    /// that brings an enqueue function, and does nothing on demotion.
    pub fn enqueuing_on_promote(key: ObjectKey) -> Self {
        let on_promote: PromoteHook = Arc::new(move |bucket: &dyn Bucket, enqueue: Option<&Enqueue>| {
            if let Some(enqueue) = enqueue {
                enqueue(bucket, key.clone());
            }
        });
        Self::new(Some(on_promote), None)
    }

    /// The names of the led buckets.
    pub fn led_buckets(&self) -> Vec<String> {
        self.buckets.read().keys().cloned().collect()
    }
}

impl LeaderAware for LeaderAwareFuncs {
    fn promote(&self, bucket: Arc<dyn Bucket>, enqueue: Option<Enqueue>) {
        self.buckets
            .write()
            .insert(bucket.name().to_owned(), bucket.clone());
        if let Some(hook) = &self.on_promote {
            hook(bucket.as_ref(), enqueue.as_ref());
        }
    }

    fn demote(&self, bucket: &dyn Bucket) {
        self.buckets.write().remove(bucket.name());
        if let Some(hook) = &self.on_demote {
            hook(bucket);
        }
    }

    fn is_leader_for(&self, key: &ObjectKey) -> bool {
        self.buckets.read().values().any(|b| b.has(key))
    }
}

#[cfg(test)]
mod tests {
    use parking_lot::Mutex;

    use super::*;

    #[derive(Debug)]
    struct Only(&'static str);

    impl Bucket for Only {
        fn name(&self) -> &str {
            self.0
        }
        fn has(&self, key: &ObjectKey) -> bool {
            key.name == self.0
        }
    }

    #[test]
    fn leads_only_promoted_buckets() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (p, d) = (seen.clone(), seen.clone());
        let la = LeaderAwareFuncs::new(
            Some(Arc::new(move |b: &dyn Bucket, enqueue: Option<&Enqueue>| {
                let how = if enqueue.is_some() {
                    "re-enqueuing"
                } else {
                    "alone"
                };
                p.lock().push(format!("promote {} {how}", b.name()))
            })),
            Some(Arc::new(move |b: &dyn Bucket| {
                d.lock().push(format!("demote {}", b.name()))
            })),
        );
        let key = ObjectKey::new("ns", "a");
        assert!(!la.is_leader_for(&key));
        la.promote(Arc::new(Only("a")), Some(Arc::new(|_: &dyn Bucket, _| {})));
        assert!(la.is_leader_for(&key));
        assert!(!la.is_leader_for(&ObjectKey::new("ns", "b")));
        la.promote(Arc::new(Only("b")), None);
        la.demote(&Only("a"));
        assert!(!la.is_leader_for(&key));
        assert_eq!(la.led_buckets(), ["b"]);
        assert_eq!(
            *seen.lock(),
            ["promote a re-enqueuing", "promote b alone", "demote a"],
            "the hook runs for every promotion, with or without an enqueue function"
        );
        la.promote(Arc::new(UniversalBucket), None);
        assert!(la.is_leader_for(&key));
    }
}
