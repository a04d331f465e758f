//! The two-lane, rate-limited, delaying work queue behind every controller.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::ObjectKey;
use super::metrics::{QueueMetrics, QueueProbe, QueueSample, WorkqueueMetrics};
use super::rate_limiter::RateLimiter;

/// A delay far enough ahead to mean "never" when `now + delay` overflows.
const FAR_FUTURE: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// Which lane a key waits in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lane {
    /// Changes: drained first.
    Fast,
    /// Resyncs and promotions: drained when the fast lane is empty.
    Slow,
}

/// Why a key was queued. It travels with the key through the queue to the
/// worker, which names it in the reconcile span (`reason`), so a log line
/// says whether a reconcile answers a change or a resync.
///
/// A key queued twice before a worker takes it is reconciled once; it keeps
/// the reason it was first queued for, unless the second one moves it from
/// the slow lane to the fast lane (a change that arrives behind a resync).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Reason {
    /// The object itself was added, changed or deleted, or a caller queued
    /// its key directly.
    Changed,
    /// An object it depends on changed: a child it controls, an object
    /// naming it in a label, an object it tracks.
    Related,
    /// The informers re-delivered their caches, or a global resync.
    Resync,
    /// This replica started leading the key's bucket and catches up.
    Promoted,
    /// The reconciler asked to come back later, or a caller delayed the key.
    Requeue,
    /// The last reconcile failed; the key comes back with backoff.
    Retry,
}

impl Reason {
    /// The lane a key queued for this reason waits in: resyncs and
    /// promotions wait behind changes.
    pub fn lane(self) -> Lane {
        match self {
            Reason::Resync | Reason::Promoted => Lane::Slow,
            Reason::Changed | Reason::Related | Reason::Requeue | Reason::Retry => Lane::Fast,
        }
    }

