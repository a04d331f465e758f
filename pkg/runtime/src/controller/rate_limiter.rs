//! How long a failed key waits before its next attempt: client-go's rate limiters.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::key::ObjectKey;
use crate::token_bucket::TokenBucket;

/// Decides how long a key waits before it is retried
/// ([`WorkQueue::add_rate_limited`](super::WorkQueue::add_rate_limited)); the
/// trait of client-go's `TypedRateLimiter`. The implementations here use
/// tokio's clock, so tests can pause time.
///
/// The default, [`default_controller_rate_limiter`], is client-go's
/// `DefaultTypedControllerRateLimiter`: the larger of a per-key exponential
/// backoff (5 ms doubling to 1000 s) and a token bucket shared by all keys
/// (10 per second, bursts of 100), so one failing key backs off on its own and a
/// storm of failures cannot retry faster than the bucket allows.
///
/// ```
/// use std::time::Duration;
/// use kinject_runtime::controller::{ObjectKey, RateLimiter, ItemExponentialFailureRateLimiter};
///
/// let limiter = ItemExponentialFailureRateLimiter::new(Duration::from_millis(5), Duration::from_secs(1000));
/// let key = ObjectKey::new("ns", "name");
/// assert_eq!(limiter.when(&key), Duration::from_millis(5));
/// assert_eq!(limiter.when(&key), Duration::from_millis(10));
/// assert_eq!(limiter.num_requeues(&key), 2);
/// limiter.forget(&key);
/// assert_eq!(limiter.when(&key), Duration::from_millis(5));
/// ```
pub trait RateLimiter: Debug + Send + Sync + 'static {
    /// The delay before `key`'s next attempt; records the attempt.
    fn when(&self, key: &ObjectKey) -> Duration;

    /// Clears `key`'s history: it succeeded, or gave up for good.
    fn forget(&self, key: &ObjectKey);

    /// How many times `key` has been retried since it was last forgotten.
    fn num_requeues(&self, key: &ObjectKey) -> u32;
}

impl<R: RateLimiter + ?Sized> RateLimiter for Box<R> {
    fn when(&self, key: &ObjectKey) -> Duration {
        (**self).when(key)
    }

    fn forget(&self, key: &ObjectKey) {
        (**self).forget(key)
    }

    fn num_requeues(&self, key: &ObjectKey) -> u32 {
        (**self).num_requeues(key)
    }
}

/// client-go's `DefaultTypedControllerRateLimiter`: the larger of a per-key
/// exponential backoff from 5 ms to 1000 s and a global token bucket of 10 qps
/// with a burst of 100.
pub fn default_controller_rate_limiter() -> MaxOfRateLimiter {
    MaxOfRateLimiter::new(vec![
        Box::new(ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(5),
            Duration::from_secs(1000),
        )),
        Box::new(BucketRateLimiter::new(10.0, 100)),
    ])
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // The guarded maps stay consistent even if a holder panicked, so recover.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Per-key exponential backoff: `base * 2^failures`, capped at `max`.
#[derive(Debug)]
pub struct ItemExponentialFailureRateLimiter {
    base: Duration,
    max: Duration,
    failures: Mutex<HashMap<ObjectKey, u32>>,
}

impl ItemExponentialFailureRateLimiter {
    /// Backoff starting at `base` and doubling up to `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        ItemExponentialFailureRateLimiter {
            base,
            max,
            failures: Mutex::default(),
        }
    }
}

impl RateLimiter for ItemExponentialFailureRateLimiter {
    fn when(&self, key: &ObjectKey) -> Duration {
        let exp = {
            let mut failures = lock(&self.failures);
            let count = failures.entry(key.clone()).or_insert(0);
            let exp = *count;
            *count = count.saturating_add(1);
            exp
        };
        let backoff = self.base.as_secs_f64() * 2f64.powf(f64::from(exp));
        if !backoff.is_finite() || backoff >= self.max.as_secs_f64() {
            return self.max;
        }
        Duration::try_from_secs_f64(backoff).map_or(self.max, |d| d.min(self.max))
    }

    fn forget(&self, key: &ObjectKey) {
        lock(&self.failures).remove(key);
    }

    fn num_requeues(&self, key: &ObjectKey) -> u32 {
        lock(&self.failures).get(key).copied().unwrap_or(0)
    }
}

/// A token bucket shared by every key (client-go's `BucketRateLimiter`): each
/// call takes a token, and when none is left it reserves the next one and
/// returns how long until it is due. Tokens refill at `qps` per second up to
/// `burst`.
#[derive(Debug)]
pub struct BucketRateLimiter {
    bucket: TokenBucket,
}

