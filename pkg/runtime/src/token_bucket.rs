//! The one token bucket: the workqueue's overall retry limiter
//! ([`BucketRateLimiter`](crate::controller::BucketRateLimiter)) and the
//! client's QPS/burst limit both wait on it, as client-go's `flowcontrol` and
//! workqueue limiters both sit on `golang.org/x/time/rate`.
//!
//! Written here rather than taken from `governor`: client-go's semantics are
//! reservations (every call takes a token and is told how long until it is
//! due, so waiters are served in order), while `governor` answers "not yet"
//! and lets callers race; and tests need tokio's clock so paused time drives
//! the refill.

use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

/// `burst` tokens, refilled at `qps` per second.
#[derive(Debug)]
pub struct TokenBucket {
    qps: f64,
    burst: u32,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// Negative while tokens are owed to earlier reservations.
    tokens: f64,
    last: Option<Instant>,
}

impl TokenBucket {
    /// The wait returned when the bucket can never refill (a `qps` of zero): a
    /// year, long enough to mean "not until something else happens".
    pub const NEVER: Duration = Duration::from_secs(365 * 24 * 3600);

    /// A full bucket of `burst` tokens refilling at `qps` per second. A `qps` of
    /// infinity never waits; zero, a negative number or NaN allows the burst and
    /// then waits [`TokenBucket::NEVER`].
    pub fn new(qps: f64, burst: u32) -> Self {
        TokenBucket {
            qps,
            burst,
            state: Mutex::new(State {
                tokens: f64::from(burst),
                last: None,
            }),
        }
    }

    /// Takes a token and returns how long until it may be used.
    pub fn reserve(&self) -> Duration {
        if self.qps == f64::INFINITY {
            return Duration::ZERO;
        }
        let now = Instant::now();
        let mut state = self.state.lock();
        let elapsed = state
            .last
            .map_or(Duration::ZERO, |last| now.saturating_duration_since(last));
        // Zero, negative and NaN rates never refill.
        let refilling = self.qps > 0.0;
        let refill = if refilling {
            elapsed.as_secs_f64() * self.qps
        } else {
            0.0
        };
        let tokens = (state.tokens + refill).min(f64::from(self.burst)) - 1.0;
        state.tokens = tokens;
        state.last = Some(now);
        if tokens >= 0.0 {
            return Duration::ZERO;
        }
        if !refilling {
            return Self::NEVER;
        }
        Duration::try_from_secs_f64(-tokens / self.qps).map_or(Self::NEVER, |d| d.min(Self::NEVER))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn allows_a_burst_then_paces_at_qps() {
        let bucket = TokenBucket::new(5.0, 10);
        let waits: Vec<Duration> = (0..12).map(|_| bucket.reserve()).collect();
        assert!(waits[..10].iter().all(|w| w.is_zero()));
        assert_eq!(waits[10], Duration::from_millis(200));
        assert_eq!(waits[11], Duration::from_millis(400));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(
            bucket.reserve(),
            Duration::ZERO,
            "one second refilled 5 tokens, 2 were owed"
        );
        assert_eq!(bucket.reserve(), Duration::ZERO);
        assert_eq!(bucket.reserve(), Duration::ZERO);
        assert_eq!(bucket.reserve(), Duration::from_millis(200));
    }

    #[tokio::test(start_paused = true)]
    async fn infinite_rates_never_wait_and_zero_rates_stop_after_the_burst() {
        let unlimited = TokenBucket::new(f64::INFINITY, 0);
        assert_eq!(unlimited.reserve(), Duration::ZERO);
        for rate in [0.0, -1.0, f64::NAN] {
            let stopped = TokenBucket::new(rate, 1);
            assert_eq!(stopped.reserve(), Duration::ZERO, "{rate}");
            assert_eq!(stopped.reserve(), TokenBucket::NEVER, "{rate}");
        }
    }
}