    /// The reason as logged: `changed`, `related`, `resync`, `promoted`,
    /// `requeue` or `retry`.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Changed => "changed",
            Reason::Related => "related",
            Reason::Resync => "resync",
            Reason::Promoted => "promoted",
            Reason::Requeue => "requeue",
            Reason::Retry => "retry",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A key a worker took from the queue, and why it was queued.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Request {
    /// The object to reconcile.
    pub key: ObjectKey,
    /// Why it was queued.
    pub reason: Reason,
}

impl Request {
    /// A request for `key`, queued for `reason`.
    pub fn new(key: ObjectKey, reason: Reason) -> Self {
        Request { key, reason }
    }
}

/// The queue of keys a controller's workers reconcile. Cloning is cheap and
/// shares the queue.
///
/// It has client-go's workqueue semantics, with Knative's two lanes:
///
/// - **Dedupe.** A key waiting in the queue is not queued again; it is
///   processed once, with the latest state from the informer cache.
/// - **One worker per key.** A key being processed is never handed to a second
///   worker. Added again meanwhile, it is marked and queued when the first
///   worker calls [`done`](WorkQueue::done).
/// - **Two lanes.** [`add`](WorkQueue::add) uses the fast lane, for changes;
///   [`add_slow`](WorkQueue::add_slow) the slow lane, for resyncs and leader
///   promotions. Workers drain the fast lane first. A key waiting in the slow
///   lane that is added to the fast lane moves to the fast lane, so a real
///   change never waits behind a resync of thousands of objects.
/// - **Delays.** [`add_after`](WorkQueue::add_after) holds a key back; a key
///   that is already waiting keeps the earlier of its two times. Due keys go to
///   the fast lane.
/// - **Backoff.** [`add_rate_limited`](WorkQueue::add_rate_limited) asks the
///   [`RateLimiter`] for the delay; [`forget`](WorkQueue::forget) resets it.
/// - **Shutdown.** [`shut_down`](WorkQueue::shut_down) stops intake and drops
///   every key not being processed, queued or delayed: keys are level-triggered,
///   and the informers' initial list (or the next leader's resync) enqueues every
///   object again. Workers finish what they hold; [`get`](WorkQueue::get) then
///   returns `None`.
///
/// All times are tokio's, so tests run on a paused clock.
///
/// ```
/// use kinject_runtime::controller::{ObjectKey, Reason, WorkQueue, default_controller_rate_limiter};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let queue = WorkQueue::new("example", default_controller_rate_limiter());
/// let key = ObjectKey::new("default", "web");
/// queue.add_slow(key.clone());
/// queue.add(key.clone()); // moves to the fast lane; still one entry
/// assert_eq!((queue.len(), queue.slow_len()), (1, 0));
///
/// let got = queue.get().await.unwrap();
/// assert_eq!((&got.key, got.reason), (&key, Reason::Changed));
/// queue.done(&got.key);
/// queue.shut_down();
/// assert_eq!(queue.get().await, None);
/// # }
/// ```
#[derive(Clone)]
pub struct WorkQueue {
    shared: Arc<Shared>,
}

struct Shared {
    name: String,
    rate_limiter: Box<dyn RateLimiter>,
    metrics: Option<QueueMetrics>,
    state: Mutex<State>,
    notify: Notify,
    /// Wakes [`WorkQueue::processed`] each time a key is done.
    done: Notify,
}

#[derive(Default)]
struct State {
    next_seq: u64,
    fast: BTreeMap<u64, ObjectKey>,
    slow: BTreeMap<u64, ObjectKey>,
    /// Keys that need processing: queued in a lane (`seq` is their position), or
    /// added while being processed (`seq` is `None` until `done`).
    dirty: HashMap<ObjectKey, Dirty>,
    /// Keys handed to a worker, with the time they were handed out.
    processing: HashMap<ObjectKey, Instant>,
    /// Delayed keys by due time (and a sequence number to keep entries unique).
    waiting: BTreeMap<(Instant, u64), (ObjectKey, Reason)>,
    waiting_index: HashMap<ObjectKey, (Instant, u64)>,
    shutting_down: bool,
}

struct Dirty {
    lane: Lane,
    reason: Reason,
    seq: Option<u64>,
    added: Instant,
}

/// A copy of a queue's state, for tests and debugging.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueueSnapshot {
    /// Keys queued in the fast lane, in the order workers will take them.
    pub fast: Vec<ObjectKey>,
    /// Keys queued in the slow lane, in order.
    pub slow: Vec<ObjectKey>,
    /// Keys being processed, sorted.
    pub processing: Vec<ObjectKey>,
    /// Keys being processed that were added again meanwhile, sorted; each is
    /// queued when its worker calls [`WorkQueue::done`].
    pub requeued_after_processing: Vec<ObjectKey>,
    /// Delayed keys with the time left until each is due, soonest first.
    pub waiting: Vec<(ObjectKey, Duration)>,
    /// True once [`WorkQueue::shut_down`] was called.
    pub shutting_down: bool,
}

impl WorkQueue {
    /// An empty queue named `name` (the `name` label of its metrics) that asks
    /// `rate_limiter` how long a retried key waits.
    pub fn new(name: impl Into<String>, rate_limiter: impl RateLimiter) -> Self {
        Self::build(name.into(), Box::new(rate_limiter), None)
    }

    /// Like [`new`](Self::new), reporting into `metrics`.
    pub fn with_metrics(
        name: impl Into<String>,
        rate_limiter: impl RateLimiter,
        metrics: &WorkqueueMetrics,
    ) -> Self {
        Self::build(name.into(), Box::new(rate_limiter), Some(metrics))
    }

