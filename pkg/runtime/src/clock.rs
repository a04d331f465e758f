//! The time a reconciler reads, from one place the process or a test sets:
//! a schedule-driven reconciler (a cron, a TTL, a certificate's expiry)
//! computes its next run from [`ReconcileContext::now`](crate::reconciler::ReconcileContext::now),
//! and a table test fixes that instant instead of racing the wall clock.

use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

/// A source of the current time; [`Clock::system`] unless a test says otherwise.
#[derive(Clone)]
pub struct Clock(Arc<dyn Fn() -> SystemTime + Send + Sync>);

impl Clock {
    /// The machine's clock.
    pub fn system() -> Self {
        Clock(Arc::new(SystemTime::now))
    }

    /// A clock that always says `at`.
    pub fn fixed(at: SystemTime) -> Self {
        Clock(Arc::new(move || at))
    }

    /// A clock that asks `now` (a test's settable time, say).
    pub fn from_fn(now: impl Fn() -> SystemTime + Send + Sync + 'static) -> Self {
        Clock(Arc::new(now))
    }

    /// The current time.
    pub fn now(&self) -> SystemTime {
        (self.0)()
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::system()
    }
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Clock").field(&self.now()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_fixed_clock_stands_still_and_a_function_clock_follows_its_function() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_900_000_000);
        assert_eq!(Clock::fixed(at).now(), at);
        assert_eq!(Clock::fixed(at).now(), at);
        let later = Clock::from_fn(move || at + Duration::from_secs(5));
        assert_eq!(later.now(), at + Duration::from_secs(5));
        assert!(Clock::system().now() > at - Duration::from_secs(1_000_000_000));
    }
}
