//! What the queue does with a key whose reconcile succeeded.

use std::time::Duration;

/// The `Ok` of a [`Reconciler`](super::Reconciler): nothing more until the
/// object changes, or come back after a delay (kube-runtime's `Action`,
/// controller-runtime's `Result{RequeueAfter}`). A requeue is a success: no
/// log line, event or error metric counts it as a failure, and the key's
/// failure backoff starts again from the bottom. Typed reconcilers say the
/// same with `Reconciled::requeue_after`, which becomes this.
///
/// ```
/// use std::time::Duration;
/// use kinject_runtime::controller::Action;
///
/// assert_eq!(Action::await_change().requeue_delay(), None);
/// let later = Action::requeue_after(Duration::from_secs(90));
/// assert_eq!(later.requeue_delay(), Some(Duration::from_secs(90)));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[must_use = "return it from the reconcile"]
pub struct Action {
    requeue_after: Option<Duration>,
}

impl Action {
    /// Done: the key comes back when the object, or something it watches,
    /// changes (or at the next resync).
    pub fn await_change() -> Self {
        Action::default()
    }

    /// Reconcile the key again after `delay` (at once for zero), sooner if
    /// an event enqueues it meanwhile (Knative's `NewRequeueAfter`, as a
    /// value rather than an error).
    pub fn requeue_after(delay: Duration) -> Self {
        Action {
            requeue_after: Some(delay),
        }
    }

    /// When to come back, if the reconcile asked to.
    pub fn requeue_delay(&self) -> Option<Duration> {
        self.requeue_after
    }
}