    pub(crate) fn build(
        name: String,
        rate_limiter: Box<dyn RateLimiter>,
        metrics: Option<&WorkqueueMetrics>,
    ) -> Self {
        let shared = Arc::new_cyclic(|weak: &Weak<Shared>| {
            let probe: Weak<dyn QueueProbe> = weak.clone();
            Shared {
                metrics: metrics.map(|m| m.for_queue(&name, probe)),
                name,
                rate_limiter,
                state: Mutex::default(),
                notify: Notify::new(),
                done: Notify::new(),
            }
        });
        WorkQueue { shared }
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// Queues `key` in the fast lane as [`Reason::Changed`], unless it is
    /// already queued there. A key waiting in the slow lane moves to the fast
    /// lane. No-op after shutdown.
    pub fn add(&self, key: ObjectKey) {
        self.add_for(key, Reason::Changed);
    }

    /// Queues `key` in the slow lane as [`Reason::Resync`], unless it is
    /// already queued in either lane. No-op after shutdown.
    pub fn add_slow(&self, key: ObjectKey) {
        self.add_for(key, Reason::Resync);
    }

    /// Queues `key` for `reason`, in [the lane of the reason](Reason::lane).
    /// No-op after shutdown.
    pub fn add_for(&self, key: ObjectKey, reason: Reason) {
        self.shared.add(key, reason);
    }

    /// Queues `key` in the fast lane as [`Reason::Requeue`] once `delay` has
    /// passed (at once for zero). A key already delayed keeps the earlier due
    /// time. No-op after shutdown.
    pub fn add_after(&self, key: ObjectKey, delay: Duration) {
        self.add_after_for(key, delay, Reason::Requeue);
    }

    fn add_after_for(&self, key: ObjectKey, delay: Duration, reason: Reason) {
        let shared = &self.shared;
        let mut state = shared.lock();
        if state.shutting_down {
            return;
        }
        if let Some(m) = &shared.metrics {
            m.retry();
        }
        if delay.is_zero() {
            shared.add_locked(&mut state, key, reason);
            return;
        }
        let now = Instant::now();
        let due = now
            .checked_add(delay)
            .or_else(|| now.checked_add(FAR_FUTURE))
            .unwrap_or(now);
        if let Some(&(existing, seq)) = state.waiting_index.get(&key) {
            if existing <= due {
                return;
            }
            state.waiting.remove(&(existing, seq));
        }
        let seq = state.take_seq();
        state.waiting.insert((due, seq), (key.clone(), reason));
        state.waiting_index.insert(key, (due, seq));
        drop(state);
        // A worker may be sleeping until a later due time; let one re-check.
        shared.notify.notify_one();
    }

    /// Queues `key` as [`Reason::Retry`] after the delay the rate limiter
    /// gives it: the per-key backoff for a key that keeps failing. Returns
    /// that delay; `None` (and no-op) after shutdown.
    pub fn add_rate_limited(&self, key: ObjectKey) -> Option<Duration> {
        if self.is_shutting_down() {
            return None;
        }
        let delay = self.shared.rate_limiter.when(&key);
        self.add_after_for(key, delay, Reason::Retry);
        Some(delay)
    }

    /// Resets `key`'s backoff, after it succeeded or was given up on.
    pub fn forget(&self, key: &ObjectKey) {
        self.shared.rate_limiter.forget(key);
    }

    /// How many times `key` was retried with backoff since it was last forgotten.
    pub fn num_requeues(&self, key: &ObjectKey) -> u32 {
        self.shared.rate_limiter.num_requeues(key)
    }

    /// Waits for the next key, fast lane first, and marks it as being processed;
    /// the caller must call [`done`](Self::done) with its key. Returns `None`
    /// once the queue is shut down.
    pub async fn get(&self) -> Option<Request> {
        let shared = &self.shared;
        loop {
            let notified = shared.notify.notified();
            tokio::pin!(notified);
            // Register before looking, so an add between the look and the wait
            // still wakes this worker.
            notified.as_mut().enable();
            let due = {
                let mut state = shared.lock();
                let now = Instant::now();
                shared.promote_due(&mut state, now);
                if state.shutting_down {
                    return None;
                }
                if let Some(key) = state.pop() {
                    let (added, reason) = state
                        .dirty
                        .remove(&key)
                        .map_or((now, Reason::Changed), |d| (d.added, d.reason));
                    state.processing.insert(key.clone(), now);
                    if let Some(m) = &shared.metrics {
                        m.started(now.saturating_duration_since(added));
                    }
                    let more = !state.fast.is_empty() || !state.slow.is_empty() || !state.waiting.is_empty();
                    drop(state);
                    if more {
                        // Pass the baton: another idle worker takes the next key
                        // or watches the next due time.
                        shared.notify.notify_one();
                    }
                    return Some(Request { key, reason });
                }
                state.waiting.keys().next().map(|&(due, _)| due)
            };
            match due {
                Some(due) => {
                    tokio::select! {
                        () = &mut notified => {}
                        () = tokio::time::sleep_until(due) => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    /// Marks `key` as processed. If it was added again while being processed, it
    /// is queued now, in the lane it was added to.
    pub fn done(&self, key: &ObjectKey) {
        let shared = &self.shared;
        let mut state = shared.lock();
        let Some(started) = state.processing.remove(key) else {
            return;
        };
        shared.done.notify_waiters();
        if let Some(m) = &shared.metrics {
            m.finished(Instant::now().saturating_duration_since(started));
        }
        let requeue = match state.dirty.get(key) {
            Some(d) if d.seq.is_none() && !state.shutting_down => Some(d.lane),
            _ => None,
        };
        if let Some(lane) = requeue {
            let seq = state.take_seq();
            state.lane_mut(lane).insert(seq, key.clone());
            if let Some(d) = state.dirty.get_mut(key) {
                d.seq = Some(seq);
            }
            drop(state);
            shared.notify.notify_one();
        }
    }

    /// Returns once no key that `matches` is being processed. Keys a worker
    /// takes after the call are waited for too while they run: a caller that
    /// first made sure new reconciles of such keys write nothing (a demoted
    /// bucket) waits out the ones that started before.
    pub async fn processed(&self, matches: impl Fn(&ObjectKey) -> bool) {
        loop {
            let done = self.shared.done.notified();
            tokio::pin!(done);
            // Register before looking, so a key done between the look and
            // the wait still wakes this caller.
            done.as_mut().enable();
            let busy = self.shared.lock().processing.keys().any(&matches);
            if !busy {
                return;
            }
            done.await;
        }
    }

    /// Stops intake and drops every key that is not being processed (queued or
    /// delayed); returns how many were dropped. Workers finish the keys they
    /// hold, and [`get`](Self::get) returns `None` from now on.
    pub fn shut_down(&self) -> usize {
        let shared = &self.shared;
        let mut state = shared.lock();
        if state.shutting_down {
            return 0;
        }
        state.shutting_down = true;
        let mut dropped: Vec<&ObjectKey> = state.dirty.keys().collect();
        dropped.extend(
            state
                .waiting_index
                .keys()
                .filter(|k| !state.dirty.contains_key(*k)),
        );
        let dropped = dropped.len();
        state.fast.clear();
        state.slow.clear();
        state.dirty.clear();
        state.waiting.clear();
        state.waiting_index.clear();
        drop(state);
        shared.notify.notify_waiters();
        dropped
    }

    /// True once [`shut_down`](Self::shut_down) was called.
    pub fn is_shutting_down(&self) -> bool {
        self.shared.lock().shutting_down
    }

    /// Keys queued in both lanes (not counting delayed keys or keys being
    /// processed).
    pub fn len(&self) -> usize {
        let state = self.shared.lock_promoted();
        state.fast.len() + state.slow.len()
    }

    /// True when no key is queued in either lane.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keys queued in the slow lane.
    pub fn slow_len(&self) -> usize {
        self.shared.lock_promoted().slow.len()
    }

    /// A copy of the queue's state (delayed keys that are due are queued first).
    /// Meant for tests: it shows what was enqueued without running workers or
    /// sleeping.
    pub fn snapshot(&self) -> QueueSnapshot {
        let state = self.shared.lock_promoted();
        let now = Instant::now();
        let mut processing: Vec<ObjectKey> = state.processing.keys().cloned().collect();
        processing.sort();
        let mut requeued: Vec<ObjectKey> = state
            .dirty
            .iter()
            .filter(|(_, d)| d.seq.is_none())
            .map(|(k, _)| k.clone())
            .collect();
        requeued.sort();
        QueueSnapshot {
            fast: state.fast.values().cloned().collect(),
            slow: state.slow.values().cloned().collect(),
            processing,
            requeued_after_processing: requeued,
            waiting: state
                .waiting
                .iter()
                .map(|(&(due, _), (k, _))| (k.clone(), due.saturating_duration_since(now)))
                .collect(),
            shutting_down: state.shutting_down,
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding the lock; recovering keeps the queue
        // usable even if that ever changes.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn add(&self, key: ObjectKey, reason: Reason) {
        let mut state = self.lock();
        if self.add_locked(&mut state, key, reason) {
            drop(state);
            self.notify.notify_one();
        }
    }

    /// Adds under the lock; true when a worker should be woken.
    fn add_locked(&self, state: &mut State, key: ObjectKey, reason: Reason) -> bool {
        let lane = reason.lane();
        if state.shutting_down {
            return false;
        }
        if let Some(dirty) = state.dirty.get(&key) {
            if lane == Lane::Fast && dirty.lane == Lane::Slow {
                let old_seq = dirty.seq;
                let new_seq = old_seq.map(|old| {
                    state.slow.remove(&old);
                    let seq = state.take_seq();
                    state.fast.insert(seq, key.clone());
                    seq
                });
                if let Some(dirty) = state.dirty.get_mut(&key) {
                    dirty.lane = Lane::Fast;
                    dirty.reason = reason;
                    dirty.seq = new_seq;
                }
                return new_seq.is_some();
            }
            return false;
        }
        if let Some(m) = &self.metrics {
            m.add();
        }
        let added = Instant::now();
        if state.processing.contains_key(&key) {
            state.dirty.insert(
                key,
                Dirty {
                    lane,
                    reason,
                    seq: None,
                    added,
                },
            );
            return false;
        }
        let seq = state.take_seq();
        state.lane_mut(lane).insert(seq, key.clone());
        state.dirty.insert(
            key,
            Dirty {
                lane,
                reason,
                seq: Some(seq),
                added,
            },
        );
        true
    }

    /// Queues delayed keys that are due (in the fast lane: they are requeues
    /// and retries); true when one was queued.
    fn promote_due(&self, state: &mut State, now: Instant) -> bool {
        let mut queued = false;
        while let Some(entry) = state.waiting.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let (key, reason) = entry.remove();
            state.waiting_index.remove(&key);
            queued |= self.add_locked(state, key, reason);
        }
        queued
    }

    /// The state with due keys queued, waking a worker for them. Readers use it
    /// so that what they see does not depend on whether a worker woke yet.
    fn lock_promoted(&self) -> MutexGuard<'_, State> {
        let mut state = self.lock();
        if self.promote_due(&mut state, Instant::now()) {
            self.notify.notify_one();
        }
        state
    }
}

impl State {
    fn take_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        seq
    }

    fn lane_mut(&mut self, lane: Lane) -> &mut BTreeMap<u64, ObjectKey> {
        match lane {
            Lane::Fast => &mut self.fast,
            Lane::Slow => &mut self.slow,
        }
    }

    /// The next key, fast lane first.
    fn pop(&mut self) -> Option<ObjectKey> {
        self.fast
            .pop_first()
            .or_else(|| self.slow.pop_first())
            .map(|(_, key)| key)
    }
}

impl QueueProbe for Shared {
    fn sample(&self) -> QueueSample {
        let state = self.lock_promoted();
        let now = Instant::now();
        QueueSample {
            depth: state.dirty.len(),
            processing_ages: state
                .processing
                .values()
                .map(|started| now.saturating_duration_since(*started))
                .collect(),
        }
    }
}

impl fmt::Debug for WorkQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.shared.lock();
        f.debug_struct("WorkQueue")
            .field("name", &self.shared.name)
            .field("fast", &state.fast.len())
            .field("slow", &state.slow.len())
            .field("processing", &state.processing.len())
            .field("waiting", &state.waiting.len())
            .field("shutting_down", &state.shutting_down)
            .finish()
    }
}