impl BucketRateLimiter {
    /// A full bucket of `burst` tokens refilling at `qps` per second. A `qps` of
    /// infinity never delays; zero, a negative number or NaN allows the burst
    /// and then delays by [`BucketRateLimiter::NEVER`].
    pub fn new(qps: f64, burst: u32) -> Self {
        BucketRateLimiter {
            bucket: TokenBucket::new(qps, burst),
        }
    }

    /// The delay returned when the bucket can never refill (a `qps` of zero): a
    /// year, long enough to mean "not until something else enqueues the key".
    pub const NEVER: Duration = TokenBucket::NEVER;
}

impl RateLimiter for BucketRateLimiter {
    fn when(&self, _key: &ObjectKey) -> Duration {
        self.bucket.reserve()
    }

    fn forget(&self, _key: &ObjectKey) {}

    fn num_requeues(&self, _key: &ObjectKey) -> u32 {
        0
    }
}

/// The largest delay of several limiters; every limiter records every attempt.
#[derive(Debug)]
pub struct MaxOfRateLimiter {
    limiters: Vec<Box<dyn RateLimiter>>,
}

impl MaxOfRateLimiter {
    /// Combines `limiters`.
    pub fn new(limiters: Vec<Box<dyn RateLimiter>>) -> Self {
        MaxOfRateLimiter { limiters }
    }
}

impl RateLimiter for MaxOfRateLimiter {
    fn when(&self, key: &ObjectKey) -> Duration {
        self.limiters
            .iter()
            .map(|l| l.when(key))
            .max()
            .unwrap_or(Duration::ZERO)
    }

    fn forget(&self, key: &ObjectKey) {
        for l in &self.limiters {
            l.forget(key);
        }
    }

    fn num_requeues(&self, key: &ObjectKey) -> u32 {
        self.limiters
            .iter()
            .map(|l| l.num_requeues(key))
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ObjectKey {
        ObjectKey::new("ns", name)
    }

    #[test]
    fn exponential_doubles_per_key_and_caps() {
        let l = ItemExponentialFailureRateLimiter::new(Duration::from_millis(5), Duration::from_secs(1000));
        let a = key("a");
        let mut got = Vec::new();
        for _ in 0..5 {
            got.push(l.when(&a));
        }
        assert_eq!(got, [5, 10, 20, 40, 80].map(Duration::from_millis).to_vec());
        assert_eq!(
            l.when(&key("b")),
            Duration::from_millis(5),
            "keys back off independently"
        );
        for _ in 0..40 {
            l.when(&a);
        }
        assert_eq!(l.when(&a), Duration::from_secs(1000));
        assert_eq!(l.num_requeues(&a), 46);
        l.forget(&a);
        assert_eq!(l.num_requeues(&a), 0);
        assert_eq!(l.when(&a), Duration::from_millis(5));
    }

    #[test]
    fn exponential_survives_huge_exponents() {
        let l = ItemExponentialFailureRateLimiter::new(Duration::from_secs(1), Duration::from_secs(10));
        let a = key("a");
        for _ in 0..2000 {
            assert!(l.when(&a) <= Duration::from_secs(10));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn bucket_allows_the_burst_then_the_rate() {
        let l = BucketRateLimiter::new(10.0, 3);
        let k = key("a");
        assert_eq!(l.when(&k), Duration::ZERO);
        assert_eq!(l.when(&k), Duration::ZERO);
        assert_eq!(l.when(&k), Duration::ZERO);
        // Reservations: each further call waits one more token's worth.
        assert_eq!(l.when(&k), Duration::from_millis(100));
        assert_eq!(l.when(&k), Duration::from_millis(200));
        tokio::time::advance(Duration::from_millis(200)).await;
        // Two tokens refilled, both already reserved.
        assert_eq!(l.when(&k), Duration::from_millis(100));
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(l.when(&k), Duration::ZERO, "refills up to the burst");
    }

    #[test]
    fn bucket_edge_rates() {
        let unlimited = BucketRateLimiter::new(f64::INFINITY, 0);
        assert_eq!(unlimited.when(&key("a")), Duration::ZERO);
        let stopped = BucketRateLimiter::new(0.0, 1);
        assert_eq!(stopped.when(&key("a")), Duration::ZERO);
        assert_eq!(stopped.when(&key("a")), BucketRateLimiter::NEVER);
    }

    #[test]
    fn max_of_takes_the_largest_and_forgets_all() {
        let l = default_controller_rate_limiter();
        let a = key("a");
        assert_eq!(l.when(&a), Duration::from_millis(5));
        assert_eq!(l.num_requeues(&a), 1);
        l.forget(&a);
        assert_eq!(l.num_requeues(&a), 0);
        assert_eq!(MaxOfRateLimiter::new(Vec::new()).when(&a), Duration::ZERO);
    }
}
