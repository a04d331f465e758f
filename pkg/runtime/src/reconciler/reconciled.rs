//! What a reconcile step achieved when it did not fail: done, done with an
//! event to record, or done for now and to be looked at again after a while
//! (controller-runtime's `Result{RequeueAfter}`), as a value rather than the
//! requeue error Knative returns, so a schedule is not a failure anywhere: not
//! in the logs, the `InternalError` events or the error metrics.

use std::time::Duration;

use crate::events::Event;

/// The success of a reconcile step (the `Ok` of
/// [`ReconcileResult`](super::ReconcileResult)).
///
/// ```
/// use std::time::Duration;
/// use kinject_runtime::reconciler::{Event, Reconciled};
///
/// let done = Reconciled::done();
/// let announced: Reconciled = Event::normal("Synced", "all good").into();
/// let scheduled = Reconciled::requeue_after(Duration::from_secs(60))
///     .with_event(Event::normal("Scheduled", "next run in 1m"));
/// assert_eq!(scheduled.requeue_delay(), Some(Duration::from_secs(60)));
/// # let _ = (done, announced);
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
#[must_use = "return it from the reconcile step"]
pub struct Reconciled {
    event: Option<Event>,
    requeue_after: Option<Duration>,
}

impl Reconciled {
    /// Nothing more to do until the object or what it watches changes.
    pub fn done() -> Self {
        Reconciled::default()
    }

    /// Done, with `event` to record about the object (Knative's bare
    /// `ReconcilerEvent`).
    pub fn event(event: Event) -> Self {
        Reconciled::done().with_event(event)
    }

    /// Done for now: reconcile the key again after `delay` (sooner if an
    /// event enqueues it meanwhile). A finalizer is not removed while its
    /// `finalize_kind` asks to come back.
    pub fn requeue_after(delay: Duration) -> Self {
        Reconciled {
            event: None,
            requeue_after: Some(delay),
        }
    }

    /// The same, with `event` to record.
    pub fn with_event(mut self, event: Event) -> Self {
        self.event = Some(event);
        self
    }

    /// The same, coming back after `delay`.
    pub fn and_requeue_after(mut self, delay: Duration) -> Self {
        self.requeue_after = Some(delay);
        self
    }

    /// The event to record, if any.
    pub fn recorded_event(&self) -> Option<&Event> {
        self.event.as_ref()
    }

    /// When to come back, if the step asked to.
    pub fn requeue_delay(&self) -> Option<Duration> {
        self.requeue_after
    }

    pub(super) fn into_parts(self) -> (Option<Event>, Option<Duration>) {
        (self.event, self.requeue_after)
    }
}

impl From<Event> for Reconciled {
    fn from(event: Event) -> Self {
        Reconciled::event(event)
    }
}

impl From<Option<Event>> for Reconciled {
    fn from(event: Option<Event>) -> Self {
        Reconciled {
            event,
            requeue_after: None,
        }
    }
}
