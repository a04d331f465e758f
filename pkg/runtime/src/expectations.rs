//! What a reconcile is still waiting to see in the cache: client-go's
//! `ControllerExpectations`, which its ReplicaSet and Job controllers use.
//!
//! A reconciler that creates 500 pods and is reconciled again a moment later
//! reads a pod lister that may not have seen them yet; counting from it would
//! create them all again. So before writing, it records how many creates and
//! deletes it expects for the owner's key; the owned kind's informer handler
//! lowers the count as each one arrives; and the next reconcile scales only
//! once the count is down to zero. A create that fails is lowered at once
//! (it will never be observed). Expectations older than [`EXPECTATIONS_TTL`]
//! are ignored, so a lost watch event delays a reconcile, it never blocks it.
//!
//! ```
//! use kinject_runtime::expectations::Expectations;
//! use kinject_runtime::key::ObjectKey;
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let expectations = Expectations::new();
//! let key = ObjectKey::new("ns", "sd");
//! expectations.expect(&key, 2, 0);
//! assert!(!expectations.satisfied(&key));
//! expectations.creation_observed(&key); // the pod informer's add handler
//! expectations.creation_observed(&key);
//! assert!(expectations.satisfied(&key));
//! # }
//! ```

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use crate::informer::EventHandler;
use crate::key::ObjectKey;

/// How long expectations hold before they are ignored (client-go's
/// `ExpectationsTimeout`).
pub const EXPECTATIONS_TTL: Duration = Duration::from_secs(5 * 60);

#[derive(Debug)]
struct Expected {
    creates: u64,
    deletes: u64,
    since: Instant,
}

/// Creates and deletes each key's reconcile has made and the cache has not
/// shown yet. Share one between a reconciler and the handler of the kind it
/// creates (it is cheap to put behind an `Arc`).
#[derive(Debug)]
pub struct Expectations {
    ttl: Duration,
    pending: Mutex<HashMap<ObjectKey, Expected>>,
}

impl Default for Expectations {
    fn default() -> Self {
        Self::new()
    }
}

impl Expectations {
    /// No expectations, held for [`EXPECTATIONS_TTL`].
    pub fn new() -> Self {
        Self::with_ttl(EXPECTATIONS_TTL)
    }

    /// No expectations, held for `ttl`.
    pub fn with_ttl(ttl: Duration) -> Self {
        Expectations {
            ttl,
            pending: Mutex::new(HashMap::new()),
        }
    }

    /// True when `key` waits for nothing: no expectations, all observed, or
    /// set longer than the TTL ago (then they are dropped).
    pub fn satisfied(&self, key: &ObjectKey) -> bool {
        self.remaining(key).is_none()
    }

    /// How long `key` may still wait before its expectations are ignored;
    /// `None` when it waits for nothing (expectations all observed, or
    /// expired, are dropped here).
    pub fn remaining(&self, key: &ObjectKey) -> Option<Duration> {
        let mut pending = self.pending.lock();
        let expected = pending.get(key)?;
        let left = self.ttl.saturating_sub(expected.since.elapsed());
        if expected.creates > 0 || expected.deletes > 0 {
            if !left.is_zero() {
                return Some(left);
            }
            tracing::warn!(key = %key, creates = expected.creates, deletes = expected.deletes,
                "expected creates and deletes were not observed in time; reconciling from the cache as it is");
        }
        pending.remove(key);
        None
    }

    /// Records that a reconcile of `key` is about to make `creates` creates
    /// and `deletes` deletes; replaces what was expected before.
    pub fn expect(&self, key: &ObjectKey, creates: u64, deletes: u64) {
        if creates == 0 && deletes == 0 {
            self.pending.lock().remove(key);
            return;
        }
        self.pending.lock().insert(
            key.clone(),
            Expected {
                creates,
                deletes,
                since: Instant::now(),
            },
        );
    }

    /// Lowers the expectations of `key` by writes that will never be observed
    /// (they failed, or were never sent).
    pub fn lower(&self, key: &ObjectKey, creates: u64, deletes: u64) {
        if let Some(expected) = self.pending.lock().get_mut(key) {
            expected.creates = expected.creates.saturating_sub(creates);
            expected.deletes = expected.deletes.saturating_sub(deletes);
        }
    }

    /// An object `key` created has appeared in the cache.
    pub fn creation_observed(&self, key: &ObjectKey) {
        self.lower(key, 1, 0);
    }

    /// An object `key` deleted has left the cache.
    pub fn deletion_observed(&self, key: &ObjectKey) {
        self.lower(key, 0, 1);
    }

    /// Drops the expectations of `key` (its object was deleted).
    pub fn forget(&self, key: &ObjectKey) {
        self.pending.lock().remove(key);
    }

    /// An add of an object `owner_key` maps to an owner counts as an
    /// observed create of that owner's, a delete as an observed delete;
    /// `then` still runs (to enqueue the owner). For the handler of the kind
    /// a controller creates.
    pub fn counting<C>(
        self: &Arc<Self>,
        handler: EventHandler<C>,
        owner_key: impl Fn(&C) -> Option<ObjectKey> + Clone + Send + Sync + 'static,
        then: impl Fn(ObjectKey) + Clone + Send + Sync + 'static,
    ) -> EventHandler<C>
    where
        C: 'static,
    {
        let (created, deleted) = (self.clone(), self.clone());
        let (add_key, delete_key) = (owner_key.clone(), owner_key);
        let (after_add, after_delete) = (then.clone(), then);
        handler
            .on_add(move |obj: &C| {
                if let Some(key) = add_key(obj) {
                    created.creation_observed(&key);
                    after_add(key);
                }
            })
            .on_delete(move |obj: &C| {
                if let Some(key) = delete_key(obj) {
                    deleted.deletion_observed(&key);
                    after_delete(key);
                }
            })
    }

    /// How many keys have expectations; for tests and leak checks.
    pub fn len(&self) -> usize {
        self.pending.lock().len()
    }

    /// True when no key has expectations.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> ObjectKey {
        ObjectKey::new("ns", "sd")
    }

    #[tokio::test(start_paused = true)]
    async fn satisfied_once_every_write_is_observed() {
        let e = Expectations::new();
        assert!(e.satisfied(&key()), "nothing expected");
        e.expect(&key(), 2, 1);
        e.creation_observed(&key());
        e.deletion_observed(&key());
        assert!(!e.satisfied(&key()), "one create still to come");
        e.creation_observed(&key());
        assert!(e.satisfied(&key()));
        assert!(e.is_empty(), "a satisfied key is dropped");
    }

    #[tokio::test(start_paused = true)]
    async fn writes_that_failed_are_lowered() {
        let e = Expectations::new();
        e.expect(&key(), 4, 0);
        e.creation_observed(&key());
        e.lower(&key(), 3, 0);
        assert!(e.satisfied(&key()));
    }

    #[tokio::test(start_paused = true)]
    async fn expectations_expire_after_the_ttl() {
        let e = Expectations::with_ttl(Duration::from_secs(60));
        e.expect(&key(), 1, 0);
        tokio::time::advance(Duration::from_secs(59)).await;
        assert!(!e.satisfied(&key()));
        assert_eq!(e.remaining(&key()), Some(Duration::from_secs(1)));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(e.satisfied(&key()), "a lost event delays, never blocks");
        assert!(e.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn observations_without_expectations_change_nothing() {
        let e = Expectations::new();
        e.creation_observed(&key());
        e.deletion_observed(&key());
        assert!(e.is_empty(), "an informer's initial adds leave no entries");
        e.expect(&key(), 1, 0);
        e.forget(&key());
        assert!(e.satisfied(&key()));
    }
}
